"""What the environment has learned from guards and checks, in a form every query uses.

Three kinds of knowledge, all exact:

* *substitutions*: a fact ``s1 == s0`` or ``s0 == 2*s2 + 1`` eliminates a
  symbol everywhere (the eliminated symbol's range becomes a fact on its
  replacement);
* *divisibility*: ``x % 8 == 0`` introduces ``k`` with ``x = 8*k``, so later
  queries such as ``(x // 8) * 8 == x`` are plain algebra;
* *facts*: any other condition, kept as a premise for later queries, with the
  linear bounds it implies applied to the symbols' ranges.

torch's own ShapeEnv learns replacements only from equalities without a real
``//`` and divisibility only from the literal ``Mod(x, c) == 0`` form; here
every fact goes through ``solver.classify_fact`` (the rewriter's own
classifier, after normalization), so ``x == 2*(x // 2)`` (what
``view``/``reshape`` emit) is recognized as divisibility too.
"""
from __future__ import annotations


import sympy
from sympy import Expr, Integer, Symbol

from shapeproof import solver as S
from shapeproof.solver import Bounds, Learned, tighten

__all__ = ["Knowledge", "Learned"]


class Knowledge:
    """Substitutions and facts, kept closed: no replacement mentions an eliminated symbol."""

    def __init__(self):
        self.replacements: dict[Symbol, Expr] = {}
        self.facts: list[S.Formula] = []
        self.version = 0
        # a trace asks about the same few hundred terms thousands of times, and its terms repeat the
        # same subterms (a pad amount dozens of times in one Swin guard): every subterm is substituted
        # once, and results are kept until the replacements change
        self._terms: dict[Expr, Expr] = {}
        self._conditions: dict[S.Formula, S.Formula] = {}

    # -- using what is known ---------------------------------------------------
    def term(self, t: Expr) -> Expr:
        """``t`` with the replacements, each product or power they touch expanded (``4*k*(k + 1)``)."""
        if not self.replacements:
            return t
        done = self._terms.get(t)
        if done is None:
            done = self._terms[t] = self._substituted(t)
        return done

    def _substituted(self, t: Expr) -> Expr:
        # bottom-up over the term's DAG: sympy's own ``expand(t.xreplace(...))`` walks a shared subterm
        # once per occurrence, at every one of its hints
        if not t.args:
            return self.replacements.get(t, t)
        args = tuple(self.term(a) for a in t.args)
        if all(new is old for new, old in zip(args, t.args)):
            return t
        rebuilt = t.func(*args)
        return sympy.expand(rebuilt, deep=False) if isinstance(rebuilt, Expr) else rebuilt

    def condition(self, f: S.Formula) -> S.Formula:
        if not self.replacements:
            return f
        done = self._conditions.get(f)
        if done is None:
            done = self._conditions[f] = self._substituted_condition(f)
        return done

    def _substituted_condition(self, f: S.Formula) -> S.Formula:
        if isinstance(f, S.Rel):
            if f.free_symbols.isdisjoint(self.replacements):
                return f
            divisors = frozenset(self.term(d) for d in f.divisors)
            return S.rel(f.op, self.term(f.lhs), self.term(f.rhs), divisors)
        if isinstance(f, (S.And, S.Or)):
            return S.rebuilt(f, (self.condition(a) for a in f.args))
        return f

    def relevant_facts(self, goal: S.Formula) -> tuple[S.Formula, ...]:
        """Facts connected to ``goal`` through shared symbols (transitively): the rest cannot matter."""
        wanted = set(goal.free_symbols)
        chosen: list[S.Formula] = []
        pending = list(self.facts)
        grew = True
        while grew and pending:
            grew = False
            for fact in list(pending):
                if fact.free_symbols & wanted:
                    chosen.append(fact)
                    wanted |= fact.free_symbols
                    pending.remove(fact)
                    grew = True
        return tuple(chosen)

    # -- learning (what a fact teaches is ``solver.classify_fact``) -------------
    def add_fact(self, fact: S.Formula, ranges: dict[Symbol, tuple]) -> None:
        """Keep ``fact`` as a premise and narrow ``ranges`` (in place) by the linear bounds it implies."""
        if fact != S.TRUE:
            self.facts.append(fact)
            self._tighten(ranges)
            self.version += 1

    def eliminate(self, sym: Symbol, replacement: Expr, ranges: dict) -> None:
        """Replace ``sym`` by ``replacement`` everywhere; its range becomes facts on the replacement.

        ``ranges`` must already hold every symbol of ``replacement``.
        """
        mapping = {sym: replacement}
        self.replacements = {s: sympy.expand(e.xreplace(mapping)) for s, e in self.replacements.items()}
        self.replacements[sym] = replacement
        self._terms, self._conditions = {}, {}
        lo, hi = ranges.pop(sym, (None, None))
        self.facts = [f for f in (S.substitute(f, mapping) for f in self.facts) if f != S.TRUE]
        span = Bounds(ranges)(replacement)   # x = 2*k with k in [2, 256] needs no fact 2*k >= 4
        for op, bound, implied in ((">=", lo, span is not None and lo is not None and span.lo >= lo),
                                   ("<=", hi, span is not None and hi is not None and span.hi <= hi)):
            if bound is not None and not implied:
                bound_fact = S.rel(op, replacement, Integer(bound))
                if bound_fact != S.TRUE and not isinstance(bound_fact, S.Const):
                    self.facts.append(bound_fact)
        self._tighten(ranges)
        self.version += 1

    def _tighten(self, ranges: dict) -> None:
        narrowed = tighten(ranges, self.facts)
        if narrowed is not None:
            ranges.update(narrowed)
