"""Rewrite rules for ``//``, ``%``, ceil/trunc division and min/max, as a table.

Each ``Rule`` is one row: a name, the shape it rewrites (``pattern``, in guard
syntax, which the soundness test instantiates with random terms), the result,
a side condition in words, and the function that applies it to a node whose
arguments are already normalized.  The row is written on its function with
``@rule(...)``; rules of one node kind are tried in the order they are written.
``tests/test_rules.py`` checks every row against brute-force evaluation, so
adding a rule costs a small decorated function and is tested for free.

All rules are identities wherever the node is defined: a divisor's nonzero
condition is never dropped, because formulas keep their divisors beside the
terms (``formula.Rel.divisors``).  That is why ``(2*T*T) // T -> 2*T`` needs no
side condition here.  Side conditions that are needed (a positive divisor, a
dividend known to be small) are checked with interval bounds over the box.

The normal form these rules drive toward: ``%``, ceil division and
(sign-known) trunc division are expressed with ``//``; every ``//`` has a
positive-constant or symbolic divisor, no part of the dividend that is an
exact multiple of the divisor, and no common integer factor.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Callable, Optional

import sympy
from sympy import Expr, Integer

from .bounds import Bounds
from ..language.terms import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv

__all__ = ["Rule", "RULES", "rule", "exact_quotient", "split_multiples", "linear_coefficient"]


Apply = Callable[[Expr, Bounds], Optional[Expr]]


@dataclass(frozen=True)
class Rule:
    name: str
    node: type
    pattern: str          # what it rewrites, in guard syntax (pattern variables a, b, c, k, q)
    result: str           # what it becomes
    condition: str        # side condition, in words ("" if none)
    apply: Apply


RULES: list[Rule] = []
RULES_BY_NODE: dict[type, list[Rule]] = {}


def rule(node: type, pattern: str, result: str, condition: str = "", *,
         name: str = "") -> Callable[[Apply], Apply]:
    """Register the decorated function as the rule rewriting ``pattern`` into ``result`` for ``node``.

    The rule's name is the function's, without its leading underscore, unless ``name`` is given
    (one function may serve two rows, e.g. min and max).
    """
    def register(apply: Apply) -> Apply:
        row = Rule(name or apply.__name__.lstrip("_"), node, pattern, result, condition, apply)
        RULES.append(row)
        RULES_BY_NODE.setdefault(node, []).append(row)
        return apply
    return register


def _int_poly_coeffs_ok(q: Expr) -> bool:
    """True when ``q`` is a polynomial with integer coefficients over its atoms.

    An expanded ``q`` is read term by term (``sympy.Poly`` over 250 atoms took 7 s and does not stop at a
    deadline); a product of sums is left to ``sympy.Poly``.
    """
    if not q.free_symbols:
        return q.is_Integer
    for term in sympy.Add.make_args(q):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Integer:
            return False
        for factor in sympy.Mul.make_args(rest):
            if isinstance(factor, sympy.Add) or factor.is_Number:
                return _poly_coeffs_ok(q)
            if isinstance(factor, sympy.Pow) and not (factor.exp.is_Integer and factor.exp >= 0):
                return False            # 1/x: not a polynomial over its atoms
    return True


def _poly_coeffs_ok(q: Expr) -> bool:
    gens = _generators(q)
    if len(gens) > MAX_GENERATORS:
        return False
    try:
        return all(c.is_Integer for c in sympy.Poly(q, *gens).coeffs())
    except sympy.PolynomialError:  # not a polynomial over its atoms (e.g. 1/x appeared)
        return False


def _generators(e: Expr):
    """Atoms of a polynomial expression: symbols and non-arithmetic nodes, sorted for determinism."""
    gens = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, (sympy.Add, sympy.Mul)):
            stack.extend(node.args)
        elif isinstance(node, sympy.Pow):
            stack.append(node.args[0])
        elif not node.is_Number:
            gens.add(node)
    return sorted(gens, key=sympy.default_sort_key)


def exact_quotient(a: Expr, b: Expr) -> Optional[Expr]:
    """``q`` with ``a == b*q`` as polynomials and integer coefficients, else None."""
    if b == 0:
        return None
    if b.is_Integer:
        q = sympy.expand(a / b)
        return q if _int_poly_coeffs_ok(q) else None
    q, r = _divide(a, b)
    if q is None or r != 0 or not _int_poly_coeffs_ok(q):
        return None
    return q


def split_multiples(a: Expr, b: Expr) -> tuple[Expr, Expr]:
    """``(Q, R)`` with ``a == b*Q + R``, ``Q`` an integer polynomial, ``R`` free of obvious multiples of
    ``b``.

    For a constant ``b`` each coefficient is split toward zero (|remainder| < b,
    same sign), so ``-T`` stays ``-T`` rather than becoming ``-16*T + 15*T``.
    """
    if b.is_Integer:
        c = int(b)
        if c <= 0:
            return Integer(0), a
        quotient, remainder = [], []
        for term in sympy.Add.make_args(a):
            coeff, rest = term.as_coeff_Mul()
            if coeff.is_Integer and abs(int(coeff)) >= c:
                k = int(coeff)
                q = abs(k) // c * (1 if k > 0 else -1)
                quotient.append(q * rest)
                remainder.append((k - q * c) * rest)
            else:
                remainder.append(term)
        return sympy.Add(*quotient), sympy.Add(*remainder)
    quotient_poly, rest = _divide(a, b)
    if quotient_poly is None or rest is None or quotient_poly == 0 or not _int_poly_coeffs_ok(quotient_poly):
        return Integer(0), a
    return quotient_poly, rest


MAX_DIVISION_WORK = 2000    # terms of the dividend times terms of the divisor that _divide takes on
# atoms sympy's dense polynomials take on: each operation walks a level per atom, and does not stop at a
# deadline (a sum of 250 floor divisions made into a Poly took 7 s)
MAX_GENERATORS = 32


def _divide(a: Expr, b: Expr) -> tuple[Optional[Expr], Optional[Expr]]:
    """Multivariate polynomial division ``a == b*q + r`` over the atoms of ``a`` and ``b``.

    ``sympy.reduced`` keeps dividing past terms the divisor does not divide
    (``sympy.div`` stops at the first one and would leave ``a + b*q`` whole).
    """
    if a == 0:
        return Integer(0), Integer(0)
    if len(sympy.Add.make_args(a)) * len(sympy.Add.make_args(b)) > MAX_DIVISION_WORK:
        return None, None          # sympy.reduced does not stop at a deadline: 495 by 495 terms took 4 s
    gens = _generators(a + b)
    if not gens or len(gens) > MAX_GENERATORS:
        return None, None
    try:
        quotients, r = sympy.reduced(a, [b], *gens)
    except (sympy.PolynomialError, sympy.GeneratorsNeeded):
        return None, None
    q = quotients[0] if quotients else Integer(0)
    return sympy.expand(q), sympy.expand(r)


def linear_coefficient(e: Expr, atom: Expr) -> Optional[tuple[Expr, Expr]]:
    """``(C, rest)`` with ``e == C*atom + rest`` and ``atom`` in neither, else None."""
    coeff, rest = [], []
    for term in sympy.Add.make_args(e):
        factors = sympy.Mul.make_args(term)
        hits = [f for f in factors if f == atom]
        if len(hits) == 1:
            others = sympy.Mul(*(f for f in factors if f != atom))
            if others.has(atom):
                return None
            coeff.append(others)
        elif term.has(atom):
            return None
        else:
            rest.append(term)
    if not coeff:
        return None
    return sympy.Add(*coeff), sympy.Add(*rest)


def _content(e: Expr) -> int:
    """gcd of the integer coefficients of ``e``'s terms (0 for 0)."""
    g = 0
    for term in sympy.Add.make_args(e):
        coeff, _ = term.as_coeff_Mul()
        if not coeff.is_Integer:
            return 1
        g = gcd(g, abs(int(coeff)))
    return g


