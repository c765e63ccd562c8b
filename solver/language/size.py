"""Upper bounds on what fully expanding a term costs, computed without expanding it.

``sympy.expand`` of ``(a+b+c+d+1)**64`` builds 814,385 monomials and runs for
minutes, and no deadline can interrupt it; the parser therefore refuses terms
whose expansion would be large before any strategy expands them.  For each
node, bottom-up and memoized (linear in the size of the term):

* ``monomials``: at most how many monomials the expansion has (a sum adds, a
  product multiplies, ``p**k`` has at most ``C(m + k - 1, k)`` for ``m``
  monomials in ``p``);
* ``degree``: the total degree;
* ``bits``: log2 of the sum of the absolute values of the coefficients, which
  bounds every coefficient of the expansion (the sum is sub-multiplicative).

Division nodes, min/max and float nodes are atoms: their arguments are
expanded separately and were bounded when they were built.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import sympy
from sympy import Expr

__all__ = ["Size", "SizeOf"]


@dataclass(frozen=True)
class Size:
    monomials: int
    degree: int
    bits: float


_ATOM = Size(1, 1, 0.0)
_CAP = 10 ** 12          # counts saturate here: beyond any limit, and no huge integers are built


class SizeOf:
    """Memoized ``Size`` of terms (one instance per parse)."""

    def __init__(self):
        self.memo: dict[Expr, Size] = {}

    def __call__(self, e: Expr) -> Size:
        if e.is_Integer or e.is_Rational:
            return Size(1, 0, math.log2(abs(int(e.p)) + 1) + math.log2(int(e.q)))
        cached = self.memo.get(e)
        if cached is None:
            cached = self.memo[e] = self._compute(e)
        return cached

    def of_sum(self, terms) -> Size:
        parts = [self(a) for a in terms]
        return Size(min(_CAP, sum(p.monomials for p in parts)), max(p.degree for p in parts),
                    max(p.bits for p in parts) + math.log2(len(parts)))

    def of_product(self, factors) -> Size:
        parts = [self(a) for a in factors]
        count = 1
        for p in parts:
            count = min(_CAP, count * p.monomials)
        return Size(count, sum(p.degree for p in parts), sum(p.bits for p in parts))

    def _compute(self, e: Expr) -> Size:
        if isinstance(e, sympy.Add):
            return self.of_sum(e.args)
        if isinstance(e, sympy.Mul):
            return self.of_product(e.args)
        if isinstance(e, sympy.Pow) and e.args[1].is_Integer and e.args[1] >= 0:
            base, k = self(e.args[0]), int(e.args[1])
            count = _CAP if k > _CAP else _binomial_capped(base.monomials + k - 1, k)
            return Size(count, base.degree * k, base.bits * k)
        return _ATOM


def _binomial_capped(n: int, k: int) -> int:
    """``min(C(n, k), _CAP)`` without computing a huge binomial."""
    k = min(k, n - k)
    if k < 0:
        return 0
    out = 1
    for i in range(1, k + 1):
        out = out * (n - k + i) // i
        if out >= _CAP:
            return _CAP
    return out
