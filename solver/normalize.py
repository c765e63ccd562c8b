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

from . import formula as F
from .bounds import Bounds
from .problem import Deadline, OutOfTime
from .rules import RULES_BY_NODE
from .terms import DIVISION_NODES

__all__ = ["Normalizer"]


class _OutOfBudget(OutOfTime):
    """The step budget or the deadline ran out while normalizing."""


class Normalizer:
    """Bottom-up rewriting of terms to the normal form of ``rules.py``, memoized."""

    def __init__(self, bounds: Bounds, deadline: Deadline | None = None, max_steps: int = 5000):
        self.bounds = bounds
        self.deadline = deadline
        self.max_steps = max_steps
        self.steps = 0
        self.memo: dict[Expr, Expr] = {}
        self.fired: dict[str, int] = {}

    def __call__(self, t: Expr) -> Expr:
        if t.is_Atom:
            return t
        cached = self.memo.get(t)
        if cached is not None:
            return cached
        args = [self(a) for a in t.args]
        if isinstance(t, (sympy.Add, sympy.Mul, sympy.Pow)):
            out = sympy.expand(t.func(*args), deep=False)
        else:
            node = t.func(*args)
            out = self._rewrite(node) if type(node) is type(t) else self(node)
        self.memo[t] = out
        return out

    def _rewrite(self, node: Expr) -> Expr:
        if isinstance(node, DIVISION_NODES) and node.args[1] == 0:
            return node  # undefined everywhere; nothing to rewrite
        for rule in RULES_BY_NODE.get(type(node), ()):
            new = rule.apply(node, self.bounds)
            if new is None or new == node:
                continue
            self.steps += 1
            if self.steps > self.max_steps or (self.deadline is not None and self.deadline.expired()):
                raise _OutOfBudget
            self.fired[rule.name] = self.fired.get(rule.name, 0) + 1
            return self(new)
        return node

    def formula(self, f: F.Formula) -> F.Formula:
        if isinstance(f, F.Const):
            return f
        if isinstance(f, F.Rel):
            divs = frozenset(self(d) for d in f.divisors)
            return F.rel(f.op, self(sympy.expand(f.lhs - f.rhs)), Integer(0), divs)
        return (F.conj if isinstance(f, F.And) else F.disj)(*(self.formula(a) for a in f.args))
