"""Integer nodes follow Python's operators exactly, for every sign; division by zero is undefined."""
import itertools

import pytest
from hypothesis import given, strategies as st

from shapeproof.solver import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv, Undefined, evaluate_term, symbol
from shapeproof.solver.language.terms import divisors, term_str
from shapeproof.solver.language.parse import parse_term

x, y = symbol("x"), symbol("y")
VALUES = range(-9, 10)

REFERENCE = [
    (FloorDiv, lambda a, b: a // b),
    (Mod, lambda a, b: a % b),
    (CeilDiv, lambda a, b: -((-a) // b)),
    (TruncDiv, lambda a, b: int(a / b)),
]


@pytest.mark.parametrize("node,python", REFERENCE, ids=[n.__name__ for n, _ in REFERENCE])
def test_division_nodes_match_python_for_every_sign(node, python):
    for a, b in itertools.product(VALUES, VALUES):
        if b == 0:
            with pytest.raises(Undefined):
                evaluate_term(node(x, y), {"x": a, "y": b})
            continue
        assert evaluate_term(node(x, y), {"x": a, "y": b}) == python(a, b), (a, b)
        assert node(a, b) == python(a, b)  # constant folding agrees too


def test_folding_never_hides_a_zero_divisor():
    assert isinstance(FloorDiv(x, x), FloorDiv)  # x // x is not 1 at x == 0
    assert isinstance(Mod(0, y), Mod)
    # (2*(x // y)) % 2 and (x // y) % 1 raise at y == 0 like x // y: they are not 0 there
    assert isinstance(Mod(2 * FloorDiv(x, y), 2), Mod) and isinstance(Mod(FloorDiv(x, y), 1), Mod)
    assert divisors([Mod(2 * FloorDiv(x, y), 2)]) == {y}
    shared = x
    for _ in range(40):                 # a DAG of 40 levels: a tree of 2**40 nodes, walked once per subterm
        shared = FloorDiv(shared, y) + Max(shared, 1)
    assert isinstance(Mod(2 * shared, 2), Mod)
    assert isinstance(FloorDiv(5, 0), FloorDiv)
    assert divisors([FloorDiv(x, y) + Mod(x, 3)]) == {y}


def test_min_max_canonical_form():
    assert Max(x, 3, Max(y, 5), x) == Max(5, x, y)
    assert Min(2, 7) == 2
    assert evaluate_term(Min(x, y, 0), {"x": 3, "y": -2}) == -2


@given(st.integers(-10**30, 10**30), st.integers(-10**30, 10**30).filter(bool))
def test_big_integers_are_exact(a, b):
    sign = 1 if (a >= 0) == (b > 0) else -1
    assert evaluate_term(TruncDiv(x, y), {"x": a, "y": b}) == (abs(a) // abs(b)) * sign
    assert evaluate_term(Mod(x, y), {"x": a, "y": b}) == a % b


@pytest.mark.parametrize("term",
                         [FloorDiv(x + 1, 2 * y), Mod(-x, 4) * 3, CeilDiv(x, y) - Max(x, -y), TruncDiv(x, 3)])
def test_printed_terms_parse_back(term):
    assert parse_term(term_str(term)) == term


@pytest.mark.parametrize("node,python", REFERENCE, ids=[n.__name__ for n, _ in REFERENCE])
def test_a_divisor_of_every_coefficient_divides_exactly(node, python):
    """Once ``x = 2*k`` is learned, ``(2*k) // 2`` is plain ``k``; folded only where no rounding can occur."""
    k, j = symbol("k"), symbol("j")
    for numerator, divisor in ((2 * k, 2), (4 * k - 6 * j + 2, -2), (6 * k * j, 3)):
        folded = node(numerator, divisor)
        assert not isinstance(folded, node), (numerator, divisor)
        for a, b in itertools.product(VALUES, VALUES):
            at = {"k": a, "j": b}
            assert evaluate_term(folded, at) == python(evaluate_term(numerator, at), divisor), (numerator, at)
    for numerator, divisor in ((2 * k + 1, 2), (2 * k, 4), (k * j, 2)):
        assert isinstance(node(numerator, divisor), node), (numerator, divisor)


@pytest.mark.parametrize("text", [
    "(H + 1)*(W - 1) - H*W",
    "((4 - ((1 + (H - H % 4) // 4) % 4)) % 4)*(2*(W + 3) - W)",
    "max(1, (B*((H + 2)*(H - 2)) // 7))*(H + W)**2 - min(H, W // 3)*(H - W)",
    "math.floor((H + 1)*(W - 1) / 2.5) + (2*(H + 1) - H) // (W*(W + 1) - W**2)",
    "((2*(x // y)) % 2)*(x + y)**3",
])
def test_expanded_is_sympys_deep_expansion_and_remembers_subterms(text):
    """The interval and rewrite stages expand each question's relations; ``expanded`` gives exactly
    ``sympy.expand`` (through every ``//``, ``%``, min/max and float node) while expanding each distinct
    subterm once across calls."""
    import sympy

    from shapeproof.solver.language.terms import _expanded, expanded

    term = parse_term(text)
    assert expanded(term) == sympy.expand(term)
    inner = [a for a in sympy.preorder_traversal(term) if not a.is_Atom and a is not term]
    assert all(a in _expanded for a in inner)
    assert expanded(term) is expanded(term)


@pytest.mark.parametrize("text", [
    "((4 - ((1 + (H - H % 4) // 4) % 4)) % 4)*(2*(W + 3) - W)",
    "max(1, (B*((H + 2)*(H - 2)) // 7))*(H + W)**2 - min(H, W // 3)*(H - W)",
    "math.floor((H + 1)*(W - 1) / 2.5) + (2*(H + 1) - H) // (W*(W + 1) - W**2)",
    "7",
])
def test_symbols_in_is_free_symbols_and_remembers_subterms(text):
    """Relations read their symbols through ``symbols_in``: sympy's own set, every distinct subterm's
    kept across calls (the remembered one is what a later relation over the same subterm gets)."""
    import sympy

    from shapeproof.solver.language.terms import _symbols, symbols_in

    term = parse_term(text)
    assert symbols_in(term) == term.free_symbols
    inner = [a for a in sympy.preorder_traversal(term) if not a.is_Atom]
    assert all(_symbols[a] == a.free_symbols for a in inner)
    lam = sympy.Lambda(symbol("H"), symbol("H") + symbol("W"))       # a class with its own rule
    assert symbols_in(lam) == {symbol("W")}
