"""Interval bounds of terms over a box, sound for every point where the term is defined.

An ``Interval`` has integer ends or ``-inf``/``inf``; ``None`` stands for the
empty set (a term defined nowhere, e.g. ``x // 0``).  Division nodes are
bounded over the nonzero part of the divisor's interval, since a term says
nothing where it is undefined and formulas account for definedness through
their divisors.  Floor division is monotone in the dividend and, for a fixed
sign of the dividend, in the divisor, so its extremes lie at the corners.
"""
from __future__ import annotations

import math
from typing import Mapping, NamedTuple, Optional

import sympy
from sympy import Expr, Symbol

from . import floats as FL
from .terms import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv

__all__ = ["Interval", "INF", "bound", "Bounds", "point_interval"]

INF = math.inf


class Interval(NamedTuple):
    lo: float  # int or -inf
    hi: float  # int or inf

    @property
    def finite(self) -> bool:
        return self.lo != -INF and self.hi != INF

    def contains(self, value: int) -> bool:
        return self.lo <= value <= self.hi

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"


Maybe = Optional[Interval]
EVERYTHING = Interval(-INF, INF)


def point_interval(value: int) -> Interval:
    return Interval(value, value)


def _mul(a, b):
    if a == 0 or b == 0:
        return 0
    return a * b


def _hull(values) -> Interval:
    return Interval(min(values), max(values))


def _union(*parts: Maybe) -> Maybe:
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return Interval(min(p.lo for p in parts), max(p.hi for p in parts))


def _add(a: Interval, b: Interval) -> Interval:
    return Interval(a.lo + b.lo, a.hi + b.hi)


def _neg(a: Interval) -> Interval:
    return Interval(-a.hi, -a.lo)


def _times(a: Interval, b: Interval) -> Interval:
    return _hull([_mul(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)])


def _power(a: Interval, k: int) -> Interval:
    if k == 0:
        return Interval(1, 1)
    lo, hi = a.lo ** k, a.hi ** k
    if k % 2:
        return Interval(lo, hi)
    if a.lo >= 0:
        return Interval(lo, hi)
    if a.hi <= 0:
        return Interval(hi, lo)
    return Interval(0, max(lo, hi))


def _split_nonzero(b: Interval) -> tuple[Maybe, Maybe]:
    """The negative and positive parts of ``b`` (zero removed)."""
    neg = Interval(b.lo, min(b.hi, -1)) if b.lo <= -1 else None
    pos = Interval(max(b.lo, 1), b.hi) if b.hi >= 1 else None
    return neg, pos


def _fd_corner(x, y):
    """floor(x / y) for y >= 1, with x or y possibly infinite (conservative at inf/inf)."""
    if x in (INF, -INF):
        return x
    if y == INF:
        return 0 if x >= 0 else -1
    return x // y


def _floordiv_pos(a: Interval, b: Interval) -> Interval:
    return _hull([_fd_corner(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)])


def _floordiv(a: Interval, b: Interval) -> Maybe:
    neg, pos = _split_nonzero(b)
    return _union(_floordiv_pos(a, pos) if pos else None,
                  _floordiv_pos(_neg(a), _neg(neg)) if neg else None)


def _mod_pos(a: Interval, b: Interval) -> Interval:
    """a % b for b >= 1: in [0, b.hi - 1], tighter when ``a`` is small or spans one period."""
    if b.lo == b.hi and a.finite and a.lo // b.lo == a.hi // b.lo:
        return Interval(a.lo % b.lo, a.hi % b.lo)
    if a.lo >= 0 and a.hi < b.lo:
        return a
    upper = b.hi - 1
    if a.lo >= 0:
        upper = min(upper, a.hi)
    return Interval(0, upper)


def _mod(a: Interval, b: Interval) -> Maybe:
    neg, pos = _split_nonzero(b)
    return _union(_mod_pos(a, pos) if pos else None,
                  _neg(_mod_pos(_neg(a), _neg(neg))) if neg else None)


def _truncdiv(a: Interval, b: Interval) -> Maybe:
    floor = _floordiv(a, b)
    ceil = _floordiv(_neg(a), b)
    return _union(floor, _neg(ceil) if ceil else None)


class Bounds:
    """Interval evaluation of terms over a box, memoized per box."""

    def __init__(self, ranges: Mapping[Symbol, tuple]):
        self.box = {
            s: Interval(-INF if lo is None else lo, INF if hi is None else hi) for s, (lo, hi) in ranges.items()
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
        if isinstance(term, FL.FLOAT_WRAPPERS):     # float sub-expressions are bounded only loosely
            return Interval(0, 1) if isinstance(term, FL.COMPARISONS) else (
                Interval(1, 1) if isinstance(term, FL.Defined) else EVERYTHING)
        parts = [self(a) for a in term.args]
        if any(p is None for p in parts):
            return None
        if isinstance(term, sympy.Add):
            out = parts[0]
            for p in parts[1:]:
                out = _add(out, p)
            return out
        if isinstance(term, sympy.Mul):
            out = parts[0]
            for p in parts[1:]:
                out = _times(out, p)
            return out
        if isinstance(term, sympy.Pow):
            exponent = term.args[1]
            if exponent.is_Integer and exponent >= 0:
                return _power(parts[0], int(exponent))
            raise TypeError(f"not an integer term: {term}")
        if isinstance(term, FloorDiv):
            return _floordiv(*parts)
        if isinstance(term, Mod):
            return _mod(*parts)
        if isinstance(term, CeilDiv):
            q = _floordiv(_neg(parts[0]), parts[1])
            return _neg(q) if q else None
        if isinstance(term, TruncDiv):
            return _truncdiv(*parts)
        if isinstance(term, Min):
            return Interval(min(p.lo for p in parts), min(p.hi for p in parts))
        if isinstance(term, Max):
            return Interval(max(p.lo for p in parts), max(p.hi for p in parts))
        raise TypeError(f"not an integer term: {term} ({type(term).__name__})")

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
