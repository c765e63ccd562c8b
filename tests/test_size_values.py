"""Values followed through tensors: what ``size_values`` proves about float steps holds in IEEE arithmetic.

Each claim the algebra makes (a rounding of a float32/float64 computation
equals the integer expression over the whole range) is checked against numpy
at every point of the range; each refusal is shown to be necessary by a point
where the float computation really gives another integer.
"""
import numpy as np
import pytest
import sympy

pytest.importorskip("torch")

from shapeproof.solver.problems.bounds import bound
from shapeproof.solver.language.terms import symbol
from shapeproof.tracer.sizes.size_values import FLOAT32, FLOAT64, Algebra, BoolValue, IntValue, NotTracked
from shapeproof.tracer.sympy_bridge import to_term
from shapeproof.tracer.torch_internals import Max, Min

L = sympy.Symbol("L", integer=True, positive=True)
INT64 = (-2 ** 63, 2 ** 63 - 1)
NP = {FLOAT32: np.float32, FLOAT64: np.float64}


def algebra(lo: int, hi: int) -> Algebra:
    def bounds(expr):
        iv = bound(to_term(expr), {symbol("L"): (lo, hi)})
        finite = [None if abs(v) == float("inf") else int(v) for v in (iv.lo, iv.hi)]
        return tuple(finite)
    return Algebra(bounds)


def padding_frames(alg: Algebra, k: int, s: int, p: int, bits: int):
    """Encodec's ``torch.ceil((length - k + p) / s + 1).to(torch.int64)`` on int64 tensors."""
    n = alg.to_float(IntValue(L - k + p), bits)
    q = alg.float_op("add", alg.float_op("div", n, alg.to_float(IntValue(sympy.Integer(s)), bits)),
                     alg.constant_float(1, bits))
    return alg.to_int(alg.rounded(q, "ceil"), *INT64)


def ieee_padding_frames(lengths, k, s, p, bits):
    t = NP[bits]
    return np.ceil(t(lengths - k + p) / t(s) + t(1)).astype(np.int64)


def values_of(expr, lengths) -> np.ndarray:
    """``expr`` at every length, in exact integer arithmetic (torch's FloorDiv as numpy's floor_divide)."""
    fdiv = sympy.Function("fdiv")
    exact = expr.replace(lambda e: e.func.__name__ == "FloorDiv", lambda e: fdiv(*e.args))
    f = sympy.lambdify(L, exact, [{"fdiv": np.floor_divide}, "numpy"])
    return np.broadcast_to(np.asarray(f(lengths), dtype=np.int64), lengths.shape)


