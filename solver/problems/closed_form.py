"""One division for a term of one symbol that nests several: ``(a*x + b) // c``.

A size passed through k strided layers with TensorFlow's "SAME" padding is
``ceil(x / 2**k)``, but torch computes it layer by layer as
``(E + E % 2) // 2`` of the size ``E`` before, where ``E`` occurs twice: the
k-th size holds 2**k copies of ``x``, and every question on it costs as much
(a 10-stage model's trace took 36 s).  Such a term is *quasi-affine* in ``x``:
``t(x + c) = t(x) + a`` for a period ``c`` read from its structure, so it is
``(a*x + b) // c`` at every integer wherever one ``b`` fits one period of its
values.  ``affine_floor`` finds that form; the tracer still proves it equal
over the symbol's range before it rewrites a size with it.
"""
from __future__ import annotations

import math

from sympy import Add, Expr, Mul, Symbol

from ..language.evaluate import Undefined, evaluate_term
from ..language.nodes import CeilDiv, FloorDiv, Max, Min, Mod, iter_nodes
from ..language.terms import DIVISION_NODES, symbols_in

__all__ = ["affine_floor", "nested_divisions"]

# the largest period sampled: two periods are evaluated, so this bounds the work per term
_LARGEST_PERIOD = 4096


def nested_divisions(term: Expr) -> bool:
    """Whether ``term`` has two division nodes or more (a single one is already the closed form)."""
    found = 0
    for node in iter_nodes(term):
        found += isinstance(node, DIVISION_NODES)
        if found > 1:
            return True
    return False


def affine_floor(term: Expr, lower: int) -> tuple[int, int, int] | None:
    """``(a, b, c)`` with ``(a*x + b) // c`` equal to ``term`` at every integer ``x`` (its one symbol), read
    from its values over two periods from ``lower``; None where ``term`` has another symbol, a symbolic
    divisor, parts that grow apart, a period above the limit or no such form."""
    symbols = symbols_in(term)
    if len(symbols) != 1:
        return None
    (x,) = symbols
    period = _period(term, {})
    if period is None or period > _LARGEST_PERIOD:
        return None
    points = range(lower, lower + 2 * period)
    try:
        values = [evaluate_term(term, {x: p}) for p in points]
    except (Undefined, ValueError):      # a symbolic divisor, or zero at a sampled point
        return None
    slope = values[period] - values[0]
    # (a*x + b) // c == v  <=>  c*v - a*x <= b <= c*v - a*x + c - 1, at every point
    gaps = [period * v - slope * p for p, v in zip(points, values)]
    least, most = max(gaps), min(gaps) + period - 1
    if least > most:
        return None
    return _reduced(slope, least, most, period)


def _period(term: Expr, memo: dict) -> int | None:
    """A ``c`` with ``term(x + c) - term(x)`` constant; None where the engine cannot tell one."""
    growth = _growth(term, memo)
    return growth[0] if growth is not None else None


def _growth(term: Expr, memo: dict) -> tuple[int, int] | None:
    """``(c, a)`` with ``term(x + c) == term(x) + a`` for every ``x``: a division by ``d`` of a term
    growing ``(c, a)`` grows ``(k*c, k*a // d)`` for the least ``k`` making ``k*a`` a multiple of ``d``;
    sums and products with constants over the lcm of their parts' periods.  None for a symbolic divisor,
    a product of two terms not both periodic, or a ``min``/``max`` of parts growing apart (one argument
    wins in the end)."""
    if term.is_Integer:
        return 1, 0
    if isinstance(term, Symbol):
        return 1, 1
    if term not in memo:
        memo[term] = None
        grown = [_growth(a, memo) for a in term.args]
        parts = [g for g in grown if g is not None]
        if len(parts) < len(grown):
            return None
        period = math.lcm(*(c for c, _ in parts))
        slopes = [a * (period // c) for c, a in parts]
        if isinstance(term, (FloorDiv, CeilDiv, Mod)):     # not trunc division: it turns at 0
            divisor = term.args[1]
            if divisor.is_Integer and divisor != 0:
                times = abs(int(divisor)) // math.gcd(slopes[0], abs(int(divisor)))
                whole = slopes[0] * times // int(divisor)
                memo[term] = period * times, (0 if isinstance(term, Mod) else whole)
        elif isinstance(term, Add):
            memo[term] = period, sum(slopes)
        elif isinstance(term, Mul):
            coefficient = math.prod(int(a) for a in term.args if a.is_Integer)
            factors = [g for a, g in zip(term.args, parts) if not a.is_Integer]
            if len(factors) == 1:
                memo[term] = factors[0][0], coefficient * factors[0][1]
            elif not any(slopes):
                memo[term] = period, 0
        elif isinstance(term, (Min, Max)) and len(set(slopes)) == 1:
            memo[term] = period, slopes[0]
    return memo[term]


def _reduced(slope: int, least: int, most: int, period: int) -> tuple[int, int, int]:
    """The form with the smallest divisor among those whose offset lies in ``[least, most]``: a common
    factor of slope, offset and divisor is divided out where an offset allows it."""
    for factor in sorted(_divisors_of(math.gcd(slope, period)), reverse=True):
        offset = -(-least // factor) * factor          # the least multiple of factor in range
        if offset <= most:
            return slope // factor, offset // factor, period // factor
    raise AssertionError("factor 1 always fits")


def _divisors_of(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
