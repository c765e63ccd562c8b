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
import sys
from typing import Mapping, NamedTuple, Optional

import sympy
from sympy import Expr, Symbol

from ..language import interval_math as I
from ..language.interval_math import EVERYTHING, INF, Interval, point_interval
from ..language.evaluate import Undefined, evaluate_term
from ..language.floats import monotone_in
from ..language.nodes import (
    DOUBLE_OVERFLOW, FAdd, FDiv, FFloorDiv, FloatConst, FloatPow, FloatTerm, FMod, FMul, FNeg, FSqrt, FSub,
    IntTrueDiv, Kind, ToFloat, row_of,
)

__all__ = ["Interval", "INF", "bound", "Bounds", "point_interval"]

Maybe = Optional[Interval]


class Bounds:
    """Interval evaluation of terms over a box, memoized per box."""

    def __init__(self, ranges: Mapping[Symbol, tuple]):
        self.box = {
            s: Interval(-INF if lo is None else lo, INF if hi is None else hi)
            for s, (lo, hi) in ranges.items()
        }
        self.memo: dict = {}      # terms' intervals, ('float', t) enclosures, ('evaluates', t) answers

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
        if row.is_wrapper:                      # over float sub-expressions: their enclosures (``floats``)
            return self._wrapper(term, row)
        parts = [self(a) for a in term.args]
        if any(p is None for p in parts):
            return None
        return row.interval(*parts)

    def floats(self, term: Expr) -> "FloatRange | None":
        """An enclosure of the float term ``term`` over the box (``FloatRange``), None where it is defined
        nowhere; memoized with the integer bounds."""
        key = ("float", term)
        if key in self.memo:
            return self.memo[key]
        result = _float_range(term, self)
        self.memo[key] = result
        return result

    def evaluates(self, term: Expr) -> bool:
        """Whether Python evaluates every float node of ``term`` without raising at each point of the box
        where its integer divisions are defined (those a relation carries among its divisors); memoized."""
        if term.is_Atom or row_of(term).kind is Kind.FLOAT_CONST:
            return True
        key = ("evaluates", term)
        if key not in self.memo:
            self.memo[key] = all(self.evaluates(a) for a in term.args) and (
                not _may_raise(term) or _raises_nowhere(term, self))
        return self.memo[key]

    def _side(self, term: Expr):
        """An argument of a comparison: a float term's enclosure, or an int term's interval (no nan)."""
        if _is_float(term):
            return self.floats(term)
        b = self(term)
        return None if b is None else FloatRange(b.lo, b.hi, False)

    def _wrapper(self, term: Expr, row) -> Maybe:
        """An integer node over floats: a rounding of the float's finite values, a comparison decided by
        the enclosures of its sides, or ``Defined`` (1 where its argument is defined)."""
        if row.kind is Kind.DEFINED:
            inner = term.args[0]
            defined = self.floats(inner) if _is_float(inner) else self(inner)
            return None if defined is None else point_interval(1)
        if row.kind is Kind.COMPARISON:
            a, b = self._side(term.args[0]), self._side(term.args[1])
            if a is None or b is None:
                return None
            return _comparison(row.infix, a, b)
        f = self.floats(term.args[0])                # a rounding: Python raises on inf and nan
        if f is None or (f.lo == f.hi and f.lo in (INF, -INF)):
            return None
        rnd = row.python
        return Interval(-INF if f.lo in (INF, -INF) else rnd(f.lo), INF if f.hi in (INF, -INF) else rnd(f.hi))

    def _monotone_rounding(self, term: Expr) -> Maybe:
        """A rounding of a float that is monotone in one integer term (``floats.monotone_in``): its values
        at that term's ends, in Python (an open end, or one where Python raises, stays open)."""
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


# ---------------------------------------------------------------------------------------------
# Enclosures of float terms: every value Python computes at a point of the box where the term does not
# raise lies in [lo, hi] (doubles, possibly infinite), or is nan where ``nan`` says it may be.  IEEE
# rounding is monotone, so the rounded values at the ends of an exact range enclose the rounded values
# inside it; ``pow`` (not correctly rounded) is widened by a relative 2**-40.

def _is_float(term: Expr) -> bool:
    return isinstance(term, FloatTerm)


