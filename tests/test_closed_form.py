"""``affine_floor``: the one division a nested quasi-affine term of one symbol equals (a candidate the
tracer proves before use, ``tracer/sizes/closed_forms``)."""
from hypothesis import given, settings, strategies as st

from shapeproof.solver import FloorDiv, Max, Mod, affine_floor, evaluate_term, nested_divisions, symbol

x, y = symbol("x"), symbol("y")


def _value(fitted, at):
    a, b, c = fitted
    return (a * at + b) // c


def test_a_chain_of_same_padded_strides_is_one_ceil_division():
    size = x
    for stage in range(1, 9):
        size = FloorDiv(size + Mod(size, 2), 2)          # what torch computes for TF "SAME" padding
        fitted = affine_floor(size, 1)
        assert fitted == (1, 2 ** stage - 1, 2 ** stage)
        size = FloorDiv(x + 2 ** stage - 1, 2 ** stage)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(-3, 3), st.booleans()), min_size=1, max_size=4),
       st.integers(0, 20))
def test_a_fitted_form_equals_a_quasi_affine_term_everywhere(layers, lower):
    """Layers ``(E + k) // s`` or ``(E + E % s) // s`` (a strided layer, or one after "SAME" padding)
    nest into one division: the form fitted at two periods from ``lower`` holds far beyond them."""
    size = x
    for stride, shift, same in layers:
        size = FloorDiv(size + (Mod(size, stride) if same else shift), stride)
    fitted = affine_floor(size, lower)
    assert fitted is not None
    for at in range(lower, lower + 300):
        assert _value(fitted, at) == evaluate_term(size, {"x": at}), (size, fitted, at)


def test_no_form_for_two_symbols_a_symbolic_divisor_or_a_term_not_quasi_affine():
    assert affine_floor(FloorDiv(x + y, 2) + Mod(x, 2), 0) is None
    assert affine_floor(FloorDiv(x, y) + Mod(x, 2), 0) is None
    assert affine_floor(FloorDiv(x * x, 2) + FloorDiv(x, 3), 0) is None
    assert not nested_divisions(FloorDiv(x + 1, 2)) and nested_divisions(FloorDiv(x + Mod(x, 2), 2))


def test_a_max_whose_arguments_grow_apart_has_no_form():
    """``max(x - 5, 0) + x // 2`` is ``x // 2`` up to 5 only: no one division equals it everywhere."""
    assert affine_floor(Max(x - 5, 0) + FloorDiv(x, 2), 0) is None
    assert affine_floor(Max(Mod(x, 2), 0) + FloorDiv(x, 2), 0) == (1, 1, 2)     # ceil(x / 2)