def _positive(b: Expr, bounds: Bounds) -> bool:
    iv = bounds(b)
    return iv is not None and iv.lo > 0


# -- floor division ------------------------------------------------------------

@rule(FloorDiv, "a // (-3)", "(-a) // 3", "constant divisor < 0")
def _floordiv_negative_divisor(node, bounds):
    a, b = node.args
    return FloorDiv(-a, -b) if b.is_Integer and b < 0 else None


@rule(FloorDiv, "(b*q) // b", "q", "q an integer polynomial")
def _floordiv_exact(node, bounds):
    return exact_quotient(*node.args)


@rule(FloorDiv, "(a + b*q) // b", "q + a // b", "q an integer polynomial")
def _floordiv_split_multiples(node, bounds):
    a, b = node.args
    q, r = split_multiples(a, b)
    return q + FloorDiv(r, b) if q != 0 else None


@rule(FloorDiv, "(6*a + 4) // (2*b)", "(3*a + 2) // b")
def _floordiv_common_factor(node, bounds):
    a, b = node.args
    g = gcd(_content(a), _content(b))
    return FloorDiv(sympy.expand(a / g), sympy.expand(b / g)) if g > 1 else None


@rule(FloorDiv, "(a // b) // c", "a // (b*c)", "c > 0")
def _floordiv_nested(node, bounds):
    a, b = node.args
    if isinstance(a, FloorDiv) and _positive(b, bounds):
        return FloorDiv(a.args[0], sympy.expand(a.args[1] * b))
    return None