class FloatRange(NamedTuple):
    lo: float
    hi: float
    nan: bool = False

    @property
    def finite(self) -> bool:
        return not self.nan and math.isfinite(self.lo) and math.isfinite(self.hi)


TOP = FloatRange(-INF, INF, True)
_MAX = sys.float_info.max
_POW_SLACK = 2.0 ** -40


def _clip(lo, hi) -> FloatRange:
    """The finite enclosure of values that Python computes without overflow (they are finite doubles)."""
    return FloatRange(max(lo, -_MAX), min(hi, _MAX))


def _int_to_float(a: Interval) -> FloatRange | None:
    """``float(n)`` over ``n`` in ``a``: raises from ``DOUBLE_OVERFLOW`` on."""
    lo = max(a.lo, -(DOUBLE_OVERFLOW - 1))
    hi = min(a.hi, DOUBLE_OVERFLOW - 1)
    if lo > hi:
        return None
    return FloatRange(float(int(lo)), float(int(hi)))


def _true_div(a: Interval, b: Interval) -> FloatRange | None:
    """Python's ``a / b`` on ints: the exact quotient rounded once; raises at 0 and on overflow."""
    negative, positive = I._split_nonzero(b)
    ends = []
    for part, sign in ((positive, 1), (negative, -1)):
        if part is None:
            continue
        for x in (a.lo, a.hi):
            for y in (part.lo, part.hi):
                if x in (INF, -INF):
                    ends.append(x * sign)
                elif y in (INF, -INF):
                    ends.append(0.0)
                else:
                    try:
                        ends.append(int(x) / int(y))
                    except OverflowError:
                        ends.append(INF if (x > 0) == (y > 0) else -INF)
    if not ends:
        return None
    return _clip(min(ends), max(ends))


