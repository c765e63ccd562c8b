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
every fact goes through the solver's normalizer first, so ``x == 2*(x // 2)``
(what ``view``/``reshape`` emit) is recognized as divisibility too.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy
from sympy import Expr, Integer, Symbol

from shapeproof.solver import formula as F
from shapeproof.solver.bounds import Bounds
from shapeproof.solver.interval import tighten
from shapeproof.solver.rewrite import Normalizer
from shapeproof.solver.terms import FloorDiv

__all__ = ["Knowledge", "Learned"]

# Facts worth learning from (``T % 4 == 0``, ``s1 == 2*s0 + 1``) are small; expanding a large
# one (Swin's reshape guards run to thousands of nodes) can take minutes and teaches nothing.
_LEARNABLE_NODES = 200


def _learnable_difference(f: F.Formula) -> Expr | None:
    """``lhs - rhs`` expanded, for an equality of at most ``_LEARNABLE_NODES`` nodes; None otherwise."""
    if not (isinstance(f, F.Rel) and f.op == "=="):
        return None
    diff = f.lhs - f.rhs
    for count, _ in enumerate(sympy.preorder_traversal(diff), 1):
        if count > _LEARNABLE_NODES:
            return None
    return sympy.expand(diff)


@dataclass(frozen=True)
class Learned:
    """What one new fact taught: a substitution, a divisibility, or a plain fact."""

    kind: str                        # "substitution", "divisibility", "fact", "redundant"
    symbol: Symbol | None = None     # the eliminated symbol
    replacement: Expr | None = None
    divisor: int | None = None


class Knowledge:
    """Substitutions and facts, kept closed: no replacement mentions an eliminated symbol."""

    def __init__(self):
        self.replacements: dict[Symbol, Expr] = {}
        self.facts: list[F.Formula] = []
        self.version = 0

    # -- using what is known ---------------------------------------------------
    def term(self, t: Expr) -> Expr:
        return sympy.expand(t.xreplace(self.replacements)) if self.replacements else t

    def condition(self, f: F.Formula) -> F.Formula:
        return F.substitute(f, self.replacements)

    def relevant_facts(self, goal: F.Formula) -> tuple[F.Formula, ...]:
        """Facts connected to ``goal`` through shared symbols (transitively): the rest cannot matter."""
        wanted = set(goal.free_symbols)
        chosen: list[F.Formula] = []
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

    # -- learning ----------------------------------------------------------------
    def classify(self, fact: F.Formula, ranges: dict[Symbol, tuple], prefer_eliminating) -> Learned:
        """What ``fact`` (already substituted) can teach; ``prefer_eliminating(candidates)`` picks
        which symbol a substitution removes (or None to keep them all)."""
        if fact == F.TRUE:
            return Learned("redundant")
        if isinstance(fact, F.Rel):
            normal = Normalizer(Bounds(ranges)).formula(fact)
            found = self._divisibility(normal) or self._definition(normal, prefer_eliminating)
            if found is not None:
                return found
        return Learned("fact")

    def add_fact(self, fact: F.Formula, ranges: dict[Symbol, tuple]) -> None:
        """Keep ``fact`` as a premise and narrow ``ranges`` (in place) by the linear bounds it implies."""
        if fact != F.TRUE:
            self.facts.append(fact)
            self._tighten(ranges)
            self.version += 1

    def _divisibility(self, f: F.Formula) -> Learned | None:
        """``x - c*(x // c) == 0`` (that is ``x % c == 0``) for a symbol ``x`` and constant ``c > 1``."""
        diff = _learnable_difference(f)
        if diff is None:
            return None
        for atom in diff.atoms(FloorDiv):
            x, c = atom.args
            if isinstance(x, Symbol) and c.is_Integer and c > 1:
                mod = x - c * atom
                if sympy.expand(diff - mod) == 0 or sympy.expand(diff + mod) == 0:
                    return Learned("divisibility", x, None, int(c))
        return None

    def _definition(self, f: F.Formula, prefer_eliminating) -> Learned | None:
        """``s == e`` with ``s`` a symbol of coefficient +-1 that does not occur in ``e``."""
        diff = _learnable_difference(f)
        if diff is None or f.divisors:
            return None
        candidates = {}
        for term in sympy.Add.make_args(diff):
            coeff, rest = term.as_coeff_Mul()
            if isinstance(rest, Symbol) and coeff in (1, -1):
                expr = sympy.expand(rest - diff / coeff)
                if rest not in expr.free_symbols:
                    candidates[rest] = expr
        if not candidates:
            return None
        chosen = prefer_eliminating(list(candidates))
        return Learned("substitution", chosen, candidates[chosen]) if chosen is not None else None

    def eliminate(self, sym: Symbol, replacement: Expr, ranges: dict) -> None:
        """Replace ``sym`` by ``replacement`` everywhere; its range becomes facts on the replacement.

        ``ranges`` must already hold every symbol of ``replacement``.
        """
        mapping = {sym: replacement}
        self.replacements = {s: sympy.expand(e.xreplace(mapping)) for s, e in self.replacements.items()}
        self.replacements[sym] = replacement
        lo, hi = ranges.pop(sym, (None, None))
        self.facts = [f for f in (F.substitute(f, mapping) for f in self.facts) if f != F.TRUE]
        for op, bound in ((">=", lo), ("<=", hi)):
            if bound is not None:
                bound_fact = F.rel(op, replacement, Integer(bound))
                if bound_fact != F.TRUE and not isinstance(bound_fact, F.Const):
                    self.facts.append(bound_fact)
        self._tighten(ranges)
        self.version += 1

    def _tighten(self, ranges: dict) -> None:
        narrowed = tighten(ranges, self.facts)
        if narrowed is not None:
            ranges.update(narrowed)
