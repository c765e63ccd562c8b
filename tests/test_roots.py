"""Square roots in guards: ``n ** 0.5``, ``math.sqrt``, torch's ``FloatPow`` and ``OpaqueUnaryFn_sqrt``, as
Python computes them, and their rounding to ``isqrt`` where doubles make it exact (``exact_floats``).

Every claim is checked against Python itself: the float nodes by evaluating what Python evaluates, the
rewrite by comparing the rewritten question with the original one point by point, at the magnitudes
where it holds and where it stops holding (past 2**50).
"""
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from shapeproof.solver import STRATEGIES, Max, Status, prove, symbol
from shapeproof.solver import floats as FL
from shapeproof.solver.language.evaluate import Undefined, evaluate_term, truth
from shapeproof.solver.language.nodes import ISqrt
from shapeproof.solver.language.parse import parse_condition, parse_term
from shapeproof.solver.problems.problem import Problem
from shapeproof.tracer import TorchStrategy

from brute import brute_force

_STRATEGIES = {"torch": TorchStrategy()}          # torch's own reasoning is held to the same standard
_STRATEGY_NAMES = sorted([*STRATEGIES, *_STRATEGIES])

n, g, h, w = (symbol(s) for s in "nghw")

# where the rewrite holds (2**50) and past it: squares, their neighbours, the first n whose double root
# rounds up to the next integer (2**52 + 2**27), and ints that are no doubles (2**53 + 1)
EDGES = sorted({v for r in (0, 1, 2, 3, 2 ** 12, 2 ** 24, 2 ** 25, 2 ** 26, 2 ** 26 + 1, 94906265, 94906266)
                for v in (r * r - 1, r * r, r * r + 1) if v >= 0}
               | {2 ** 50 - 1, 2 ** 50, 2 ** 50 + 1, 2 ** 52, 2 ** 52 + 2 ** 27, 2 ** 53 - 1, 2 ** 53,
                  2 ** 53 + 1})

ROOTS = {   # guard text -> what Python computes for it
    "math.floor(math.sqrt(n))": lambda v: math.floor(math.sqrt(v)),
    "math.floor(n ** 0.5)": lambda v: math.floor(v ** 0.5),
    "int(n ** 0.5)": lambda v: int(v ** 0.5),
    "math.trunc(math.sqrt(n))": lambda v: math.trunc(math.sqrt(v)),
    "math.ceil(math.sqrt(n))": lambda v: math.ceil(math.sqrt(v)),
    "math.ceil(float(n) ** 0.5)": lambda v: math.ceil(float(v) ** 0.5),
}


@pytest.mark.parametrize("text", ROOTS)
def test_the_float_nodes_evaluate_as_python_does(text):
    term = parse_term(text)
    for v in EDGES:
        assert evaluate_term(term, {"n": v}) == ROOTS[text](v), (text, v)


def test_float_powers_and_roots_are_undefined_where_python_raises_or_is_complex():
    for text, point in (("math.floor(math.sqrt(n)) == 1", {"n": -1}),
                        ("math.floor(n ** 0.5) == 1", {"n": -4}),
                        ("math.floor(n ** -1) == 0", {"n": 0}), ("math.floor(10.0 ** n) == 0", {"n": 400}),
                        ("math.floor(math.pow(n, 1.5)) == 0", {"n": -2})):
        assert truth(parse_condition(text), {symbol(k): v for k, v in point.items()}) is None, text
    # a negative base with an integral exponent is real, as in Python
    assert evaluate_term(parse_term("math.floor((-n) ** 3.0)"), {"n": 2}) == -8
    assert evaluate_term(parse_term("math.floor(n ** -1 * 10)"), {"n": 4}) == 2


@given(st.one_of(st.integers(0, 2 ** 50), st.integers(0, 2 ** 25).map(lambda r: r * r),
                 st.integers(1, 2 ** 25).map(lambda r: r * r - 1)))
def test_rounded_roots_are_isqrt_up_to_2_to_the_50(v):
    """The claim the rewrite rests on (``exact_floats``), against Python's own doubles."""
    r = math.isqrt(v)
    assert math.floor(math.sqrt(v)) == math.floor(v ** 0.5) == int(v ** 0.5) == r
    assert math.ceil(math.sqrt(v)) == math.ceil(v ** 0.5) == r + (r * r != v)


