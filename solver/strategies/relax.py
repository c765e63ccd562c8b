"""Linear relaxations of float nodes, for the ``z3`` strategy.

Z3 has no encoding of IEEE doubles; ``smt`` makes each integer node over floats
(``math.floor(x / 3)``, a float comparison) a free integer within its
interval.  Where the float is an *affine chain* -- ``float(t)`` or ``t / c``
of an integer term ``t`` and a constant ``c``, then ``+``, ``-`` with another
chain and ``*``, ``/`` by a double constant, negation -- it is within a known
distance of the exact rational value ``A`` of the same expression: each IEEE
operation rounds once, to a relative error of at most 2**-53, so after ``n``
operations

    |f - A| <= rho * M,   rho = n * 2**-51,   M = sum |a_i| * |t_i| + |a_0|

(``M`` sums the absolute values of what each term contributes, which bounds
every partial sum too).  This holds where no operation overflows or underflows:
constants between 2**-64 and 2**64 and at most 8 operations keep every nonzero
value far above the subnormal range; a rounding raises on inf and nan (so
where it is defined nothing overflowed), and a comparison is relaxed only
where the enclosure of each of its float nodes is finite (``Bounds.floats``;
``float(t)`` and ``t / c`` raise rather than overflow).

Each relaxation says what the node's integer can be given ``A`` and the
distance: ``math.floor(f)`` is within ``[A - rho*M - 1, A + rho*M]``, a
comparison ``f < g`` can be 1 only where the lower end of ``f`` is below the
upper end of ``g``.  Scaled by the common denominator they are linear integer
constraints.  They are required only where the node evaluates (``smt``'s free
boolean): where it does, Python's value satisfies them, so a proof that uses
them holds; there is always an integer that satisfies them, so they exclude no
point of the box.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from sympy import Expr

from ..language.nodes import (
    CeilToInt, FAdd, FDiv, FloatConst, FloatEq, FloatLe, FloatLt, FloatTerm, FloorToInt, FMul, FNeg, FSub,
    IntTrueDiv, RoundToInt, ToFloat, TruncToInt, iter_nodes,
)

__all__ = ["Affine", "affine", "MAX_OPS"]

MAX_OPS = 8
_LIMIT = Fraction(2 ** 64)
_CONSTANT = None            # the key of the constant part


@dataclass(frozen=True)
class Affine:
    """``A = sum coeffs[t] * t`` (``t`` an integer term, ``None`` the constant 1) and
    ``M = sum size[t] * |t|``:
    the float is within ``ops * 2**-51 * M`` of ``A``."""

    coeffs: dict
    size: dict
    ops: int

    @property
    def rho(self) -> Fraction:
        return Fraction(self.ops, 2 ** 51)

    def constant(self) -> Fraction | None:
        """The exact value of a double constant (no operation), else None."""
        if self.ops == 0 and set(self.coeffs) <= {_CONSTANT}:
            return self.coeffs.get(_CONSTANT, Fraction(0))
        return None

    def scaled(self, v: Fraction) -> "Affine":
        return Affine({t: c * v for t, c in self.coeffs.items()},
                      {t: s * abs(v) for t, s in self.size.items()},
                      self.ops + 1)


def _sum(a: Affine, b: Affine, sign: int) -> Affine:
    coeffs = dict(a.coeffs)
    for t, c in b.coeffs.items():
        coeffs[t] = coeffs.get(t, Fraction(0)) + sign * c
    size = dict(a.size)
    for t, s in b.size.items():
        size[t] = size.get(t, Fraction(0)) + s
    return Affine(coeffs, size, max(a.ops, b.ops) + 1)


def _moderate(v: Fraction) -> bool:
    return v == 0 or 1 / _LIMIT <= abs(v) <= _LIMIT


def affine(f: Expr) -> Affine | None:
    """The affine chain ``f`` (a float term) as ``Affine``, or None if it is not one."""
    out = _affine(f)
    return out if out is not None and out.ops <= MAX_OPS else None


def _affine(f: Expr) -> Affine | None:
    if isinstance(f, FloatConst):
        v = Fraction(int(f.args[0].p), int(f.args[0].q))
        return Affine({_CONSTANT: v}, {_CONSTANT: abs(v)}, 0) if _moderate(v) else None
    if isinstance(f, (ToFloat, IntTrueDiv)):
        t = f.args[0]
        if isinstance(t, FloatTerm):
            return None
        c = Fraction(1)
        if isinstance(f, IntTrueDiv):
            d = f.args[1]
            if not d.is_Integer or d == 0 or not _moderate(Fraction(int(d))):
                return None
            c = Fraction(1, int(d))
        key = _CONSTANT if t.is_Integer else t
        factor = int(t) if t.is_Integer else 1
        return Affine({key: c * factor}, {key: abs(c * factor)}, 1)
    if isinstance(f, FNeg):
        inner = _affine(f.args[0])
        return None if inner is None else Affine({t: -c for t, c in inner.coeffs.items()}, inner.size,
                                                 inner.ops)
    if not isinstance(f, (FAdd, FSub, FMul, FDiv)):
        return None
    a, b = (_affine(x) for x in f.args)
    if a is None or b is None or a.ops > MAX_OPS or b.ops > MAX_OPS:
        return None
    if isinstance(f, (FAdd, FSub)):
        return _sum(a, b, 1 if isinstance(f, FAdd) else -1)
    if isinstance(f, FMul):
        scale, other = (a.constant(), b) if a.constant() is not None else (b.constant(), a)
        return None if scale is None else other.scaled(scale)
    divisor = b.constant()
    if divisor is None or divisor == 0:
        return None
    return a.scaled(1 / divisor)


# ---------------------------------------------------------------------------------------------
# The constraints, on encoded integers (``encode(t)`` for an integer term ``t``, ``absolute`` for |.|)

_ROUNDINGS = (FloorToInt, CeilToInt, TruncToInt, RoundToInt)
_COMPARISONS = (FloatLt, FloatLe, FloatEq)


def _ends(sides: list[Affine], encode: Callable, absolute: Callable):
    """For each side, ``(D*(A - rho*M), D*(A + rho*M))`` as integer expressions, and the common ``D``."""
    fractions = ([c for s in sides for c in s.coeffs.values()]
                 + [s.rho * m for s in sides for m in s.size.values()])
    scale = 1
    for q in fractions:
        scale = scale * q.denominator // math.gcd(scale, q.denominator)
    out = []
    for s in sides:
        centre = sum(int(c * scale) * (1 if t is _CONSTANT else encode(t)) for t, c in s.coeffs.items())
        spread = sum(int(s.rho * m * scale) * (1 if t is _CONSTANT else absolute(encode(t)))
                     for t, m in s.size.items() if m)
        out.append((centre - spread, centre + spread))
    return out, scale


def constraints(node: Expr, value, encode: Callable, absolute: Callable, finite: Callable[[Expr], bool]):
    """What ``node``'s integer ``value`` can be by the relaxation of its floats (a list of z3 conditions,
    empty where a float is not an affine chain)."""
    if isinstance(node, _ROUNDINGS):
        side = affine(node.args[0])
        if side is None:
            return []
        ((lo, hi),), d = _ends([side], encode, absolute)
        if isinstance(node, FloorToInt):
            return [d * value <= hi, d * value + d > lo]
        if isinstance(node, CeilToInt):
            return [d * value - d < hi, d * value >= lo]
        if isinstance(node, TruncToInt):
            return [d * value < hi + d, d * value > lo - d]
        return [2 * d * value <= 2 * hi + d, 2 * d * value >= 2 * lo - d]
    if isinstance(node, _COMPARISONS):
        sides = []
        for arg in node.args:
            if isinstance(arg, FloatTerm):
                if not all(finite(n) for n in iter_nodes(arg) if isinstance(n, FloatTerm)):
                    return []
                side = affine(arg)
            elif arg.is_Integer:
                side = Affine({_CONSTANT: Fraction(int(arg))}, {}, 0)
            else:                                # an int is compared exactly
                side = Affine({arg: Fraction(1)}, {}, 0)
            if side is None:
                return []
            sides.append(side)
        ((lo_f, hi_f), (lo_g, hi_g)), _ = _ends(sides, encode, absolute)
        if isinstance(node, FloatLt):
            return [_implies(value == 1, lo_f < hi_g), _implies(value == 0, hi_f >= lo_g)]
        if isinstance(node, FloatLe):
            return [_implies(value == 1, lo_f <= hi_g), _implies(value == 0, hi_f > lo_g)]
        return [_implies(value == 1, lo_f <= hi_g), _implies(value == 1, lo_g <= hi_f)]
    return []


def _implies(a, b):
    import z3
    return z3.Implies(a, b)
