"""Float sub-expressions rewritten into integer nodes where doubles compute them exactly.

A float node (``floats.py``) is decided by what Python computes in doubles.
Over a box where every constant and every intermediate is exactly
representable and every operation is exact, that value *is* the rational one,
so the sub-expression becomes integer nodes that every strategy reasons about:

* an exact float is kept as ``N / 2**k`` with ``N`` an integer term: a constant
  is dyadic already; ``float(t)`` is exact while ``|t| <= 2**53``; ``+ - *`` are
  exact while ``|N| <= 2**53`` (the result is a multiple of ``2**-k`` that fits
  the mantissa); dividing by a power of two only changes ``k``;
* ``math.floor``/``math.ceil``/``int`` of ``N / 2**k`` are ``N // 2**k``,
  ``CeilDiv``, ``TruncDiv``; a comparison compares ``N1 * 2**(k - k1)`` with
  ``N2 * 2**(k - k2)`` (an int side is compared exactly, as Python does);
* one correctly rounded division ``a / b`` of ints with ``|a| < 2**53`` and
  ``|b| <= 2**53``, rounded to an int or compared with an int, is exact too:
  if ``a / b`` is an integer it is representable, and otherwise it lies at least
  ``1/|b|`` from every integer while the rounding error is at most
  ``|a/b| * 2**-53 < 1/|b|``, so the double lies strictly between the same two
  integers.  That is ``math.ceil(T / 16)``, torch's ``CeilToInt(IntTrueDiv)``.

Bounds come from the declared ranges, narrowed by the linear facts.  Anything
else stays a float node, which only enumeration evaluates.
"""
from __future__ import annotations

from typing import Mapping

import sympy
from sympy import Expr, Integer, Symbol

from . import floats as FL
from . import formula as F
from .bounds import Bounds
from .nodes import TABLE, Kind
from .size import SizeOf
from .terms import divisors, iter_nodes

__all__ = ["exact_floats"]

_MANTISSA = 2 ** 53
# a comparison's polynomial is expanded only where it has at most about this many terms
MAX_EXPANDED_TERMS = 2000
_MAX_SCALE = 1000           # 2**-1074 is the finest double; stay well above it
# rounding an exact quotient is an integer node (``math.floor(a / b)`` is ``a // b``): the row's
# ``quotient_node``
_ROUNDED = {row.cls: row.quotient_node for row in TABLE.values() if row.quotient_node is not None}
_OP = {row.cls: row.infix for row in TABLE.values() if row.kind is Kind.COMPARISON}


def exact_floats(goal: F.Formula, facts: tuple, ranges: Mapping[Symbol, tuple]) -> tuple[F.Formula, tuple]:
    """``(goal, facts)`` with every float sub-expression that is exact over ``ranges`` made integer."""
    if not any(r.has_floats for f in (goal, *facts) for r in F.relations(f)):
        return goal, facts
    from .interval import tighten                # interval imports problem, which imports this module
    narrowed = tighten(ranges, facts) or ranges
    exact = _Exact(Bounds(narrowed))
    return exact.formula(goal), tuple(exact.formula(f) for f in facts)


def _within(bound, limit: int, strict: bool = False) -> bool:
    if bound is None:
        return True                          # defined nowhere: nothing to be inexact about
    lo, hi = bound
    return (-limit < lo and hi < limit) if strict else (-limit <= lo and hi <= limit)


def _power_of_two(n: Expr) -> int | None:
    """``j`` when ``n == ±2**j`` (a constant), else None."""
    if not n.is_Integer or n == 0:
        return None
    m = abs(int(n))
    return m.bit_length() - 1 if m & (m - 1) == 0 else None


