"""Exact integer forms of rational (float-valued) shape arithmetic.

Guards contain true division and floats (``math.ceil(T / 16)``,
``0.5*sym_float(W)``, torch's ``IntTrueDiv``/``ToFloat``).  For sizes below
2**53 those floats are exact rationals, so they are rewritten into integer
nodes: ``floor(n/d) -> n // d``, and a comparison of ``n/d`` with 0 becomes one
of ``n`` (constant ``d``, sign taken into account) or of ``n*d`` (symbolic
``d``, whose nonzero condition is kept as a divisor).  Shared by the guard
parser and the torch bridge.
"""
from __future__ import annotations

import sympy
from sympy import Expr, Integer

from . import formula as F
from .terms import CeilDiv, FloorDiv, TruncDiv

__all__ = ["nonzero_condition", "round_rational", "compare_rational"]

_ROUNDING = {"floor": FloorDiv, "ceil": CeilDiv, "trunc": TruncDiv}


def nonzero_condition(divisor: Expr) -> frozenset:
    """The divisors that dividing by ``divisor`` must record (none for a nonzero constant)."""
    return frozenset() if divisor.is_Integer and divisor != 0 else frozenset({divisor})


def round_rational(value: Expr, kind: str) -> tuple[Expr, frozenset]:
    """``floor``/``ceil``/``trunc`` of a rational expression as ``(integer term, divisors)``."""
    numer, denom = sympy.together(value).as_numer_denom()
    if not (numer.is_integer and denom.is_integer):
        raise ValueError(f"cannot round {value} exactly")
    return _ROUNDING[kind](numer, denom), nonzero_condition(denom)


def compare_rational(op: str, difference: Expr, divisors=frozenset()) -> F.Formula:
    """``difference op 0`` for a rational ``difference``, with denominators cleared."""
    numer, denom = sympy.together(difference).as_numer_denom()
    if denom.is_Integer:
        return F.rel(op if denom > 0 else F.FLIPPED[op], numer, Integer(0), divisors)
    return F.rel(op, sympy.expand(numer * denom), Integer(0), frozenset(divisors) | nonzero_condition(denom))