@pytest.mark.parametrize("k, s, p", [(4, 2, 2), (8, 4, 4), (10, 5, 5), (16, 8, 8), (7, 1, 6), (3, 3, 0)])
def test_encodec_padding_in_float32_is_the_integer_ceil_over_the_declared_lengths(k, s, p):
    lo, hi = 1600, 48000
    frames = padding_frames(algebra(lo, hi), k, s, p, FLOAT32)
    lengths = np.arange(lo, hi + 1, dtype=np.int64)
    exact = -((-(lengths - k + p + s)) // s)
    assert np.array_equal(ieee_padding_frames(lengths, k, s, p, FLOAT32), exact)
    assert np.array_equal(values_of(frames.expr, lengths), exact)


def test_a_float32_step_that_rounds_over_the_range_is_refused():
    with pytest.raises(NotTracked, match="float32"):
        padding_frames(algebra(2, 2 ** 26), 0, 3, 1, FLOAT32)
    # and refusing is needed: float32 gives another integer at lengths in that range
    lengths = np.arange(2 ** 24, 2 ** 24 + 2 ** 12, dtype=np.int64)
    assert not np.array_equal(ieee_padding_frames(lengths, 0, 3, 1, FLOAT32), -((-(lengths + 1 + 3)) // 3))


def test_float64_is_exact_much_further_and_refused_past_2_to_the_53():
    alg = algebra(2, 2 ** 40)
    frames = padding_frames(alg, 0, 3, 1, FLOAT64)
    lengths = np.concatenate([np.arange(2, 5000), np.arange(2 ** 40 - 5000, 2 ** 40 + 1)]).astype(np.int64)
    assert np.array_equal(values_of(frames.expr, lengths), ieee_padding_frames(lengths, 0, 3, 1, FLOAT64))
    with pytest.raises(NotTracked):
        padding_frames(algebra(2, 2 ** 54), 0, 3, 1, FLOAT64)


@pytest.mark.parametrize("mode", ["floor", "ceil", "trunc"])
def test_rounding_a_negative_quotient(mode):
    alg = algebra(2, 500)
    q = alg.float_op("div", alg.to_float(IntValue(L - 1000), FLOAT32), alg.constant_float(7, FLOAT32))
    value = alg.to_int(alg.rounded(q, mode), *INT64)
    lengths = np.arange(2, 501, dtype=np.int64)
    ieee = getattr(np, mode)(np.float32(lengths - 1000) / np.float32(7)).astype(np.int64)
    assert np.array_equal(values_of(value.expr, lengths), ieee)


def test_trunc_of_a_value_that_changes_sign_is_refused():
    alg = algebra(2, 500)
    q = alg.float_op("div", alg.to_float(IntValue(L - 100), FLOAT32), alg.constant_float(7, FLOAT32))
    with pytest.raises(NotTracked, match="sign"):
        alg.rounded(q, "trunc")


def test_round_half_to_even_only_for_odd_denominators():
    alg = algebra(2, 5000)
    odd = alg.float_op("div", alg.to_float(IntValue(L), FLOAT32), alg.constant_float(3, FLOAT32))
    value = alg.to_int(alg.rounded(odd, "round"), *INT64)
    lengths = np.arange(2, 5001, dtype=np.int64)
    assert np.array_equal(values_of(value.expr, lengths), np.round(np.float32(lengths) / np.float32(3)))
    even = alg.float_op("div", alg.to_float(IntValue(L), FLOAT32), alg.constant_float(2, FLOAT32))
    with pytest.raises(NotTracked):        # L/2 is a half-integer for odd L: ties need the exact rule
        alg.rounded(even, "round")


def test_a_decimal_constant_is_its_float32_value():
    alg = algebra(2, 1000)
    scaled = alg.float_op("mul", alg.to_float(IntValue(L), FLOAT32), alg.constant_float(0.1, FLOAT32))
    assert scaled.den == 2 ** 27              # 0.1 in float32 is 13421773 / 2**27, not 1/10
    with pytest.raises(NotTracked):
        alg.rounded(scaled, "floor")          # L * 0.1f lands within rounding of integers


def test_integer_arithmetic_is_python_arithmetic_and_stays_in_its_dtype():
    alg = algebra(2, 1000)
    assert alg.int_op("floordiv", IntValue(-L), IntValue(sympy.Integer(4)), *INT64).expr.subs(L, 5) == -2
    assert alg.int_op("remainder", IntValue(-L), IntValue(sympy.Integer(4)), *INT64).expr.subs(L, 5) == 3
    with pytest.raises(NotTracked, match="0"):
        alg.int_op("floordiv", IntValue(L), IntValue(L - 5), *INT64)
    with pytest.raises(NotTracked, match="overflow"):
        alg.int_op("mul", IntValue(L), IntValue(sympy.Integer(2 ** 30)), -2 ** 31, 2 ** 31 - 1)


def test_where_on_the_sizes_themselves_is_a_min_or_max_and_otherwise_needs_the_ranges():
    alg = algebra(2, 1000)
    a, b = IntValue(L), IntValue(2 * L - 40)
    undecided = lambda cond: None  # noqa: E731
    assert alg.choose(BoolValue(sympy.Lt(L, 2 * L - 40)), a, b, undecided).expr == Min(L, 2 * L - 40)
    assert alg.choose(BoolValue(sympy.Lt(L, 2 * L - 40)), b, a, undecided).expr == Max(L, 2 * L - 40)
    with pytest.raises(NotTracked):
        alg.choose(BoolValue(sympy.Lt(L, 7)), a, b, undecided)
    assert alg.choose(BoolValue(sympy.Lt(L, 7)), a, b, lambda cond: False) == b