@rule(FloorDiv, "(q + a // b) // c", "(b*q + a) // (b*c)", "b > 0, c > 0, q an integer polynomial")
def _floordiv_nested_sum(node, bounds):
    """``floor((q + floor(a/b)) / c) == floor((b*q + a) / (b*c))`` for integer ``q``: a pad's stage size
    plus one, halved (``(1 + (1 + P) // 2) // 2``), becomes one division of ``P`` (``(P + 3) // 4``)."""
    s, c = node.args
    parts = sympy.Add.make_args(s)
    inner = [p for p in parts if isinstance(p, FloorDiv)]
    if len(inner) != 1 or len(parts) < 2 or not _positive(c, bounds):
        return None
    a, b = inner[0].args
    q = sympy.expand(s - inner[0])
    if not _positive(b, bounds) or not _int_poly_coeffs_ok(q):
        return None
    return FloorDiv(sympy.expand(b * q + a), sympy.expand(b * c))


def _small_quotient(a: Expr, b: Expr, bounds: Bounds) -> Optional[Expr]:
    """``a // b`` for ``b > 0`` when bounds put ``a`` in ``[0, b)`` (0) or ``[-b, 0)`` (-1)."""
    ia, gap = bounds.tight(a), bounds.tight(sympy.expand(b - a))
    if ia is None or gap is None:
        return None
    if ia.lo >= 0 and gap.lo >= 1:
        return Integer(0)
    plus = bounds.tight(sympy.expand(a + b))
    if ia.hi < 0 and plus is not None and plus.lo >= 0:
        return Integer(-1)
    return None


@rule(FloorDiv, "a // (a // 2)", "2", "a >= 4, so the rest is below a // 2")
def _floordiv_by_quotient(node, bounds):
    """``a // (x // c)`` with ``a`` about ``k*x``: take out ``k*c`` and settle the small rest.

    ``a == k*c*d + (a - k*c*d)`` for ``d = x // c`` is an identity; the rule fires
    only when the rest then lies in ``[0, d)`` or ``[-d, 0)``, e.g.
    ``H // (H // 2) -> 2`` for ``H >= 4``.
    """
    a, d = node.args
    if not (isinstance(d, FloorDiv) and _positive(d, bounds)):
        return None
    x, c = d.args
    split = linear_coefficient(a, x)
    if split is None or not split[0].is_Integer:
        return None
    k = sympy.expand(split[0] * c)
    if not _int_poly_coeffs_ok(k):
        return None
    rest = _small_quotient(sympy.expand(a - k * d), d, bounds)
    return None if rest is None else k + rest


