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
  ``CeilDiv``, ``TruncDiv`` (and ``f // 1.0`` is ``math.floor(f)``); a
  comparison compares ``N1 * 2**(k - k1)`` with ``N2 * 2**(k - k2)`` (an int
  side is compared exactly, as Python does);
* one correctly rounded division ``a / b`` of ints with ``|a| < 2**53``,
  rounded to an int or compared with an int, is exact too: if ``a / b`` is an
  integer it is representable, and otherwise it lies at least ``1/|b|`` from
  every integer while the rounding error is at most ``|a/b| * 2**-53 < 1/|b|``
  (for ``|a/b|`` at least the least normal double, ``2**-1022``), so the double
  lies strictly between the same two integers.  A smaller quotient lies in
  ``(-1, 1)`` and rounds to a double of at most that size: ``int`` of it is 0
  either way, whatever ``b``; ``math.floor``, ``math.ceil`` and a comparison
  with 0 see its sign, which the double keeps unless it rounds to zero, and it
  does not while ``|b| < 2**1074`` (then ``|a/b| > 2**-1074``, the least
  subnormal), and where it does, ``math.floor`` of a quotient that is not
  negative (``math.ceil``: not positive) is 0 either way.  That is
  ``math.ceil(T / 16)``, torch's ``CeilToInt(IntTrueDiv)``, and ``int(-4 / x)``
  over an unbounded ``x``;
* ``math.floor``, ``int`` (``math.trunc``) and ``math.ceil`` of ``math.sqrt(n)``
  or ``n ** 0.5`` for an integer term ``0 <= n <= 2**50`` are ``isqrt(n)`` (and
  ``isqrt(n - 1) + 1``): ``float(n)`` is exact; the root of a square ``r*r`` is
  the double ``r`` (``r <= 2**25``), which ``math.sqrt`` returns, being
  correctly rounded, and so does the C library's ``pow``, whose error before
  its one final rounding is far below half a unit in the last place (glibc
  documents 0.52 ULP in all; measured: ``(r*r) ** 0.5 == r`` for every
  ``r <= 2**25``); any other ``n`` lies strictly between ``k*k`` and
  ``(k+1)**2`` with ``k + 1 <= 2**25``, and its root is more than ``2**-26``
  from both (``sqrt(n) - k = (n - k*k)/(sqrt(n) + k) >= 1/(sqrt(n) + k)``, a
  denominator below ``2**26``; likewise for ``k + 1``), while a unit in the
  last place of a double below ``2**25`` is at most ``2**-28``: a result
  within 2 units of the root (``math.sqrt``: half a unit; glibc's ``pow``:
  0.52) lies strictly between ``k`` and ``k + 1``.  Past ``2**50`` that
  margin shrinks below a unit: ``math.sqrt(2**52 + 2**27)`` rounds up to
  ``2**26 + 1``, one more than ``isqrt``;
* a float that is monotone in one integer term ``t`` (``float(t)`` or ``t / c``
  through ``+ - * /`` with constants), compared with a constant, holds on an
  interval of ``t`` whose ends bisection finds in Python: ``x / 3 > 1.5`` is
  ``x >= 5`` (``threshold``).

A float sub-expression without symbols is the one double Python computes
(``math.floor((-2) / 0.1)`` is ``-21``), whatever its operations.  Bounds come
from the declared ranges, narrowed by the linear facts.  Anything else stays a
float node, which only enumeration evaluates.
"""
from __future__ import annotations

import math
from typing import Mapping

import sympy
from sympy import Expr, Integer, Symbol

from ..language import floats as FL
from ..language import formula as F
from .bounds import Bounds
from ..language.evaluate import Undefined, evaluate_term
from .ranges import tighten
from ..language.nodes import FLOAT_WRAPPERS, TABLE, FloorDiv, ISqrt, Kind, Max, Min
from ..language.size import SizeOf
from ..language.terms import divisors, iter_nodes

__all__ = ["exact_floats"]

_MANTISSA = 2 ** 53
_NO_UNDERFLOW = 2 ** 1074   # a divisor below this keeps the sign of a nonzero quotient a/b (|a| >= 1)
_EXACT_ROOTS = 2 ** 50      # floor(sqrt(float(n))) is isqrt(n) for 0 <= n <= this (see above)
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
    narrowed = tighten(ranges, facts) or ranges
    exact = _Exact(Bounds(narrowed))
    return exact.formula(goal), tuple(exact.formula(f) for f in facts)


def _constant(node: Expr) -> float | int | None:
    """The value Python computes for a node without symbols (None where it raises, or is not finite)."""
    try:
        value = evaluate_term(node, {})
    except Undefined:
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _is_one(f: Expr) -> bool:
    """Whether the float term ``f`` is the constant 1.0."""
    return not f.free_symbols and _constant(f) == 1


def _first(holds, lo: int, hi: int) -> int:
    """The least ``v`` in ``[lo, hi]`` where ``holds`` (false, then true, as ``v`` grows) is true; ``hi + 1``
    if there is none."""
    while lo <= hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid - 1
        else:
            lo = mid + 1
    return lo


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
        """``t`` with each rounding wrapper that is exact replaced by integer nodes, and each float wrapper
        without symbols by its value."""
        mapping = {}
        for node in iter_nodes(t):
            if isinstance(node, FLOAT_WRAPPERS) and not node.free_symbols:
                value = _constant(node)
                if value is not None:
                    mapping[node] = Integer(value)
            elif type(node) in _ROUNDED:
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
        root = self.root(w)
        if root is not None:
            return root
        quotient = self.quotient(f)
        if quotient is not None and self._rounds_alike(type(w), *quotient):
            return _ROUNDED[type(w)](*quotient)
        scaled = self.scaled(f)
        if scaled is None:
            return None
        n, k = scaled
        return _ROUNDED[type(w)](n, Integer(2) ** k)

    def root(self, w: Expr) -> Expr | None:
        """``math.floor``/``int``/``math.ceil`` of ``math.sqrt(n)`` or ``n ** 0.5`` as ``isqrt`` (above)."""
        f = w.args[0]
        half = isinstance(f, FL.FloatPow) and not f.args[1].free_symbols and _constant(f.args[1]) == 0.5
        if not ((isinstance(f, FL.FSqrt) or half) and isinstance(f.args[0], FL.ToFloat)):
            return None
        n = self.integer(f.args[0].args[0])
        span = None if n is None else self.bounds(n)
        if n is None or span is None or not (0 <= span.lo and span.hi <= _EXACT_ROOTS):
            return None
        if isinstance(w, FL.CeilToInt):         # the root of a square is exact; of another n, isqrt(n) + 1
            return ISqrt(n - 1) + 1 if span.lo >= 1 else Min(n, ISqrt(Max(n - 1, 0)) + 1)
        return ISqrt(n)

    # -- float terms ------------------------------------------------------------------
    def _rounds_alike(self, rounding: type, a: Expr, b: Expr) -> bool:
        """Whether ``rounding`` of the double ``a / b`` is that of the exact quotient (``|a| < 2**53``): for
        ``int`` always; for ``math.floor`` (``math.ceil``) where no quotient can underflow to zero, or none
        is negative (positive), so zero rounds as the quotient does."""
        if rounding is FL.TruncToInt or _within(self.bounds(b), _NO_UNDERFLOW, strict=True):
            return True
        a_, b_ = self.bounds(a), self.bounds(b)
        if a_ is None or b_ is None:
            return True                         # defined nowhere
        positive = (a_.lo >= 0 and b_.lo > 0) or (a_.hi <= 0 and b_.hi < 0)
        negative = (a_.lo >= 0 and b_.hi < 0) or (a_.hi <= 0 and b_.lo > 0)
        return (rounding is FL.FloorToInt and positive) or (rounding is FL.CeilToInt and negative)

    def quotient(self, f: Expr) -> tuple[Expr, Expr] | None:
        """``(a, b)`` when ``f`` is one correctly rounded division of ints with ``|a| < 2**53``."""
        if isinstance(f, FL.IntTrueDiv):
            a, b = f.args
        elif isinstance(f, FL.FDiv) and all(isinstance(x, FL.ToFloat) for x in f.args):
            a, b = f.args[0].args[0], f.args[1].args[0]
        else:
            return None
        a, b = self.integer(a), self.integer(b)
        if a is None or b is None:
            return None
        return (a, b) if _within(self.bounds(a), _MANTISSA, strict=True) else None

    def scaled(self, f: Expr) -> tuple[Expr, int] | None:
        """``(N, k)`` with ``f == N / 2**k`` exactly in doubles over the box, else None."""
        if f not in self.memo:
            self.memo[f] = self._scaled(f)
        return self.memo[f]

    def _scaled(self, f: Expr) -> tuple[Expr, int] | None:
        if isinstance(f, FL.FloatConst):
            p, q = int(f.args[0].p), int(f.args[0].q)
            return Integer(p), q.bit_length() - 1
        if isinstance(f, FL.IntTrueDiv) and f.args[0] == f.args[1]:
            return Integer(1), 0                # x / x is 1.0 wherever x is not 0 (a divisor, so nonzero)
        if not f.free_symbols:
            value = _constant(f)
            if value is None:
                return None
            p, q = value.as_integer_ratio()
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
        if isinstance(f, FL.FFloorDiv) and _is_one(f.args[1]):
            return self._floored(f.args[0])
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

    def _floored(self, f: Expr) -> tuple[Expr, int] | None:
        """``f // 1.0``: Python's float floor division by 1 is ``math.floor`` of a finite ``f``, exactly."""
        quotient = self.quotient(f)
        if quotient is not None and self._rounds_alike(FL.FloorToInt, *quotient):
            return self._fits(FloorDiv(*quotient), 0)
        inner = self.scaled(f)
        return None if inner is None else self._fits(FloorDiv(inner[0], Integer(2) ** inner[1]), 0)

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
            if (quotient is not None and other is not None and other[1] == 0
                    and _within(self.bounds(quotient[1]), _NO_UNDERFLOW, strict=True)):   # the sign kept
                a, b = quotient                 # sign(a/b - c) == sign((a - b*c) * b), b != 0
                diff = (a - b * other[0]) * b
                if SizeOf()(diff).monomials <= MAX_EXPANDED_TERMS:
                    diff = sympy.expand(diff)   # else a product: expanding degree-4 sides took 16 s
                return F.rel(F.FLIPPED[op] if flip else op, diff, Integer(0), divs | {b})
        left, right = self.side(x), self.side(y)
        if left is None or right is None:
            return self.threshold(w, divs)
        (n1, k1), (n2, k2) = left, right
        k = max(k1, k2)
        return F.rel(op, n1 * Integer(2) ** (k - k1), n2 * Integer(2) ** (k - k2), divs)

    def threshold(self, w: Expr, divs: frozenset) -> F.Formula | None:
        """A comparison of a float monotone in one integer term ``t`` (``floats.monotone_in``) with a
        constant: the values of ``t`` where it holds are an interval, whose ends bisection finds with
        Python's own arithmetic, so it is a relation on ``t`` (undefined past the magnitude where
        ``float(t)`` or ``t / c`` raises: a ``Defined`` marker of that float, where the box reaches it)."""
        x, y = w.args
        varying, constant = (x, y) if x.free_symbols else (y, x)
        found = FL.monotone_in(varying) if isinstance(varying, FL.FloatTerm) else None
        c = _constant(constant) if not constant.free_symbols else None
        t = None if found is None else self.integer(found.term)
        span = None if t is None else self.bounds(t)
        if found is None or c is None or t is None or span is None:
            return None
        limit = found.evaluates_below
        start, end = max(1 - limit, span.lo), min(limit - 1, span.hi)
        if start > end:
            return None
        start, end = int(start), int(end)
        probe = sympy.Dummy("t", integer=True)
        at = varying.xreplace({found.term: probe})

        def value(v: int) -> float:
            return evaluate_term(at, {probe: v})

        if isinstance(w, FL.FloatEq):
            # where ``value`` is c: after the values below it, before those above it (as t grows)
            below = (lambda v: value(v) < c) if found.direction > 0 else (lambda v: value(v) > c)
            above = (lambda v: value(v) > c) if found.direction > 0 else (lambda v: value(v) < c)
            low, high = _first(lambda v: not below(v), start, end), _first(above, start, end) - 1
            op, lhs, rhs = (">=", Min(t - low, high - t), Integer(0)) if low <= high else ("!=", t, t)
        else:
            python = TABLE[type(w)].python          # Python's comparison: exact, inf included

            def holds(v: int) -> bool:
                return bool(python(value(v), c) if x is varying else python(c, value(v)))

            if holds(start) == holds(end):
                op, lhs, rhs = ("==" if holds(start) else "!="), t, t
            else:
                boundary = _first(lambda v: holds(v) != holds(start), start, end)
                op, lhs, rhs = ("<" if holds(start) else ">="), t, Integer(boundary)
        outside = frozenset() if -limit < span.lo and span.hi < limit else frozenset(
            {FL.Defined(FL.round_float(FL.Rounding.FLOOR, found.base))})
        return F.rel(op, lhs, rhs, divs | outside)

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
        lhs, rhs = self.term(f.lhs), self.term(f.rhs)
        return F.rel(f.op, lhs, rhs, divs | self.cancelled(f, lhs, rhs))

    def cancelled(self, f: F.Rel, lhs: Expr, rhs: Expr) -> frozenset:
        """Where a float wrapper of ``f`` is gone from the rewritten sides, what keeps its domain: a constant
        replaced by its value can cancel another (``math.ceil(0 / 3) * int(math.sqrt(-x))`` is ``0``, which
        Python never computes: ``math.sqrt`` raises first), so its marker (``floats.prune_defined``
        dropped it while the wrapper stood in a side) comes back."""
        present = set(iter_nodes(lhs)) | set(iter_nodes(rhs))
        gone = [w for w in set(iter_nodes(f.lhs)) | set(iter_nodes(f.rhs))
                if isinstance(w, FLOAT_WRAPPERS) and self.term(w) not in present]
        return frozenset().union(*(self.divisor(FL.Defined(w)) for w in gone)) if gone else frozenset()
