"""What one fact teaches, decided once for the shape environment and the rewriter alike.

A fact (an equality, after normalization) can be

* a *divisibility*: ``x - c*(x // c) == 0``, i.e. ``x % c == 0`` for a symbol
  ``x`` and a constant ``c > 1`` (then ``x = c*k`` for a new ``k``);
* a *definition*: ``s == e`` for a symbol ``s`` of coefficient ±1 that does not
  occur in ``e`` and no divisor to keep (then ``s`` is substituted away);
* anything else: a plain fact, kept as a premise.

A plain fact may still imply a divisibility it does not state: the numel
check of ``pixel_unshuffle(2)``, ``H*W == 4*(H // 2)*(W // 2)``, holds only
for even ``H`` and ``W``.  ``divisibility_candidates`` names the ones worth
proving (the caller proves them: it holds the solver and the example values).

``shapes.Knowledge`` learns from guards with it, and ``rewrite`` reduces a
query's facts with it, so both recognize exactly the same facts.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Mapping

import sympy
from sympy import Expr, Symbol

from ..language import formula as F
from .bounds import Bounds
from .normalize import Normalizer
from ..language.terms import DIVISION_NODES, FloorDiv, iter_nodes

__all__ = ["LearnedKind", "Learned", "classify_fact", "learned_from", "LEARNABLE_NODES",
           "divisibility_candidates"]

# Facts worth learning from (``T % 4 == 0``, ``s1 == 2*s0 + 1``) are small; expanding a large
# one (Swin's reshape guards run to thousands of nodes) can take minutes and teaches nothing.
LEARNABLE_NODES = 200

Prefer = Callable[[list[Symbol]], "Symbol | None"]


class LearnedKind(str, Enum):
    SUBSTITUTION = "substitution"  # ``s1 == 2*s0 + 1``: one symbol is replaced everywhere
    DIVISIBILITY = "divisibility"  # ``T % 4 == 0``: the symbol ranges over multiples
    FACT = "fact"                  # anything else is kept as an assumption
    REDUNDANT = "redundant"        # already true: nothing to keep


@dataclass(frozen=True)
class Learned:
    """What one new fact taught: a substitution, a divisibility, or a plain fact."""

    kind: LearnedKind
    symbol: Symbol | None = None     # the eliminated symbol
    replacement: Expr | None = None
    divisor: int | None = None


def classify_fact(fact: F.Formula, ranges: Mapping[Symbol, tuple], prefer_eliminating: Prefer,
                  max_nodes: int | None = LEARNABLE_NODES) -> Learned:
    """What ``fact`` (already substituted) teaches, normalized over ``ranges``.

    ``prefer_eliminating(candidates)`` picks which symbol a substitution removes (or None to keep them all).
    """
    if fact == F.TRUE:
        return Learned(LearnedKind.REDUNDANT)
    if isinstance(fact, F.Rel):
        normal = Normalizer(Bounds(ranges)).formula(fact)
        if normal == F.TRUE:
            return Learned(LearnedKind.REDUNDANT)
        found = learned_from(normal, prefer_eliminating, max_nodes)
        if found is not None:
            return found
    return Learned(LearnedKind.FACT)


def learned_from(normal: F.Formula, prefer_eliminating: Prefer,
                 max_nodes: int | None = None) -> Learned | None:
    """The divisibility or substitution a normalized fact states, if any."""
    if not isinstance(normal, F.Rel):
        return None
    diff = _difference(normal, max_nodes)
    if diff is None:
        return None
    for atom in diff.atoms(FloorDiv):
        x, c = atom.args
        if isinstance(x, Symbol) and c.is_Integer and c > 1:
            mod = x - c * atom
            if sympy.expand(diff - mod) == 0 or sympy.expand(diff + mod) == 0:
                return Learned(LearnedKind.DIVISIBILITY, x, None, int(c))
    if normal.divisors:
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
    return Learned(LearnedKind.SUBSTITUTION, chosen, candidates[chosen]) if chosen is not None else None


def divisibility_candidates(fact: F.Formula, max_nodes: int = LEARNABLE_NODES) -> list[tuple[Symbol, int]]:
    """``(x, c)`` for each ``x // c``, ``x % c`` (or another division) of a symbol by a constant ``c > 1``
    in a fact of at most ``max_nodes`` nodes, in a stable order: the divisibilities it may imply."""
    found: set[tuple[Symbol, int]] = set()
    nodes = (node for side in F.relations(fact) for node in iter_nodes(side.lhs - side.rhs))
    for count, node in enumerate(nodes, 1):
        if count > max_nodes:
            return []
        if (isinstance(node, DIVISION_NODES) and isinstance(node.args[0], Symbol)
                and node.args[1].is_Integer and node.args[1] > 1):
            found.add((node.args[0], int(node.args[1])))
    return sorted(found, key=lambda pair: (pair[0].name, pair[1]))


def _difference(f: F.Formula, max_nodes: int | None) -> Expr | None:
    """``lhs - rhs`` expanded, for an equality of at most ``max_nodes`` nodes; None otherwise."""
    if not (isinstance(f, F.Rel) and f.op == "=="):
        return None
    diff = f.lhs - f.rhs
    if max_nodes is not None:
        for count, _ in enumerate(sympy.preorder_traversal(diff), 1):
            if count > max_nodes:
                return None
    return sympy.expand(diff)