@rule(FloorDiv, "a // b", "0 or -1", "b > 0 and 0 <= a < b (or -b <= a < 0)")
def _floordiv_small_dividend(node, bounds):
    """0 <= a < b gives 0 and -b <= a < 0 gives -1, for b > 0."""
    a, b = node.args
    if not _positive(b, bounds):
        return None
    return _small_quotient(a, b, bounds)


@rule(FloorDiv, "a // 7", "a constant", "a within one multiple of 7 to the next")
def _floordiv_one_period(node, bounds):
    """A constant divisor and a dividend inside one period give a constant."""
    a, b = node.args
    ia = bounds(a)
    if b.is_Integer and b > 0 and ia is not None and ia.finite and ia.lo // int(b) == ia.hi // int(b):
        return Integer(int(ia.lo) // int(b))
    return None


# -- sums -------------------------------------------------------------------------

@rule(sympy.Add, "a // 3 - a // 6", "(a + 3) // 6")
def _sum_ceil_half(node, bounds):
    """``c*(a // d) - c*(a // (2*d))`` in a sum (``d`` a positive constant; ``a`` itself for ``d == 1``) is
    ``c*((a + d) // (2*d))``: ``n - floor(n/2) == ceil(n/2) == floor((n + 1)/2)`` for every integer ``n``,
    here ``n = floor(a/d)``.  A size padded to even and halved, ``(q + q % 2 + 1) // 2``, normalizes to
    ``q - q // 2`` and so meets Python's ``(q + 1) // 2`` (Swin's patch merging: its guards over unbounded
    sizes were undecided).  Fires only where the whole ``c*(a // d)`` is in the sum (it gets shorter)."""
    terms = sympy.Add.make_args(node)
    for term in terms:
        coeff, half = term.as_coeff_Mul()
        if not (isinstance(half, FloorDiv) and coeff.is_Integer and coeff < 0):
            continue
        a, m = half.args
        if not (m.is_Integer and m > 0 and m % 2 == 0):
            continue
        c, d = -coeff, m // 2
        whole = a if d == 1 else FloorDiv(a, d)
        out = sympy.expand(node - c * whole + c * half + c * FloorDiv(a + d, m))
        if len(sympy.Add.make_args(out)) < len(terms):
            return out
    return None


# -- the other division nodes and min/max ---------------------------------------

@rule(Mod, "a % b", "a - b*(a // b)")
def _mod_as_floordiv(node, bounds):
    a, b = node.args
    return a - b * FloorDiv(a, b)


@rule(CeilDiv, "CeilDiv(a, b)", "-((-a) // b)")
def _ceildiv_as_floordiv(node, bounds):
    a, b = node.args
    return -FloorDiv(-a, b)


@rule(TruncDiv, "TruncDiv(a, b)", "a // b or -((-a) // b)", "signs of a and b known")
def _truncdiv_by_sign(node, bounds):
    a, b = node.args
    ia, ib = bounds(a), bounds(b)
    if ia is None or ib is None:
        return None
    if (ia.lo >= 0 and ib.lo > 0) or (ia.hi <= 0 and ib.hi < 0):
        return FloorDiv(a, b)
    if (ia.hi <= 0 and ib.lo > 0) or (ia.lo >= 0 and ib.hi < 0):
        return -FloorDiv(-a, b)
    return None


@rule(Max, "max(a, a + 3)", "a + 3", "one argument never smaller", name="max_dominated")
@rule(Min, "min(a, a + 3)", "a", "one argument never larger", name="min_dominated")
def _minmax_dominated(node, bounds):
    """Drop arguments another argument always beats (by the bounds of their difference)."""
    args = list(node.args)
    keep = []
    for i, x in enumerate(args):
        beaten = False
        for j, y in enumerate(args):
            if i == j:
                continue
            d = bounds(sympy.expand(x - y))
            if d is None:
                continue
            # x is never needed when y always beats or ties it; of two always-equal
            # arguments the earlier one stays
            never_better = d.lo >= 0 if isinstance(node, Min) else d.hi <= 0
            always_equal = d.lo == d.hi == 0
            if never_better and (not always_equal or j < i):
                beaten = True
                break
        if not beaten:
            keep.append(x)
    return node.func(*keep) if len(keep) < len(args) else None