def _corners(op, a: FloatRange, b: FloatRange) -> FloatRange:
    values = [op(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    if any(v != v for v in values):
        return TOP
    return FloatRange(min(values), max(values), a.nan or b.nan)


def _has_zero(a: FloatRange) -> bool:
    return a.lo <= 0 <= a.hi


def _has_inf(a: FloatRange) -> bool:
    return a.lo in (INF, -INF) or a.hi in (INF, -INF)


def _divide(a: FloatRange, b: FloatRange) -> FloatRange | None:
    """``a / b`` on doubles: raises where ``b`` is 0; each sign of ``b`` apart (monotone there)."""
    if b.lo == 0 == b.hi and not b.nan:
        return None
    if _has_inf(a) and _has_inf(b):
        return TOP
    parts = []
    tiny = math.ulp(0.0)
    if b.hi > 0:
        parts.append(FloatRange(max(b.lo, tiny), b.hi))
    if b.lo < 0:
        parts.append(FloatRange(b.lo, min(b.hi, -tiny)))
    out = [_corners(lambda x, y: x / y, a, p) for p in parts]
    nan = a.nan or b.nan or any(o.nan for o in out)
    return FloatRange(min(o.lo for o in out), max(o.hi for o in out), nan)


def _pow_value(x: float, y: float) -> float:
    try:
        value = x ** y
    except OverflowError:
        return INF if x > 0 or y == math.floor(y) and y % 2 == 0 else -INF
    except ZeroDivisionError:
        return INF
    if isinstance(value, complex):
        return math.nan
    return value


def _widen(lo: float, hi: float) -> FloatRange:
    """``[lo, hi]`` widened by pow's error (any error below 2**12 ulps); near 0 to 0 and 2**-1000."""
    if math.isfinite(lo):
        lo = 0.0 if 0 < lo < 2.0 ** -1000 else lo - abs(lo) * _POW_SLACK - (2.0 ** -1000 if lo < 0 else 0)
    if math.isfinite(hi):
        hi = 2.0 ** -1000 if 0 <= hi < 2.0 ** -1000 else hi + abs(hi) * _POW_SLACK
    return FloatRange(lo, hi)


def _power(a: FloatRange, b: FloatRange) -> FloatRange | None:
    """``a ** b`` on doubles (the C library's pow): a constant exponent, or a constant base above 0."""
    if a.nan or b.nan:
        return TOP
    if b.lo == b.hi and math.isfinite(b.lo) and b.lo > 0:
        c = b.lo
        if c != math.floor(c):                   # a finite negative base gives a complex value: undefined
            if a.lo == -INF:                     # but (-inf) ** c is inf
                return FloatRange(INF, INF) if a.hi < 0 else FloatRange(0.0, INF)
            if a.hi < 0:
                return None
            lo = max(a.lo, 0.0)
            return _widen(_pow_value(lo, c), _pow_value(a.hi, c))
        values = [_pow_value(a.lo, c), _pow_value(a.hi, c)] + ([0.0] if _has_zero(a) else [])
        return _widen(min(values), max(values))
    if a.lo == a.hi and math.isfinite(a.lo) and a.lo > 0 and not _has_inf(b):
        lo, hi = _pow_value(a.lo, b.lo), _pow_value(a.lo, b.hi)
        lo, hi = min(lo, hi), max(lo, hi)
        if lo == INF:
            return None                          # it overflows everywhere: OverflowError
        return _widen(lo, min(hi, _MAX))
    return TOP


def _float_mod(a: FloatRange, b: FloatRange) -> FloatRange | None:
    """``a % b`` on doubles: between 0 and ``b`` (with its sign), for a finite ``a``."""
    if b.lo == 0 == b.hi and not b.nan:
        return None
    if not a.finite or b.nan:
        return TOP
    return FloatRange(min(b.lo, 0.0), max(b.hi, 0.0))


def _float_floordiv(a: FloatRange, b: FloatRange) -> FloatRange | None:
    """``a // b`` on doubles: within 2 of the floor of the quotient (widened by a relative 2**-50), for
    finite operands and a divisor of one sign; an end past 2**900 is left open."""
    if b.lo == 0 == b.hi and not b.nan:
        return None
    if not (a.finite and b.finite) or _has_zero(b):
        return TOP
    q = _divide(a, b)
    if q is None or q.nan:
        return TOP
    lo = -INF if not abs(q.lo) < 2.0 ** 900 else math.floor(q.lo - abs(q.lo) * 2.0 ** -50) - 2.0
    hi = INF if not abs(q.hi) < 2.0 ** 900 else math.floor(q.hi + abs(q.hi) * 2.0 ** -50) + 2.0
    # CPython takes (a - fmod(a, b)) / b, less 1 where fmod's sign is not b's: operands of one sign give a
    # quotient that is not negative, of opposite signs one that is not positive
    if (a.lo >= 0 and b.lo > 0) or (a.hi <= 0 and b.hi < 0):
        lo = max(lo, 0.0)
    if (a.lo >= 0 and b.hi < 0) or (a.hi <= 0 and b.lo > 0):
        hi = min(hi, 0.0)
    return FloatRange(lo, hi)


def _sqrt(a: FloatRange) -> FloatRange | None:
    if a.nan:
        return TOP
    if a.hi < 0:
        return None                              # ValueError everywhere
    return FloatRange(math.sqrt(max(a.lo, 0.0)), math.sqrt(a.hi))


def _float_range(term: Expr, bounds: Bounds) -> FloatRange | None:
    """The enclosure of the float term ``term`` (``bounds`` gives its integer operands' intervals)."""
    if isinstance(term, FloatConst):
        return FloatRange(term.value, term.value)
    if isinstance(term, (ToFloat, IntTrueDiv)):
        maybe_ints = [bounds(a) for a in term.args]
        ints = [i for i in maybe_ints if i is not None]
        if len(ints) < len(maybe_ints):
            return None
        if isinstance(term, IntTrueDiv) and not term.args[1].is_Integer:
            q = _rational_quotient(term)          # exact where b != 0, rounded once
            if q is not None:
                negative, positive = I._split_nonzero(ints[1])
                if negative is None and positive is None:
                    return None
                value = int(q.p) / int(q.q)
                return FloatRange(value, value)
        return _int_to_float(ints[0]) if isinstance(term, ToFloat) else _true_div(*ints)
    maybe_parts = [bounds.floats(a) for a in term.args]
    parts = [p for p in maybe_parts if p is not None]
    if len(parts) < len(maybe_parts):
        return None
    if isinstance(term, FNeg):
        a = parts[0]
        return FloatRange(-a.hi, -a.lo, a.nan)
    if isinstance(term, FSqrt):
        return _sqrt(parts[0])
    a, b = parts
    if isinstance(term, FAdd):
        return _corners(lambda x, y: x + y, a, b)
    if isinstance(term, FSub):
        return _corners(lambda x, y: x - y, a, b)
    if isinstance(term, FMul):
        if (_has_zero(a) and _has_inf(b)) or (_has_zero(b) and _has_inf(a)):
            return TOP                           # 0 * inf is nan
        return _corners(lambda x, y: x * y, a, b)
    if isinstance(term, FDiv):
        return _divide(a, b)
    if isinstance(term, FloatPow):
        return _power(a, b)
    if isinstance(term, FMod):
        return _float_mod(a, b)
    if isinstance(term, FFloorDiv):
        return _float_floordiv(a, b)
    return TOP


def _may_raise(term: Expr) -> bool:
    return _is_float(term) or row_of(term).is_wrapper


def _raises_nowhere(term: Expr, bounds: Bounds) -> bool:
    """Whether the float node or wrapper ``term`` raises nowhere in the box, its arguments evaluating."""
    row = row_of(term)
    if row.kind is Kind.COMPARISON or row.kind is Kind.DEFINED:
        return True
    if row.rounding is not None:                 # inf and nan raise
        f = bounds.floats(term.args[0])
        return f is not None and f.finite
    if isinstance(term, ToFloat):
        a = bounds(term.args[0])
        return a is None or (-DOUBLE_OVERFLOW < a.lo and a.hi < DOUBLE_OVERFLOW)
    if isinstance(term, IntTrueDiv):
        a, b = bounds(term.args[0]), bounds(term.args[1])
        if a is None or b is None:
            return True
        if not (b.lo > 0 or b.hi < 0):
            return False
        if _rational_quotient(term) is not None:
            return True
        return a.finite and max(abs(a.lo), abs(a.hi)) < DOUBLE_OVERFLOW * min(abs(b.lo), abs(b.hi))
    if isinstance(term, (FDiv, FFloorDiv, FMod)):
        fa, fb = bounds.floats(term.args[0]), bounds.floats(term.args[1])
        if fb is None or not (fb.lo > 0 or fb.hi < 0) or fb.nan:
            return False
        if isinstance(term, FDiv):
            return True
        q = bounds.floats(term)
        return fa is not None and fa.finite and fb.finite and q is not None and q.finite
    if isinstance(term, FSqrt):
        root = bounds.floats(term.args[0])
        return root is not None and not root.nan and root.lo >= 0
    if isinstance(term, FloatPow):
        fa, fb, p = bounds.floats(term.args[0]), bounds.floats(term.args[1]), bounds.floats(term)
        if fa is None or fb is None or p is None or fa.nan or fb.nan:
            return False
        if not (abs(p.lo) < 2.0 ** 1000 > abs(p.hi)):
            return False
        if fb.lo == fb.hi and fb.lo > 0:         # a constant exponent: complex below 0 unless it is integral
            return fa.lo >= 0 or fb.lo == math.floor(fb.lo)
        return fa.lo == fa.hi and fa.lo > 0      # a constant base above 0
    return not isinstance(term, FloatTerm) or row.kind in (Kind.FLOAT_CONST, Kind.FLOAT)


def _rational_quotient(term: Expr):
    """``a / b`` as a constant rational where the terms cancel (``(-6*x) / (7*x)``), else None."""
    q = term.args[0] / term.args[1]
    return q if q.is_Rational else None


def _comparison(op: str, a: FloatRange, b: FloatRange) -> Interval:
    """1 where Python's ``a op b`` is true, else 0 (nan compares false)."""
    nan = a.nan or b.nan
    if op == "<":
        true, false = a.hi < b.lo, a.lo >= b.hi
    elif op == "<=":
        true, false = a.hi <= b.lo, a.lo > b.hi
    else:
        true, false = a.lo == a.hi == b.lo == b.hi, a.hi < b.lo or a.lo > b.hi
    if true and not nan:
        return point_interval(1)
    if false:
        return point_interval(0)
    return Interval(0, 1)
