"""Bottom-up rewriting of terms to the normal form of ``rules.py``, memoized.

The normal form: ``%``, ceil division and (sign-known) trunc division are
expressed with ``//``; every ``//`` has a positive-constant or symbolic
divisor, no part of the dividend that is an exact multiple of the divisor, and
no common integer factor.  Every step is an identity wherever the term is
defined, so divisors are normalized beside the terms, never dropped.
"""
from __future__ import annotations

import sympy
from sympy import Expr, Integer

from ..language import formula as F
from .bounds import Bounds
from .deadline import Deadline, OutOfTime
from .rules import RULES_BY_NODE
from ..language.terms import DIVISION_NODES, expanded

__all__ = ["Normalizer", "SharedForms"]

# normal forms kept per box: a Swin trace's thousand questions share their nested pad subterms
_SHARED_FORMS = 50_000


class SharedForms:
    """Normal forms over one box, shared by the questions asked over it, with the rules each rests on.

    A normal form depends only on its term and the ranges (the rules are
    identities checked by bounds over them, and ``TightBounds.tight`` of a term
    does not depend on what it bounded before), and only completed forms are
    put here, so a question finds exactly what it would have computed, and its
    verdict still names the rules; it may only finish within its step budget
    where alone it would not.  Entries are only ever added or all dropped, so
    concurrent questions may share one.
    """

    def __init__(self, limit: int = _SHARED_FORMS):
        self.limit = limit
        self._forms: dict[Expr, tuple[Expr, frozenset[str]]] = {}

    def __len__(self) -> int:
        return len(self._forms)

    def get(self, t: Expr) -> tuple[Expr, frozenset[str]] | None:
        return self._forms.get(t)

    def put(self, t: Expr, out: Expr, rules: frozenset[str]) -> None:
        if len(self._forms) >= self.limit:
            self._forms.clear()
        self._forms[t] = (out, rules)


class _OutOfBudget(OutOfTime):
    """The step budget or the deadline ran out while normalizing."""


class Normalizer:
    """Bottom-up rewriting of terms to the normal form of ``rules.py``, memoized."""

    def __init__(self, bounds: Bounds, deadline: Deadline | None = None, max_steps: int = 5000,
                 shared: SharedForms | None = None):
        self.bounds = bounds
        self.deadline = deadline
        self.max_steps = max_steps
        self.steps = 0
        self.memo: dict[Expr, Expr] = {}
        self.fired: dict[str, int] = {}
        self.shared = shared
        self._rules: dict[Expr, frozenset[str]] = {}     # with ``shared``: the rules each form rests on

    def __call__(self, t: Expr) -> Expr:
        if t.is_Atom:
            return t
        cached = self.memo.get(t)
        if cached is not None:
            return cached
        known = self.shared.get(t) if self.shared is not None else None
        if known is not None:
            out, rules = known
            for name in rules:                   # named as if they fired here
                self.fired[name] = self.fired.get(name, 0) + 1
        else:
            out, rules = self._normalize(t)
            if self.shared is not None:
                self.shared.put(t, out, rules)
        self.memo[t] = out
        if self.shared is not None:
            self._rules[t] = rules
        return out

    def _normalize(self, t: Expr) -> tuple[Expr, frozenset[str]]:
        """The normal form of ``t`` (no atom) and the rules it rests on."""
        args = [self(a) for a in t.args]
        rules: frozenset[str] = frozenset().union(*(self._rules_of(a) for a in t.args))
        if isinstance(t, (sympy.Add, sympy.Mul, sympy.Pow)):
            out = sympy.expand(t.func(*args), deep=False)
            new, rule = self._rewrite(out) if isinstance(out, sympy.Add) else (out, None)
            if rule is None:
                return out, rules
            return self(new), rules | {rule} | self._rules_of(new)
        node = t.func(*args)
        if type(node) is not type(t):
            return self(node), rules | self._rules_of(node)
        new, rule = self._rewrite(node)
        if rule is None:
            return node, rules
        return self(new), rules | {rule} | self._rules_of(new)

    def _rules_of(self, t: Expr) -> frozenset[str]:
        """The rules the normal form of ``t`` (a term this normalizer was given) rests on."""
        return self._rules.get(t, frozenset())

    def _rewrite(self, node: Expr) -> tuple[Expr, str | None]:
        """The first rule's rewrite of ``node`` and its name, or ``(node, None)`` where none applies."""
        if isinstance(node, DIVISION_NODES) and node.args[1] == 0:
            return node, None  # undefined everywhere; nothing to rewrite
        for rule in RULES_BY_NODE.get(type(node), ()):
            new = rule.apply(node, self.bounds)
            if new is None or new == node:
                continue
            self.steps += 1
            if self.steps > self.max_steps or (self.deadline is not None and self.deadline.expired()):
                raise _OutOfBudget
            self.fired[rule.name] = self.fired.get(rule.name, 0) + 1
            return new, rule.name
        return node, None

    def formula(self, f: F.Formula) -> F.Formula:
        if isinstance(f, F.Const):
            return f
        if isinstance(f, F.Rel):
            divs = frozenset(self(d) for d in f.divisors)
            return F.rel(f.op, self(expanded(f.lhs - f.rhs)), Integer(0), divs)
        return F.rebuilt(f, (self.formula(a) for a in f.args))
