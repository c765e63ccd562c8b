"""Float sub-expressions of guards, kept as what Python computes: IEEE doubles.

Guards carry float arithmetic (``math.ceil(T / 16)``, ``0.29*sym_float(W)``,
torch's ``IntTrueDiv``/``ToFloat``/``TruncToInt``).  Read as exact rationals
they can differ from what runs (``int(0.29*100.0) == 28``, not 29), so they are
kept as float nodes with Python's meaning:

* float terms (not integers): ``ToFloat(t)`` (``float(t)``), ``FloatConst``
  (the double a literal denotes, stored as its exact dyadic value),
  ``IntTrueDiv(a, b)`` (``a / b`` on ints: correctly rounded), the binary
  float operations ``FAdd FSub FMul FDiv FFloorDiv FMod`` and ``FNeg``, and
  ``FloatPow`` (``a ** b``: the C library's ``pow``) and ``FSqrt``
  (``math.sqrt``: correctly rounded), never reassociated or folded;
* integer-valued wrappers that integer terms may contain: ``FloorToInt``,
  ``CeilToInt``, ``TruncToInt`` (``math.floor``/``math.ceil``/``int`` of a
  float), the comparisons ``FloatLt FloatLe FloatEq`` (1 when Python's
  comparison is true, else 0; an int operand is compared exactly, as Python
  does), and ``Defined(w)`` (1 where ``w`` evaluates without an exception).

A comparison ``a < b`` with a float side is the relation ``FloatLt(a, b) != 0``.
Where Python raises (division by zero, ``float`` or ``math.floor`` overflow,
``math.sqrt`` of a negative) or gives a complex number (``(-8.0) ** (1/3)``) a
node is undefined, like ``x // 0``.  ``evaluate`` gives the reference
meaning, ``enumerate`` evaluates in numpy float64; ``exact_floats`` rewrites a
float sub-expression into integer nodes only where every operation is exact in
doubles over the box.  The constructors here are shared by the parser and the
torch bridge.
"""
from __future__ import annotations

import math

from typing import NamedTuple

from sympy import Expr, Integer, Rational

from . import formula as F
from .evaluate import Undefined, evaluate_term
from .nodes import (
    COMPARISONS, DOUBLE_OVERFLOW, FLOAT_WRAPPERS, ROUNDING, TABLE, CeilToInt, Defined, FAdd, FDiv, FFloorDiv,
    FloatConst, FloatEq, FloatLe, FloatLt, FloatPow, FloatTerm, FloorToInt, FMod, FMul, FNeg, FSqrt, FSub,
    IntTrueDiv, Kind, Rounding, RoundToInt, ToFloat, TruncToInt,
)
from .terms import has_floats, iter_nodes

__all__ = [
    "FloatTerm", "ToFloat", "FloatConst", "IntTrueDiv", "FAdd", "FSub", "FMul", "FDiv", "FFloorDiv", "FMod",
    "FNeg", "FloatPow", "FSqrt", "FloorToInt", "CeilToInt", "TruncToInt", "RoundToInt", "FloatLt", "FloatLe",
    "FloatEq", "Defined", "FLOAT_WRAPPERS", "ROUNDING", "COMPARISONS", "Rounding", "is_float", "has_floats",
    "float_const", "to_float", "float_binop", "float_call", "true_div", "round_float", "compare_float",
    "prune_defined", "Monotone", "monotone_in",
]

BINARY = {row.infix: row.cls for row in TABLE.values() if row.kind is Kind.FLOAT and row.infix}


def is_float(e: Expr) -> bool:
    return isinstance(e, FloatTerm)


def float_const(value: float) -> FloatConst:
    if not math.isfinite(value):
        raise ValueError(f"float constant {value!r} is not finite")
    return FloatConst(Rational(*value.as_integer_ratio()))


def to_float(e: Expr) -> FloatTerm:
    """``float(e)``: a float term unchanged, an int converted."""
    return e if is_float(e) else ToFloat(e)


def float_binop(op: str, a: Expr, b: Expr) -> FloatTerm:
    """``a op b`` where at least one side is a float: Python converts the int side first."""
    return BINARY[op](to_float(a), to_float(b))


