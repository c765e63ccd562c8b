"""The value of one tensor element computed from sizes and constants, with torch's run-time meaning.

``IntValue`` and ``BoolValue`` are exact: an integer tensor's arithmetic on
values bounded inside its dtype is Python's (``//`` floors, ``%`` takes the
divisor's sign, as ``torch.floor_divide``/``torch.remainder`` do).

A float tensor's value is a ``FloatValue``: the exact rational ``num/den``
(``num`` an integer expression, ``den`` a positive integer) that the
computation would give without rounding, a bound ``err`` on how far the IEEE
computation in the tensor's dtype can be from it anywhere in the ranges, and
``exact_at_integers``: at every point where ``num/den`` is an integer, the
computation gives exactly that integer.  Each rounding of a correctly rounded
operation (``+ - * /``, conversions) adds at most ``u*|y| + tiny`` (``u`` =
2**-24 for float32, 2**-53 for float64; ``tiny`` covers subnormals), where
``|y|`` is bounded from the ranges of the sizes.

Why ``ceil``/``floor``/``trunc`` of such a value is the integer expression:
where ``num/den`` is not an integer it is at least ``1/den`` away from both
neighbouring integers, so an error ``< 1/den`` cannot cross one; where it is
an integer, ``exact_at_integers`` says there is no error at all.  ``round``
(half to even) is only taken for odd ``den``, where ``num/den`` is never a
half-integer and stays ``>= 1/(2*den)`` away from every one.  When the bound
is not small enough over the ranges (e.g. ``(L + c) / s`` in float32 with
``L`` beyond 2**24) the value is ``NotTracked`` and torch's own behaviour
(a fresh unbacked symbol) stays.  The proof assumes correctly rounded
operations, as CPU kernels do; the exported program also checks every tracked
value against the value it computes, so a kernel that rounds differently
makes it raise, never return a wrong result.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Callable, Union

import sympy

from ..torch_internals import FloorDiv, Max, Min, PythonMod

__all__ = ["IntValue", "BoolValue", "FloatValue", "Value", "NotTracked", "Algebra", "FLOAT32", "FLOAT64",
           "float_constant"]

FLOAT32, FLOAT64 = 24, 53               # significand bits (with the implicit one)
_TINY = {FLOAT32: Fraction(1, 2 ** 149), FLOAT64: Fraction(1, 2 ** 1074)}   # rounding error of subnormals
_HUGE = 2 ** 100                        # magnitudes beyond this are not tracked (far from float32 overflow)


_RELATIONS = {"eq": sympy.Eq, "ne": sympy.Ne, "lt": sympy.Lt, "le": sympy.Le, "gt": sympy.Gt, "ge": sympy.Ge}


class NotTracked(Exception):
    """The value cannot be followed exactly; ``reason`` says why (shown in data-dependent errors)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class IntValue:
    expr: sympy.Expr


@dataclass(frozen=True)
class BoolValue:
    expr: sympy.Basic


@dataclass(frozen=True)
class FloatValue:
    num: sympy.Expr
    den: int
    err: Fraction
    exact_at_integers: bool
    bits: int

    @property
    def exact_integer(self) -> bool:
        """Integer-valued everywhere and computed without error."""
        return self.den == 1 and self.err == 0


Value = Union[IntValue, BoolValue, FloatValue]
Bound = Callable[[sympy.Expr], "tuple[int | None, int | None]"]


def _float(num, den: int, err: Fraction, exact: bool, bits: int) -> FloatValue:
    if den == 1 and exact:        # integer-valued and exact where integer: exact everywhere
        err = Fraction(0)
    return FloatValue(sympy.sympify(num), den, err, exact, bits)


def float_constant(c: float, bits: int) -> FloatValue:
    """The Python float ``c`` converted to the float type (round to nearest even): an exact value."""
    try:
        if bits == FLOAT32:
            c = struct.unpack("f", struct.pack("f", c))[0]
        exact = Fraction(c)
    except (OverflowError, ValueError):
        raise NotTracked(f"the float constant {c} is not finite in a {bits}-bit float") from None
    return _float(exact.numerator, exact.denominator, Fraction(0), True, bits)


