"""torch's sympy shape expressions -> shapeproof's terms and conditions.

torch's ShapeEnv speaks sympy with its own functions
(``torch.utils._sympy.functions``); the engine speaks ``shapeproof.solver``
terms with exact Python semantics.  Which torch class is which engine node is
the ``names`` column of ``shapeproof.solver.language.nodes`` (torch's class names are
the spellings guard text uses); conversion is memoized per call so shared
subexpressions convert once.  Anything
without an exact meaning here (bit operations, ``Where``,
opaque float functions other than ``sqrt``, infinities inside an expression) raises
``UnsupportedExpression``, and callers fall back to torch's own answer.
Float-valued parts (``ToFloat``, true division, float constants, ``FloatPow``,
``OpaqueUnaryFn_sqrt``) become the
solver's float nodes (``shapeproof.solver.language.floats``), which keep Python's
double-precision meaning; a float sum or product is evaluated in argument order.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Mapping

import sympy
from sympy import Expr, Integer, Symbol
from sympy.logic.boolalg import BooleanAtom

from shapeproof import solver as S
from shapeproof.solver import FloorDiv, Kind, Mod, floats as FL, rows_named, symbol

from . import torch_internals as T

__all__ = ["Conversions", "UnsupportedExpression", "to_term", "to_condition", "bounds_of"]


class UnsupportedExpression(ValueError):
    """A torch sympy expression with no exact shapeproof counterpart."""


class _Converter:
    def __init__(self, rename: Mapping | None):
        self.rename = {}
        for key, value in (rename or {}).items():
            name = key.name if isinstance(key, Symbol) else str(key)
            self.rename[name] = value if isinstance(value, Expr) else symbol(str(value))
        self.memo: dict = {}
        # Divisors and float wrappers met while converting the current relation: a relation carries
        # exactly those of its own sides (memo entries remember theirs, so a shared subexpression
        # brings its divisors along however often it is met).
        self.divisors: set[Expr] = set()

    # -- numbers ------------------------------------------------------------------
    def value(self, e):
        """An integer term, or a float term (``floats.FloatTerm``) for float-valued expressions."""
        if e in self.memo:
            out, divs = self.memo[e]
            self.divisors |= divs
            return out
        outer, self.divisors = self.divisors, set()
        try:
            out = self._value(e)
            self.memo[e] = (out, frozenset(self.divisors))
        finally:
            self.divisors = outer | self.divisors
        return out

    def term(self, e) -> Expr:
        v = self.value(e)
        if FL.is_float(v):
            raise UnsupportedExpression(f"expected an integer, got the float expression {e}")
        return v

    def _value(self, e):
        if isinstance(e, (T.IntInfinity, T.NegativeIntInfinity)) or e in (sympy.oo, -sympy.oo, sympy.zoo):
            raise UnsupportedExpression(f"infinity inside an expression: {e}")
        if isinstance(e, sympy.Integer):
            return e
        if isinstance(e, sympy.Rational):                 # p/q in a guard is Python's p / q
            return FL.true_div(Integer(e.p), Integer(e.q))
        if isinstance(e, sympy.Float):
            value = float(e)
            if not math.isfinite(value):
                raise UnsupportedExpression(f"float constant {e} is not finite")
            return FL.float_const(value)
        if isinstance(e, Symbol):
            if e.name in self.rename:
                return self.rename[e.name]
            if e.is_integer is False or (e.is_integer is None and e.is_real is not None):
                raise UnsupportedExpression(f"symbol {e} is not an integer")
            return symbol(e.name)
        cls: type = type(e)        # sympy is untyped, and mypy does not take type[Any] as Hashable
        handler = _handler(cls)
        if handler is None:
            raise UnsupportedExpression(f"no exact meaning for {type(e).__name__}: {e}")
        return handler(self, e)

    def _combine(self, op: str, args):
        """A sum or product: integer terms in one step; with a float argument, Python's left fold."""
        values = [self.value(a) for a in args]
        if not any(FL.is_float(v) for v in values):
            return (sympy.Add if op == "+" else sympy.Mul)(*values)
        out = values[0]
        for v in values[1:]:
            out = FL.float_binop(op, out, v)
        return out

    def true_div(self, a, b):
        num, den = self.value(a), self.value(b)
        if den == 0:
            raise UnsupportedExpression("true division by zero")
        if not FL.is_float(den) and not den.is_Number:
            self.divisors.add(den)
        return FL.true_div(num, den)

    def rounded(self, e, kind: str) -> Expr:
        v = self.value(e.args[0])
        if not FL.is_float(v):
            return v
        node = FL.round_float(kind, v)
        self.divisors.add(FL.Defined(node))
        return node

    # -- conditions -----------------------------------------------------------------
    def condition(self, e) -> S.Formula:
        if isinstance(e, BooleanAtom) or e in (sympy.true, sympy.false):
            return S.TRUE if bool(e) else S.FALSE
        if isinstance(e, (sympy.And, sympy.Or)):          # sympy's meaning: order-independent, absorbing
            return (S.conj if isinstance(e, sympy.And) else S.disj)(*(self.condition(a) for a in e.args),
                                                                     ordered=False)
        if isinstance(e, sympy.Not):
            return S.neg(self.condition(e.args[0]))
        op = _RELATIONS.get(type(e))
        if op is None:
            raise UnsupportedExpression(f"not a condition: {type(e).__name__}: {e}")
        outer, self.divisors = self.divisors, set()
        try:
            lhs, rhs = self.value(e.args[0]), self.value(e.args[1])
            own = frozenset(self.divisors)
        finally:
            self.divisors = outer | self.divisors
        divs = FL.prune_defined(own, lhs, rhs)
        if FL.is_float(lhs) or FL.is_float(rhs):
            return FL.compare_float(op, lhs, rhs, divs)
        return S.rel(op, lhs, rhs, divs)


