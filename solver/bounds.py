"""Interval bounds of terms over a box, sound for every point where the term is defined.

An ``Interval`` has integer ends or ``-inf``/``inf``; ``None`` stands for the
empty set (a term defined nowhere, e.g. ``x // 0``).  Division nodes are
bounded over the nonzero part of the divisor's interval, since a term says
nothing where it is undefined and formulas account for definedness through
their divisors.  Floor division is monotone in the dividend and, for a fixed
sign of the dividend, in the divisor, so its extremes lie at the corners.
"""
from __future__ import annotations

from typing import Mapping, Optional

import sympy
from sympy import Expr, Symbol

from .interval_math import EVERYTHING, INF, Interval, point_interval
from .nodes import row_of

__all__ = ["Interval", "INF", "bound", "Bounds", "point_interval"]

Maybe = Optional[Interval]


class Bounds:
    """Interval evaluation of terms over a box, memoized per box."""

    def __init__(self, ranges: Mapping[Symbol, tuple]):
        self.box = {
            s: Interval(-INF if lo is None else lo, INF if hi is None else hi)
            for s, (lo, hi) in ranges.items()
        }
        self.memo: dict[Expr, Maybe] = {}

    def __call__(self, term: Expr) -> Maybe:
        if term.is_Integer:
            return point_interval(int(term))
        if term in self.memo:
            return self.memo[term]
        result = self._compute(term)
        self.memo[term] = result
        return result

    def _compute(self, term: Expr) -> Maybe:
        if isinstance(term, Symbol):
            return self.box.get(term, EVERYTHING)
        row = row_of(term)
        if row.rounding is not None:
            monotone = self._monotone_rounding(term)
            if monotone is not None:
                return monotone
        if row.is_wrapper or row.is_float:      # float sub-expressions are bounded only loosely
            return row.interval(*(EVERYTHING for _ in term.args))
        parts = [self(a) for a in term.args]
        if any(p is None for p in parts):
            return None
        return row.interval(*parts)

    def _monotone_rounding(self, term: Expr) -> Maybe:
        """A rounding of a float that is monotone in one integer term (``floats.monotone_in``): its values
        at that term's ends, in Python (an open end, or one where Python raises, stays open)."""
        from .evaluate import Undefined, evaluate_term          # evaluate builds on formula, on this
        from .floats import monotone_in
        found = monotone_in(term.args[0])
        inner = None if found is None else self(found.term)
        if found is None or inner is None:
            return None
        t, direction = found.term, found.direction

        def at(end, toward):
            if end in (INF, -INF):
                return toward
            try:
                return evaluate_term(term.xreplace({t: sympy.Integer(int(end))}), {})
            except Undefined:
                return toward

        lo, hi = at(inner.lo, -INF * direction), at(inner.hi, INF * direction)
        return Interval(lo, hi) if direction > 0 else Interval(hi, lo)

    def tight(self, term: Expr) -> Maybe:
        """Interval of ``term`` for a decision that matters; subclasses may work harder for it."""
        return self(term)

    def nonzero(self, term: Expr) -> bool:
        """True when ``term`` is nonzero at every point of the box where it is defined."""
        b = self(term)
        return b is None or b.lo > 0 or b.hi < 0


def bound(term: Expr, ranges: Mapping[Symbol, tuple]) -> Maybe:
    """Interval of ``term`` over the box ``ranges`` (``None`` if it is defined nowhere)."""
    return Bounds(ranges)(term)