def test_past_2_to_the_52_the_double_root_is_no_isqrt():
    v = 2 ** 52 + 2 ** 27                      # (2**26 + 1)**2 - 1: its double root rounds up
    assert math.floor(math.sqrt(v)) == math.isqrt(v) + 1


def _rewritten(text: str, box: dict):
    return Problem.build(text, box)


@pytest.mark.parametrize("text", [f"{t} == g" for t in ROOTS] + [f"({t})**2 == n" for t in ROOTS])
@pytest.mark.parametrize("box", [{"n": (0, 300), "g": (0, 20)},
                                 {"n": (2 ** 50 - 40, 2 ** 50), "g": (2 ** 25 - 2, 2 ** 25 + 1)}])
def test_the_rewrite_to_isqrt_agrees_with_python_at_every_point(text, box):
    problem = _rewritten(text, box)
    assert not problem.has_floats, problem.describe()          # rewritten: every strategy reads it
    original = parse_condition(text)
    lo_n, hi_n = box["n"]
    lo_g, hi_g = box.get("g", (0, 0))
    for v in range(lo_n, hi_n + 1):
        for k in range(lo_g, hi_g + 1):
            env = {n: v, g: k}
            assert truth(problem.goal, env) == truth(original, env), (text, v, k)


def test_no_rewrite_past_2_to_the_50_and_enumeration_refutes_there():
    box = {"n": (2 ** 52 + 2 ** 27 - 3, 2 ** 52 + 2 ** 27 + 3)}
    problem = _rewritten("math.floor(math.sqrt(n))**2 <= n", box)
    assert problem.has_floats
    v = prove("math.floor(math.sqrt(n))**2 <= n", box)
    assert v.status is Status.REFUTED and v.counterexample == {"n": 2 ** 52 + 2 ** 27}


PROVEN = ("math.floor(math.sqrt(g*g)) == g", "int(float(g*g) ** 0.5) == g",
          "math.floor((4*g*g) ** 0.5) == 2*g",
          "math.ceil(math.sqrt(n))**2 >= n", "math.floor(n ** 0.5)**2 <= n")


@pytest.mark.parametrize("strategy", ["cascade", "enumerate", "z3"])
@pytest.mark.parametrize("text", PROVEN)
def test_roots_of_squares_are_proven(text, strategy):
    box = {"g": (0, 2000), "n": (0, 2000)}
    v = prove(text, {k: r for k, r in box.items() if k in text}, strategy=strategy, timeout=20)
    assert v.status is Status.PROVEN, (strategy, v.reason)
    assert brute_force(Problem.build(text, {k: r for k, r in box.items() if k in text}))[0]


@pytest.mark.parametrize("strategy", ["cascade", "enumerate", "z3"])
def test_a_product_of_two_dims_is_no_square_and_the_counterexample_says_so(strategy):
    text = "math.floor(math.sqrt(h*w))**2 == h*w"
    v = prove(text, {"h": (2, 32), "w": (2, 32)}, strategy=strategy, timeout=20)
    assert v.status is Status.REFUTED, (strategy, v.reason)
    p = v.counterexample
    assert math.floor(math.sqrt(p["h"] * p["w"])) ** 2 != p["h"] * p["w"]


def test_a_large_square_box_is_proven_without_enumerating():
    """2**50 is far past enumeration: the rewrite folds isqrt(g**2) to max(g, -g)."""
    v = prove("math.floor(math.sqrt(g*g)) == g", {"g": (1, 2 ** 25)})
    assert v.status is Status.PROVEN, v.reason
    assert ISqrt(g ** 2) == Max(g, -g)                  # exact for every int g


def test_isqrt_is_undefined_for_a_negative_int_in_every_reading():
    f = parse_condition("math.isqrt(n - 5) >= 0")
    assert truth(f, {n: 4}) is None and truth(f, {n: 5}) is True
    v = prove(f, {"n": (0, 10)})
    assert v.status is Status.REFUTED and v.counterexample == {"n": 0}
    assert prove(f, {"n": (5, 10 ** 12)}).status is Status.PROVEN
    with pytest.raises(Undefined):
        evaluate_term(parse_term("math.isqrt(n)"), {"n": -1})


def test_sqrt_keeps_pythons_double_rounding_beside_pow():
    """``x ** 0.5`` is the C library's pow, not always ``math.sqrt``: the nodes stay apart."""
    sqrt, power = parse_term("math.floor(1e9 * math.sqrt(n))"), parse_term("math.floor(1e9 * n ** 0.5)")
    assert FL.has_floats([sqrt]) and sqrt != power
    for v in (2, 3, 10 ** 15 + 7, 2 ** 53 - 1):
        assert evaluate_term(sqrt, {"n": v}) == math.floor(1e9 * math.sqrt(v))
        assert evaluate_term(power, {"n": v}) == math.floor(1e9 * v ** 0.5)