def float_call(cls: type, *args: Expr) -> FloatTerm:
    """A float function of ``args`` (``math.sqrt``, ``math.pow``): Python converts int arguments first."""
    return cls(*(to_float(a) for a in args))


def true_div(a: Expr, b: Expr) -> FloatTerm:
    """Python's ``a / b``: of two ints the correctly rounded quotient, else a float division."""
    if not is_float(a) and not is_float(b):
        return IntTrueDiv(a, b)
    return FDiv(to_float(a), to_float(b))


def round_float(kind: Rounding | str, e: Expr) -> Expr:
    """``math.floor``/``math.ceil``/``int``/``round`` of a float (``kind``); an int is returned as is."""
    return ROUNDING[Rounding(kind)](e) if is_float(e) else e


def compare_float(op: str, a: Expr, b: Expr, divisors=frozenset()) -> F.Formula:
    """``a op b`` with a float side, as a relation on a comparison node (Python's exact comparison)."""
    if op in (">", ">="):
        op, a, b = {">": "<", ">=": "<="}[op], b, a
    node = {"<": FloatLt, "<=": FloatLe, "==": FloatEq, "!=": FloatEq}[op](a, b)
    return F.rel("==" if op == "!=" else "!=", node, Integer(0), divisors)


def prune_defined(divs, lhs: Expr, rhs: Expr) -> frozenset:
    """A relation's divisors: ``Defined(w)`` markers are kept only for wrappers sympy cancelled out.

    Builders add ``Defined(w)`` for every float wrapper ``w`` they create; where ``w`` is still in a
    side, evaluating the side already raises where ``w`` does.  ``math.floor(x / y) - math.floor(x / y)``
    is 0 but still raises at ``y == 0``.
    """
    present = set(iter_nodes(lhs)) | set(iter_nodes(rhs))
    return frozenset(d for d in divs if not (isinstance(d, Defined) and d.args[0] in present))


class Monotone(NamedTuple):
    """A float that is a monotone function of one integer term."""

    term: Expr
    direction: int              # 1: it does not decrease as ``term`` grows; -1: it does not increase
    base: Expr                  # ``float(term)`` or ``term / c``: where it raises, the float does

    @property
    def evaluates_below(self) -> int:
        """The float evaluates (does not raise) exactly where ``|term|`` is below this."""
        return DOUBLE_OVERFLOW * (abs(int(self.base.args[1])) if isinstance(self.base, IntTrueDiv) else 1)


def _value(constant: Expr) -> float | None:
    """The finite value Python computes for a float term without symbols, else None."""
    try:
        value = evaluate_term(constant, {})
    except Undefined:
        return None
    return value if math.isfinite(value) else None


def monotone_in(f: Expr) -> Monotone | None:
    """How the float term ``f`` is a monotone function of one integer term ``t``, if it is:
    ``float(t)`` and ``t / c`` for a constant ``c``, then any chain of ``+ - * /`` with a float term
    without symbols, and negation (each IEEE operation rounds monotonically, and overflows to inf
    without raising).  None for anything else: ``x // 1.0`` is ``math.floor(x)`` but nan for an x that
    overflowed to inf, and a comparison with nan is false on both sides."""
    if isinstance(f, ToFloat):
        return Monotone(f.args[0], 1, f)
    if isinstance(f, IntTrueDiv):
        c = f.args[1]
        if not (c.is_Integer and c != 0):
            return None
        return Monotone(f.args[0], 1 if c > 0 else -1, f)
    if isinstance(f, FNeg):
        inner = monotone_in(f.args[0])
        return None if inner is None else inner._replace(direction=-inner.direction)
    if not isinstance(f, (FAdd, FSub, FMul, FDiv)):
        return None
    a, b = f.args
    if bool(a.free_symbols) == bool(b.free_symbols):
        return None
    constant, other = (b, a) if a.free_symbols else (a, b)
    inner, value = monotone_in(other), _value(constant)
    if inner is None or value is None:
        return None
    if isinstance(f, (FMul, FDiv)):
        if value == 0 or (isinstance(f, FDiv) and constant is a):
            return None                         # c / x is not monotone across 0
        return inner if value > 0 else inner._replace(direction=-inner.direction)
    return inner._replace(direction=-inner.direction) if isinstance(f, FSub) and constant is a else inner
