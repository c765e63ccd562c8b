"""Float sub-expressions of guards, kept as what Python computes: IEEE doubles.

Guards carry float arithmetic (``math.ceil(T / 16)``, ``0.29*sym_float(W)``,
torch's ``IntTrueDiv``/``ToFloat``/``TruncToInt``).  Read as exact rationals
they can differ from what runs (``int(0.29*100.0) == 28``, not 29), so they are
kept as float nodes with Python's meaning:

* float terms (not integers): ``ToFloat(t)`` (``float(t)``), ``FloatConst``
  (the double a literal denotes, stored as its exact dyadic value),
  ``IntTrueDiv(a, b)`` (``a / b`` on ints: correctly rounded), and the binary
  float operations ``FAdd FSub FMul FDiv FFloorDiv FMod`` and ``FNeg``, never
  reassociated or folded;
* integer-valued wrappers that integer terms may contain: ``FloorToInt``,
  ``CeilToInt``, ``TruncToInt`` (``math.floor``/``math.ceil``/``int`` of a
  float), the comparisons ``FloatLt FloatLe FloatEq`` (1 when Python's
  comparison is true, else 0; an int operand is compared exactly, as Python
  does), and ``Defined(w)`` (1 where ``w`` evaluates without an exception).

A comparison ``a < b`` with a float side is the relation ``FloatLt(a, b) != 0``.
Where Python raises (division by zero, ``float`` or ``math.floor`` overflow)
a node is undefined, like ``x // 0``.  ``evaluate`` gives the reference
meaning, ``enumerate`` evaluates in numpy float64; ``exact_floats`` rewrites a
float sub-expression into integer nodes only where every operation is exact in
doubles over the box.  The constructors here are shared by the parser and the
torch bridge.
"""
from __future__ import annotations

import math

import sympy
from sympy import Expr, Integer, Rational

from . import formula as F
from .terms import _IntNode, iter_nodes

__all__ = [
    "FloatTerm", "ToFloat", "FloatConst", "IntTrueDiv", "FAdd", "FSub", "FMul", "FDiv", "FFloorDiv", "FMod",
    "FNeg", "FloorToInt", "CeilToInt", "TruncToInt", "FloatLt", "FloatLe", "FloatEq", "Defined",
    "FLOAT_WRAPPERS", "ROUNDING", "COMPARISONS", "is_float", "has_floats", "float_const", "to_float",
    "float_binop", "true_div", "round_float", "compare_float", "prune_defined",
]


class FloatTerm(Expr):
    """A float-valued node: opaque to sympy's arithmetic, so nothing is reassociated."""

    is_integer = False
    is_commutative = True
    __slots__ = ()
    symbol_text = ""
    may_raise = True            # ZeroDivisionError, OverflowError: see formula.may_raise

    def _sympystr(self, printer) -> str:
        a, b = self.args
        return f"({printer._print(a)} {self.symbol_text} {printer._print(b)})"


class ToFloat(FloatTerm):
    def _sympystr(self, printer) -> str:
        return f"float({printer._print(self.args[0])})"


class FloatConst(FloatTerm):
    """A double, stored as its exact value (a dyadic ``Rational``)."""

    @property
    def value(self) -> float:
        return float(self.args[0])

    def _sympystr(self, printer) -> str:
        return repr(self.value)


class IntTrueDiv(FloatTerm):
    """``a / b`` of two ints: Python rounds the exact quotient once."""
    symbol_text = "/"


class FAdd(FloatTerm):
    symbol_text = "+"


class FSub(FloatTerm):
    symbol_text = "-"


class FMul(FloatTerm):
    symbol_text = "*"


class FDiv(FloatTerm):
    symbol_text = "/"


class FFloorDiv(FloatTerm):
    symbol_text = "//"


class FMod(FloatTerm):
    symbol_text = "%"


class FNeg(FloatTerm):
    def _sympystr(self, printer) -> str:
        return f"(-{printer._print(self.args[0])})"


class _Wrapper(_IntNode):
    """An integer-valued node over float operands."""

    function = ""
    may_raise = True

    def __new__(cls, *args):
        return Expr.__new__(cls, *args)

    def _sympystr(self, printer) -> str:
        return f"{self.function}({', '.join(_bare(printer, a) for a in self.args)})"


def _bare(printer, e: Expr) -> str:
    """A function argument: a binary float operation without its enclosing parentheses."""
    text = printer._print(e)
    return text[1:-1] if isinstance(e, FloatTerm) and len(e.args) == 2 else text


class FloorToInt(_Wrapper):
    function = "math.floor"


class CeilToInt(_Wrapper):
    function = "math.ceil"


class TruncToInt(_Wrapper):
    function = "int"


class _Comparison(_Wrapper):
    python_op = ""
    is_float_comparison = True          # formula_str prints ``FloatLt(a, b) != 0`` as ``a < b``

    def _sympystr(self, printer) -> str:
        a, b = self.args
        return f"({printer._print(a)} {self.python_op} {printer._print(b)})"


class FloatLt(_Comparison):
    python_op = "<"


class FloatLe(_Comparison):
    python_op = "<="


class FloatEq(_Comparison):
    python_op = "=="


class Defined(_Wrapper):
    function = "Defined"


ROUNDING = {"floor": FloorToInt, "ceil": CeilToInt, "trunc": TruncToInt}
COMPARISONS = (FloatLt, FloatLe, FloatEq)
FLOAT_WRAPPERS = (FloorToInt, CeilToInt, TruncToInt, FloatLt, FloatLe, FloatEq, Defined)
BINARY = {"+": FAdd, "-": FSub, "*": FMul, "/": FDiv, "//": FFloorDiv, "%": FMod}


def is_float(e: Expr) -> bool:
    return isinstance(e, FloatTerm)


def has_floats(terms) -> bool:
    """Whether any of ``terms`` contains a float node."""
    return any(isinstance(n, (FloatTerm, _Wrapper)) for t in terms for n in iter_nodes(t))


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


def true_div(a: Expr, b: Expr) -> FloatTerm:
    """Python's ``a / b``: of two ints the correctly rounded quotient, else a float division."""
    if not is_float(a) and not is_float(b):
        return IntTrueDiv(a, b)
    return FDiv(to_float(a), to_float(b))


def round_float(kind: str, e: Expr) -> Expr:
    """``math.floor``/``math.ceil``/``int`` (``kind`` floor/ceil/trunc); an int is returned as is."""
    return ROUNDING[kind](e) if is_float(e) else e


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