# -- every strategy against brute force, on random guards over roots ----------------------------------
_INNER = ["x", "y", "x*y", "x*x", "x*x + y", "4*x*x", "x - 3", "x*y - 2", "(x + y) // 2"]
_ROOTS = ["math.floor(math.sqrt({t}))", "int({t} ** 0.5)", "math.ceil(math.sqrt({t}))", "math.isqrt({t})",
          "math.trunc(float({t}) ** 0.5)", "math.floor({t} ** 1.5)", "math.floor(math.pow({t}, 0.5) * 3)",
          "math.ceil({t} ** -0.5 * 10)"]
_GUARDS = ["{r} == {s}", "{r} != {s}", "{r} <= {s}", "{r}**2 == {t}", "{r}*{r} <= {t}", "{r} > {c}",
           "math.sqrt({t}) < {c}.5", "{t} ** 0.5 >= {c}"]

root_guards = st.builds(
    lambda inner, root, guard, s, c: guard.format(r=root.format(t=inner), t=inner, s=s, c=c),
    st.sampled_from(_INNER), st.sampled_from(_ROOTS), st.sampled_from(_GUARDS),
    st.sampled_from(["x", "y", "x + 1", "2*y", "3"]), st.integers(0, 9))
# small boxes (negative values included: undefined roots), and a few just past the squares up to 2**25
small_boxes = st.tuples(st.integers(-4, 30), st.integers(0, 12), st.integers(-2, 20), st.integers(0, 12)).map(
    lambda t: {"x": (t[0], t[0] + t[1]), "y": (t[2], t[2] + t[3])})
edge_boxes = st.sampled_from([2 ** 24, 2 ** 25 - 1, 2 ** 25, 2 ** 26]).map(
    lambda r: {"x": (r - 2, r + 2), "y": (0, 3)})


@settings(max_examples=int(os.environ.get("SHAPEPROOF_EXAMPLES", 150)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(root_guards, st.one_of(small_boxes, small_boxes, edge_boxes), st.sampled_from(_STRATEGY_NAMES))
def test_root_guards_get_the_verdicts_brute_force_gives(text, box, strategy):
    problem = Problem.build(text, box)
    v = prove(text, box, strategy=_STRATEGIES.get(strategy, strategy), timeout=5.0)
    holds, _ = brute_force(problem)
    if v.status is Status.PROVEN:
        assert holds, (strategy, text, box)
    elif v.status is Status.REFUTED:
        assert not holds, (strategy, text, box)
        point = {symbol(k): val for k, val in v.counterexample.items()}
        assert truth(problem.goal, point) is not True, (strategy, text, box, v.counterexample)
    if strategy in ("enumerate", "cascade") and all(hi < 100 for _, hi in box.values()):
        assert v.status is not Status.UNKNOWN, (strategy, text, box, v.reason)     # small boxes: complete


# found by bench.fuzz_soundness (seed 40): a constant rounded to 0 cancelled a root Python raises on first
CANCELLED = [
    ("math.ceil(0 / 3) * int(math.sqrt(-x)) == 0", {"x": (1, 3)}),
    ("(int((-1) ** 0.5) * math.ceil(0 / 3)) != ((5 - x) * (-1))", {"x": (2, 7)}),
    ("((1 + y) // math.floor(3 ** 0.3)) - (int((-1) ** 0.5) * math.ceil((-3) / 16)) >= 1", {"y": (6, 8)}),
    ("Not(5 < ((1 // x) % (y // x))) | (math.floor(2.0 ** (-2)) * math.ceil(math.sqrt(x * (-3))) <= 3)",
     {"x": (4, 7), "y": (0, 0)}),
]


@pytest.mark.parametrize("text, box", CANCELLED)
@pytest.mark.parametrize("strategy", _STRATEGY_NAMES)
def test_a_root_cancelled_by_a_zero_still_raises_where_python_does(text, box, strategy):
    v = prove(text, box, strategy=_STRATEGIES.get(strategy, strategy), timeout=5.0)
    assert v.status is not Status.PROVEN, (strategy, v)
    assert not brute_force(Problem.build(text, box))[0]