def _pow(c: _Converter, e, row=None):
    base, exponent = e.args
    if not exponent.is_Integer:
        raise UnsupportedExpression(f"exponent must be an integer: {e}")
    k = int(exponent)
    value = c.value(base)
    if k < 0 or FL.is_float(value):          # Python's float pow may differ from repeated products
        raise UnsupportedExpression(f"power of a float or negative power: {e}")
    return value ** k


def _minmax(c: _Converter, e, row):
    values = [c.value(a) for a in e.args]
    if any(FL.is_float(v) for v in values):
        raise UnsupportedExpression(f"min/max of float values: {e}")
    return row.cls(*values)


def _shift(left: bool):
    def convert(c: _Converter, e):
        base, shift = c.term(e.args[0]), c.term(e.args[1])
        if not shift.is_Integer or shift < 0:
            raise UnsupportedExpression(f"symbolic shift: {e}")
        return base * 2 ** int(shift) if left else FloorDiv(base, 2 ** int(shift))
    return convert


# How each kind of engine node is built from a torch (or sympy) function; which torch class is which
# node is the ``names`` column of ``solver.nodes`` (torch's class names are guard text's spellings).
_BUILDERS: dict[Kind, Callable] = {
    Kind.DIVISION: lambda c, e, row: row.cls(c.term(e.args[0]), c.term(e.args[1])),
    Kind.CHOICE: _minmax,
    Kind.TRUE_DIV: lambda c, e, row: c.true_div(*e.args),
    Kind.TO_FLOAT: lambda c, e, row: FL.to_float(c.value(e.args[0])),
    Kind.ROUNDING: lambda c, e, row: c.rounded(e, row.rounding),
    # the float functions torch names (FloatPow, OpaqueUnaryFn_sqrt): Python's, on doubles
    Kind.FLOAT: lambda c, e, row: FL.float_call(row.cls, *(c.value(a) for a in e.args)),
}
_SYMPY_RING: dict[type, Callable] = {
    sympy.Add: lambda c, e, row: c._combine("+", e.args),
    sympy.Mul: lambda c, e, row: c._combine("*", e.args),
    sympy.Pow: _pow,
}
_BY_NAME = {name: row for name, row in rows_named(*_BUILDERS, Kind.RING).items()}
# torch functions that are not one engine node
_TORCH_ONLY: dict[type, Callable] = {
    T.ModularIndexing: lambda c, e: Mod(FloorDiv(c.term(e.args[0]), c.term(e.args[1])), c.term(e.args[2])),
    T.Identity: lambda c, e: c.value(e.args[0]),
    T.LShift: _shift(left=True),
    T.RShift: _shift(left=False),
}