class Algebra:
    """Operations on values; ``bound(expr)`` gives an integer expression's ``(lo, hi)`` over the ranges."""

    def __init__(self, bound: Bound):
        self.bound = bound

    # -- ranges ---------------------------------------------------------------------
    def interval(self, expr) -> tuple[int, int]:
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr), int(expr)
        lo, hi = self.bound(expr)
        if lo is None or hi is None:
            raise NotTracked(f"{expr} is unbounded over the declared ranges (declare a max for each dim)")
        return lo, hi

    def magnitude(self, num, den: int) -> Fraction:
        lo, hi = self.interval(num)
        m = Fraction(max(abs(lo), abs(hi)), den)
        if m > _HUGE:
            raise NotTracked(f"{num} is too large to follow through float arithmetic")
        return m

    def integer(self, expr, lo: int, hi: int) -> IntValue:
        """``expr`` as the value of an integer tensor whose dtype holds ``[lo, hi]`` (no wrap-around)."""
        vlo, vhi = self.interval(expr)
        if vlo < lo or vhi > hi:
            raise NotTracked(f"{expr} may overflow its integer dtype over the declared ranges")
        return IntValue(sympy.sympify(expr))

    def _rounding(self, magnitude: Fraction, bits: int) -> Fraction:
        return magnitude / 2 ** bits + _TINY[bits]

    # -- conversions -------------------------------------------------------------------
    def constant_float(self, c: float | int, bits: int) -> FloatValue:
        if isinstance(c, int) and abs(c) > 2 ** bits:
            raise NotTracked(f"the integer constant {c} is not exact in a {bits}-bit significand")
        return float_constant(float(c), bits)

    def to_float(self, v: Value, bits: int) -> FloatValue:
        if isinstance(v, BoolValue):
            raise NotTracked("a boolean used as a float")
        if isinstance(v, IntValue):
            m = self.magnitude(v.expr, 1)
            if m <= 2 ** bits:
                return _float(v.expr, 1, Fraction(0), True, bits)
            return _float(v.expr, 1, m / 2 ** bits, False, bits)
        if v.bits <= bits:             # widening is exact
            return replace(v, bits=bits)
        m = self.magnitude(v.num, v.den)
        if v.exact_integer and m <= 2 ** bits:
            return replace(v, bits=bits)
        exact = v.exact_at_integers and m <= 2 ** bits
        return _float(v.num, v.den, v.err + self._rounding(m + v.err, bits), exact, bits)

    def to_int(self, v: Value, lo: int, hi: int) -> IntValue:
        """Conversion to an integer dtype: floats truncate toward zero (C's cast), bools are 0/1."""
        if isinstance(v, IntValue):
            return self.integer(v.expr, lo, hi)
        if isinstance(v, BoolValue):
            raise NotTracked("a boolean used as an integer")
        return self.integer(self.rounded(v, "trunc").num, lo, hi)

    def to_bool(self, v: Value) -> BoolValue:
        if isinstance(v, BoolValue):
            return v
        if isinstance(v, IntValue):
            return BoolValue(sympy.Ne(v.expr, 0))
        if v.err != 0:
            raise NotTracked("a rounded float used as a boolean")
        return BoolValue(sympy.Ne(v.num, 0))

    # -- integer arithmetic --------------------------------------------------------------
    def int_op(self, op: str, a: IntValue, b: IntValue | None, lo: int, hi: int) -> IntValue:
        x, y = a.expr, b.expr if b is not None else None
        if op in ("floordiv", "remainder", "truncdiv"):
            ylo, yhi = self.interval(y)
            if ylo <= 0 <= yhi:
                raise NotTracked(f"division by {y}, which may be 0")
            if op == "truncdiv":
                xlo, _ = self.interval(x)
                if xlo < 0 or ylo < 0:
                    raise NotTracked("truncating division of values whose sign is not fixed")
        expr = {
            "add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "neg": lambda: -x,
            "floordiv": lambda: FloorDiv(x, y), "truncdiv": lambda: FloorDiv(x, y),
            "remainder": lambda: PythonMod(x, y), "min": lambda: Min(x, y), "max": lambda: Max(x, y),
            "abs": lambda: Max(x, -x),
        }[op]()
        return self.integer(expr, lo, hi)

    # -- float arithmetic -----------------------------------------------------------------
    def float_op(self, op: str, a: FloatValue, b: FloatValue | None) -> FloatValue:
        if op == "neg":
            return _float(-a.num, a.den, a.err, a.exact_at_integers, a.bits)
        if op == "abs":
            if a.err != 0 or (b is not None and b.err != 0):
                raise NotTracked(f"{op} of rounded float values")
            return _float(Max(a.num, -a.num), a.den, Fraction(0), True, a.bits)
        if op not in ("add", "sub", "mul", "div", "min", "max"):
            raise NotTracked(f"float operation {op}")
        assert b is not None, f"float {op} takes two operands"
        if op in ("add", "sub"):
            return self._sum(a, b, 1 if op == "add" else -1)
        if op == "mul":
            return self._product(a, b)
        if op == "div":
            return self._quotient(a, b)
        if a.err != 0 or b.err != 0:      # min, max
            raise NotTracked(f"{op} of rounded float values")
        den = math.lcm(a.den, b.den)
        pick = Min if op == "min" else Max
        num = pick(a.num * (den // a.den), b.num * (den // b.den))
        return _float(num, den, Fraction(0), True, a.bits)

    def _sum(self, a: FloatValue, b: FloatValue, sign: int) -> FloatValue:
        bits = a.bits
        den = math.lcm(a.den, b.den)
        num = a.num * (den // a.den) + sign * b.num * (den // b.den)
        m = self.magnitude(num, den)
        if a.exact_integer and b.exact_integer and m <= 2 ** bits:
            return _float(num, 1, Fraction(0), True, bits)
        # where the sum is an integer and one operand is an exact integer, the other is an integer too
        exact = m <= 2 ** bits and (a.exact_integer and b.exact_at_integers
                                    or b.exact_integer and a.exact_at_integers)
        pre = a.err + b.err
        return _float(num, den, pre + self._rounding(m + pre, bits), exact, bits)

    def _product(self, a: FloatValue, b: FloatValue) -> FloatValue:
        bits = a.bits
        num, den = a.num * b.num, a.den * b.den
        m = self.magnitude(num, den)
        if a.exact_integer and b.exact_integer and m <= 2 ** bits:
            return _float(num, 1, Fraction(0), True, bits)
        ma, mb = self.magnitude(a.num, a.den), self.magnitude(b.num, b.den)
        pre = (ma + a.err) * b.err + mb * a.err
        return _float(num, den, pre + self._rounding(m + pre, bits), False, bits)

    def _quotient(self, a: FloatValue, b: FloatValue) -> FloatValue:
        if not (b.num.is_Integer and b.err == 0) or b.num == 0:
            raise NotTracked("true division by a size or a rounded value (only constant divisors are "
                             "followed)")
        q = Fraction(int(b.num), b.den)
        sign = 1 if q > 0 else -1
        num, den = a.num * q.denominator * sign, a.den * abs(q.numerator)
        m = self.magnitude(num, den)
        # where the quotient is an integer k, a = k*q is one too (q an integer), so a was exact and k is exact
        exact = a.exact_at_integers and q.denominator == 1 and m <= 2 ** a.bits
        pre = a.err / abs(q)
        return _float(num, den, pre + self._rounding(m + pre, a.bits), exact, a.bits)

    def rounded(self, a: FloatValue, mode: str) -> FloatValue:
        """``ceil``/``floor``/``trunc``/``round`` of a float value, as an exact integer-valued float."""
        num, den = a.num, a.den
        if mode == "round":
            if den % 2 == 0 or a.err >= Fraction(1, 2 * den):
                raise NotTracked(self._inexact(a, mode, Fraction(1, 2 * den)))
        elif not (a.exact_at_integers and (den == 1 or a.err < Fraction(1, den))):
            raise NotTracked(self._inexact(a, mode, Fraction(1, den)))
        if den == 1:
            return _float(num, 1, Fraction(0), True, a.bits)
        if mode == "trunc":
            lo, hi = self.interval(num)
            if lo < 0 < hi:
                raise NotTracked(f"trunc of {num}/{den}, whose sign is not fixed")
            mode = "floor" if lo >= 0 else "ceil"
        expr = {"floor": lambda: FloorDiv(num, den), "ceil": lambda: -FloorDiv(-num, den),
                "round": lambda: FloorDiv(2 * num + den, 2 * den)}[mode]()
        return _float(expr, 1, Fraction(0), True, a.bits)

    def _inexact(self, a: FloatValue, mode: str, needed: Fraction) -> str:
        kind = {FLOAT32: "float32", FLOAT64: "float64"}.get(a.bits, f"{a.bits}-bit float")
        if not a.exact_at_integers and a.err < needed:
            why = "is not exact where it is an integer"
        else:
            why = f"may be off by up to {float(a.err):.3g} (needs < {float(needed):.3g})"
        return (f"{mode}({a.num}/{a.den}) computed in {kind} {why} over the declared ranges, "
                f"so it may differ from the integer {mode} there")

    # -- comparisons and choices -------------------------------------------------------------
    def compare(self, op: str, a: Value, b: Value, bits: int | None) -> BoolValue:
        """``a op b``; with ``bits`` (a float comparison) both sides must be exact floats."""
        rel = _RELATIONS[op]
        if isinstance(a, BoolValue) or isinstance(b, BoolValue):
            return self._compare_bools(op, a, b)
        if bits is None:
            if not (isinstance(a, IntValue) and isinstance(b, IntValue)):
                raise NotTracked("comparison of non-integer values")
            return BoolValue(rel(a.expr, b.expr))
        x, y = self.to_float(a, bits), self.to_float(b, bits)
        if x.err != 0 or y.err != 0:
            raise NotTracked("comparison of rounded float values")
        return BoolValue(rel(x.num * y.den, y.num * x.den))

    def _compare_bools(self, op: str, a: Value, b: Value) -> BoolValue:
        """``b == 1``, ``b != 0`` (what ``bool(t)`` asks of a boolean tensor) and the like: True is 1."""
        if op not in ("eq", "ne"):
            raise NotTracked(f"ordering comparison of booleans ({op})")
        if isinstance(b, BoolValue) and not isinstance(a, BoolValue):
            a, b = b, a
        assert isinstance(a, BoolValue), "compare() passes at least one boolean"
        if isinstance(b, BoolValue):
            same = sympy.Equivalent(a.expr, b.expr)
        elif isinstance(b, IntValue) and b.expr.is_Integer:
            same = a.expr if b.expr == 1 else sympy.Not(a.expr) if b.expr == 0 else sympy.false
        else:
            raise NotTracked("comparison of a boolean with a non-constant")
        return BoolValue(same if op == "eq" else sympy.Not(same))

    def bool_op(self, op: str, a: BoolValue, b: BoolValue | None) -> BoolValue:
        fn = {"and": sympy.And, "or": sympy.Or, "xor": sympy.Xor, "not": sympy.Not}[op]
        return BoolValue(fn(a.expr) if b is None else fn(a.expr, b.expr))

    def choose(self, cond: BoolValue, a: Value, b: Value, decide: Callable[[sympy.Basic], bool | None]
               ) -> Value:
        """``where(cond, a, b)``: a condition the ranges decide picks a side; ``a < b ? a : b`` is a min."""
        known = decide(cond.expr)
        if known is not None:
            return a if known else b
        if isinstance(a, IntValue) and isinstance(b, IntValue) and isinstance(cond.expr, sympy.Rel):
            lhs, rhs = cond.expr.lhs, cond.expr.rhs
            ordered = isinstance(cond.expr, (sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge))
            if ordered and {lhs, rhs} == {a.expr, b.expr}:
                lhs_smaller = isinstance(cond.expr, (sympy.Lt, sympy.Le))
                picks_lhs = a.expr == lhs
                return IntValue((Min if lhs_smaller == picks_lhs else Max)(a.expr, b.expr))
        raise NotTracked(f"where() on {cond.expr}, which the ranges do not decide")