class _Exact:
    def __init__(self, bounds: Bounds):
        self.bounds = bounds
        self.memo: dict[Expr, tuple | None] = {}

    # -- integer terms --------------------------------------------------------------
    def term(self, t: Expr) -> Expr:
        """``t`` with each rounding wrapper that is exact replaced by integer nodes."""
        mapping = {}
        for node in iter_nodes(t):
            if type(node) in _ROUNDED:
                exact = self.rounded(node)
                if exact is not None:
                    mapping[node] = exact
        return t.xreplace(mapping) if mapping else t

    def integer(self, t: Expr) -> Expr | None:
        """``t`` made float-free, or None."""
        out = self.term(t)
        return None if FL.has_floats([out]) else out

    def rounded(self, w: Expr) -> Expr | None:
        f = w.args[0]
        quotient = self.quotient(f)
        if quotient is not None:
            return _ROUNDED[type(w)](*quotient)
        scaled = self.scaled(f)
        if scaled is None:
            return None
        n, k = scaled
        return _ROUNDED[type(w)](n, Integer(2) ** k)

    # -- float terms ------------------------------------------------------------------
    def quotient(self, f: Expr) -> tuple[Expr, Expr] | None:
        """``(a, b)`` when ``f`` is one correctly rounded division of ints within the theorem's bounds."""
        if isinstance(f, FL.IntTrueDiv):
            a, b = f.args
        elif isinstance(f, FL.FDiv) and all(isinstance(x, FL.ToFloat) for x in f.args):
            a, b = f.args[0].args[0], f.args[1].args[0]
        else:
            return None
        a, b = self.integer(a), self.integer(b)
        if a is None or b is None:
            return None
        if _within(self.bounds(a), _MANTISSA, strict=True) and _within(self.bounds(b), _MANTISSA):
            return a, b
        return None

    def scaled(self, f: Expr) -> tuple[Expr, int] | None:
        """``(N, k)`` with ``f == N / 2**k`` exactly in doubles over the box, else None."""
        if f not in self.memo:
            self.memo[f] = self._scaled(f)
        return self.memo[f]

    def _scaled(self, f: Expr) -> tuple[Expr, int] | None:
        if isinstance(f, FL.FloatConst):
            p, q = int(f.args[0].p), int(f.args[0].q)
            return Integer(p), q.bit_length() - 1
        if isinstance(f, FL.ToFloat):
            t = self.integer(f.args[0])
            return (t, 0) if t is not None and _within(self.bounds(t), _MANTISSA) else None
        if isinstance(f, FL.FNeg):
            inner = self.scaled(f.args[0])
            return None if inner is None else (-inner[0], inner[1])
        if isinstance(f, FL.IntTrueDiv):
            a, b = (self.integer(x) for x in f.args)
            j = None if b is None else _power_of_two(b)
            if a is None or b is None or j is None or not _within(self.bounds(a), _MANTISSA):
                return None
            return self._fits(a if b > 0 else -a, j)
        if not isinstance(f, (FL.FAdd, FL.FSub, FL.FMul, FL.FDiv)):
            return None
        left, right = self.scaled(f.args[0]), self.scaled(f.args[1])
        if left is None or right is None:
            return None
        (n1, k1), (n2, k2) = left, right
        if isinstance(f, FL.FMul):
            return self._fits(n1 * n2, k1 + k2)
        if isinstance(f, FL.FDiv):
            j = _power_of_two(n2)
            if j is None:
                return None
            n = n1 if n2 > 0 else -n1
            shift = k1 + j - k2                  # n1/2**k1 / (±2**j/2**k2)
            return self._fits(n, shift) if shift >= 0 else self._fits(n * Integer(2) ** -shift, 0)
        k = max(k1, k2)
        a, b = n1 * Integer(2) ** (k - k1), n2 * Integer(2) ** (k - k2)
        return self._fits(a + b if isinstance(f, FL.FAdd) else a - b, k)

    def _fits(self, n: Expr, k: int) -> tuple[Expr, int] | None:
        if k > _MAX_SCALE or not _within(self.bounds(n), _MANTISSA):
            return None
        return n, k

    # -- conditions -------------------------------------------------------------------
    def side(self, x: Expr) -> tuple[Expr, int] | None:
        """A comparison operand as ``(N, k)``: an int side is exact at any size (Python compares exactly)."""
        if isinstance(x, FL.FloatTerm):
            return self.scaled(x)
        t = self.integer(x)
        return None if t is None else (t, 0)

    def comparison(self, w: Expr, divs: frozenset) -> F.Formula | None:
        op, (x, y) = _OP[type(w)], w.args
        for first, second, flip in ((x, y, False), (y, x, True)):
            quotient = self.quotient(first) if isinstance(first, FL.FloatTerm) else None
            other = self.side(second)
            if quotient is not None and other is not None and other[1] == 0:
                a, b = quotient                 # sign(a/b - c) == sign((a - b*c) * b), b != 0
                diff = (a - b * other[0]) * b
                if SizeOf()(diff).monomials <= MAX_EXPANDED_TERMS:
                    diff = sympy.expand(diff)   # else a product: expanding degree-4 sides took 16 s
                return F.rel(F.FLIPPED[op] if flip else op, diff, Integer(0), divs | {b})
        left, right = self.side(x), self.side(y)
        if left is None or right is None:
            return None
        (n1, k1), (n2, k2) = left, right
        k = max(k1, k2)
        return F.rel(op, n1 * Integer(2) ** (k - k1), n2 * Integer(2) ** (k - k2), divs)

    def divisor(self, d: Expr) -> frozenset:
        if isinstance(d, FL.Defined) and type(d.args[0]) in _ROUNDED:
            exact = self.rounded(d.args[0])
            if exact is not None:
                return divisors([exact])
        return frozenset({self.term(d)})

    def formula(self, f: F.Formula) -> F.Formula:
        if isinstance(f, F.Const):
            return f
        if isinstance(f, (F.And, F.Or)):
            return F.rebuilt(f, (self.formula(a) for a in f.args))
        divs = frozenset().union(*(self.divisor(d) for d in f.divisors))
        if type(f.lhs) in _OP and f.rhs == 0 and f.op in ("==", "!="):
            exact = self.comparison(f.lhs, divs)
            if exact is not None:
                return exact if f.op == "!=" else F.neg(exact)
        return F.rel(f.op, self.term(f.lhs), self.term(f.rhs), divs)