@functools.lru_cache(maxsize=None)
def _handler(cls: type) -> Callable | None:
    """The converter for torch's sympy class ``cls`` (subclasses such as CleanDiv convert as their base)."""
    if cls in _TORCH_ONLY:
        return _TORCH_ONLY[cls]
    if cls in _SYMPY_RING:
        return lambda c, e: _SYMPY_RING[cls](c, e, None)
    for klass in cls.__mro__:
        row = _BY_NAME.get(klass.__name__)
        if row is not None:
            build = _pow if row.kind is Kind.RING else _BUILDERS[row.kind]
            return lambda c, e: build(c, e, row)
    return None


# Kinds whose value divides or rounds; with ModularIndexing (a floor division, then a mod) they are the
# torch classes that make a size slow to rebuild symbolically (fake_mode keeps such views uncached).
_DIVIDING_NAMES = frozenset(rows_named(Kind.DIVISION, Kind.TRUE_DIV, Kind.ROUNDING))


def divides(cls: type) -> bool:
    """Whether torch's sympy class ``cls`` divides or rounds (by the ``names`` column, as conversion does)."""
    return cls is T.ModularIndexing or any(klass.__name__ in _DIVIDING_NAMES for klass in cls.__mro__)


_RELATIONS = {
    sympy.Eq: "==", sympy.Ne: "!=", sympy.Lt: "<", sympy.Le: "<=", sympy.Gt: ">", sympy.Ge: ">=",
}


def to_term(expr, rename: Mapping | None = None) -> Expr:
    """The shapeproof term for an integer-valued torch sympy expression.

    ``rename`` maps torch symbols (or their names) to shapeproof terms or names.
    """
    return _Converter(rename).term(sympy.sympify(expr) if not isinstance(expr, sympy.Basic) else expr)


def to_condition(expr, rename: Mapping | None = None) -> S.Formula:
    """The shapeproof condition for a torch sympy boolean (Eq/Ne/Lt/.../And/Or/Not/true/false)."""
    return _Converter(rename).condition(expr)


class Conversions:
    """``to_term``/``to_condition`` under one fixed renaming, memoized across calls.

    A trace asks about the same large subexpressions in many conditions (a
    Swin trace's padded sizes occur in hundreds of them); converting each once
    saves a tenth of such a trace.  Every memo entry carries its own divisors,
    so a condition still gets exactly those of its own sides.  Build a new one
    whenever the renaming changes.
    """

    def __init__(self, rename: Mapping | None = None):
        self._converter = _Converter(rename)
        self._conditions: dict = {}          # whole questions: a trace asks the same ones many times

    def term(self, expr) -> Expr:
        self._converter.divisors = set()
        return self._converter.term(expr)

    def condition(self, expr) -> S.Formula:
        self._converter.divisors = set()
        return self._converter.condition(expr)

    def condition_or_none(self, expr) -> S.Formula | None:
        """``condition(expr)``, or None where it has no exact counterpart; remembered per expression."""
        if expr not in self._conditions:
            try:
                self._conditions[expr] = self.condition(expr)
            except UnsupportedExpression:
                self._conditions[expr] = None
        return self._conditions[expr]


def bounds_of(value_range) -> tuple[int | None, int | None]:
    """``(lo, hi)`` of a torch ``ValueRanges``, with infinities as None."""
    def end(v):
        if isinstance(v, (T.IntInfinity, T.NegativeIntInfinity)) or v in (sympy.oo, -sympy.oo):
            return None
        try:
            return int(v)
        except (TypeError, ValueError):
            return None
    return end(value_range.lower), end(value_range.upper)
