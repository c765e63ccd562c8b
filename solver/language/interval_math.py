"""Interval arithmetic on integer ends (``-inf``/``inf`` for unbounded), sound for Python's operators.

``None`` stands for the empty set (a term defined nowhere, e.g. ``x // 0``).
Division is bounded over the nonzero part of the divisor's interval, since a
term says nothing where it is undefined and formulas account for definedness
through their divisors.  Floor division is monotone in the dividend and, for a
fixed sign of the dividend, in the divisor, so its extremes lie at the corners.
"""
from __future__ import annotations

import math
from functools import reduce
from typing import NamedTuple, Optional

__all__ = ["Interval", "INF", "EVERYTHING", "point_interval", "add", "neg", "times", "power", "floordiv",
           "ceildiv", "mod", "truncdiv", "minimum", "maximum", "sum_of", "product_of", "isqrt"]

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
    try:
        return a * b
    except OverflowError:       # an int past the largest double times an infinite end
        return INF if (a > 0) == (b > 0) else -INF


def _plus(a, b):
    try:
        return a + b
    except OverflowError:       # an int past the largest double beside an infinite end, which wins
        return a if isinstance(a, float) else b


def _hull(values) -> Interval:
    return Interval(min(values), max(values))


def union(*parts: Maybe) -> Maybe:
    present = [p for p in parts if p is not None]
    if not present:
        return None
    return Interval(min(p.lo for p in present), max(p.hi for p in present))


def add(a: Interval, b: Interval) -> Interval:
    return Interval(_plus(a.lo, b.lo), _plus(a.hi, b.hi))


def neg(a: Interval) -> Interval:
    return Interval(-a.hi, -a.lo)


def times(a: Interval, b: Interval) -> Interval:
    return _hull([_mul(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)])


def sum_of(*parts: Interval) -> Interval:
    return reduce(add, parts)


def product_of(*parts: Interval) -> Interval:
    return reduce(times, parts)


def power(a: Interval, exponent: Interval) -> Interval:
    """``a ** k`` for the constant natural ``k`` that ``exponent`` holds."""
    k = int(exponent.lo)
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
    negative = Interval(b.lo, min(b.hi, -1)) if b.lo <= -1 else None
    positive = Interval(max(b.lo, 1), b.hi) if b.hi >= 1 else None
    return negative, positive


def _fd_corner(x, y):
    """floor(x / y) for y >= 1, with x or y possibly infinite (conservative at inf/inf)."""
    if x in (INF, -INF):
        return x
    if y == INF:
        return 0 if x >= 0 else -1
    return x // y


def _floordiv_pos(a: Interval, b: Interval) -> Interval:
    return _hull([_fd_corner(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)])


def floordiv(a: Interval, b: Interval) -> Maybe:
    negative, positive = _split_nonzero(b)
    return union(_floordiv_pos(a, positive) if positive else None,
                 _floordiv_pos(neg(a), neg(negative)) if negative else None)


def ceildiv(a: Interval, b: Interval) -> Maybe:
    q = floordiv(neg(a), b)
    return neg(q) if q else None


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


def mod(a: Interval, b: Interval) -> Maybe:
    negative, positive = _split_nonzero(b)
    return union(_mod_pos(a, positive) if positive else None,
                 neg(_mod_pos(neg(a), neg(negative))) if negative else None)


def truncdiv(a: Interval, b: Interval) -> Maybe:
    floor = floordiv(a, b)
    ceil = floordiv(neg(a), b)
    return union(floor, neg(ceil) if ceil else None)


def minimum(*parts: Interval) -> Interval:
    return Interval(min(p.lo for p in parts), min(p.hi for p in parts))


def maximum(*parts: Interval) -> Interval:
    return Interval(max(p.lo for p in parts), max(p.hi for p in parts))


def isqrt(a: Interval) -> Maybe:
    """``math.isqrt`` over the part of ``a`` that is not negative (None where there is none): monotone."""
    if a.hi < 0:
        return None
    lo = 0 if a.lo <= 0 else math.isqrt(int(a.lo))
    return Interval(lo, INF if a.hi == INF else math.isqrt(int(a.hi)))
