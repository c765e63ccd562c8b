"""Exact cancellation in torch's FloorDiv (tracer/exact_cancel.py): same values as sympy.simplify, cheaper."""
import random
import threading

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shapeproof.tracer.exact_cancel import exact_cancellation, exact_quotient
from shapeproof.tracer.patching import engine_thread
from shapeproof.tracer.torch_internals import FloorDiv, sympy_functions

X, Y, Z = sympy.symbols("x y z", integer=True, positive=True)
ATOMS = [X, Y, Z, FloorDiv(Y, 3), FloorDiv(X + 1, 4)]


@st.composite
def products(draw):
    coefficient = draw(st.integers(-6, 6).filter(bool))
    factors = draw(st.lists(st.sampled_from(ATOMS), max_size=3))
    return sympy.Mul(coefficient, *factors)


def value(expr, point):
    return expr.xreplace(point)


@settings(max_examples=200, deadline=None)
@given(st.lists(products(), min_size=1, max_size=4), products(), st.integers(0, 10 ** 6))
def test_exact_quotient_is_the_quotient(terms, common, seed):
    base = sympy.Add(*(t * common for t in terms))
    if base == 0:
        return
    quotient = exact_quotient(base / common)
    rng = random.Random(seed)
    for _ in range(5):
        point = {s: rng.randint(1, 50) for s in (X, Y, Z)}
        assert value(quotient, point) * value(common, point) == value(base, point)


def test_quotient_with_a_denominator_falls_back_to_simplify():
    assert exact_quotient((X + 1) / X) == sympy.simplify((X + 1) / X)


def test_floordiv_under_cancellation_keeps_its_value():
    base, divisor = 16 * X * Y + 32 * X * FloorDiv(Y, 3), 16 * X * Z
    with engine_thread(), exact_cancellation():
        cancelled = FloorDiv(base, divisor)
    assert cancelled == FloorDiv(Y + 2 * FloorDiv(Y, 3), Z)
    for x, y, z in [(1, 1, 1), (3, 7, 2), (5, 40, 9)]:
        point = {X: x, Y: y, Z: z}
        assert int(cancelled.xreplace(point)) == int(base.xreplace(point)) // int(divisor.xreplace(point))


def test_cancellation_is_reentrant_and_restores_sympy():
    with exact_cancellation():
        with exact_cancellation():
            assert sympy_functions.sympy is not sympy
        assert sympy_functions.sympy is not sympy
    assert sympy_functions.sympy is sympy


def test_another_thread_meanwhile_simplifies_with_sympy():
    """Only the thread running an engine trace cancels exactly; any other gets sympy's simplify."""
    seen = []
    with exact_cancellation():
        thread = threading.Thread(target=lambda: seen.append(sympy_functions.sympy.simplify((X + 1) / X)))
        thread.start()
        thread.join()
        with engine_thread():
            assert sympy_functions.sympy.simplify((X + 1) / X) == sympy.simplify((X + 1) / X)
            assert sympy_functions.sympy.simplify(2 * X * Y / X) == 2 * Y
    assert seen == [sympy.simplify((X + 1) / X)]
