"""Enclosures of float terms (``Bounds.floats``) and the intervals of the integer nodes over them: every value
Python computes at a point of the box where the term does not raise lies inside, and a term called defined
nowhere raises at every point.  Issue 40, item 2: facts on floats that hold nowhere (``math.sqrt(-4)``,
``z ** 0.5 == 2.5``) settle questions over unbounded ranges."""
import math
import warnings

import pytest
from hypothesis import assume, example, given, settings, strategies as st

from shapeproof.solver import (
    Bounds, ParseError, Status, Undefined, evaluate_term, parse_condition, parse_term, prove, relations,
    symbol,
)
from shapeproof.solver.problems.bounds import FloatRange
from shapeproof.solver.strategies.pieces import PiecesStrategy

_OVERFLOW = 2 ** 1024 - 2 ** 970

_LEAF = st.sampled_from(["x", "y", "3", "-4", "0", "x * y", "x // 3", "x - y", "7 - x"])
_FLOAT_CONST = st.sampled_from(["0.1", "0.29", "0.5", "1.5", "2.0", "-2.0", "0.0", "1e300", "2.5", "7.0"])


@st.composite
def _float(draw, depth=2):
    """Float term text over ints ``x`` and ``y``."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["float({a})", "{a} / {b}", "{c}"])).format(
            a=draw(_LEAF), b=draw(_LEAF), c=draw(_FLOAT_CONST))
    a, b = draw(_float(depth=depth - 1)), draw(_float(depth=depth - 1))
    step = draw(st.sampled_from(["({a} + {b})", "({a} - {b})", "({a} * {b})", "({a} / {b})", "({a} // {b})",
                                 "({a} % {b})", "(-{a})", "math.sqrt({a})", "({a}) ** {c}", "{c} ** ({a})",
                                 "math.pow({a}, 0.5)", "({i}) ** {c}", "2.0 ** ({i})", "({a} * {c})"]))
    return step.format(a=a, b=b, c=draw(_FLOAT_CONST), i=draw(_LEAF))


_ROUNDING = st.sampled_from(["math.floor({f})", "math.ceil({f})", "int({f})", "round({f})",
                             "{f} < {g}", "{f} <= {i}", "{f} == {g}", "{i} < {f}", "{f} != {i}"])
_BOX = st.sampled_from([(None, None), (0, None), (None, -1), (-50, 50), (5, 2 ** 60), (-3, -1), (0, 0),
                        (2 ** 1023, None), (None, -2 ** 1030), (1, 9)])


def _points(lo, hi):
    lo_, hi_ = -2 ** 1110 if lo is None else lo, 2 ** 1110 if hi is None else hi
    edges = [0, 1, -1, 2, 3, -3, 7, 21, -22, 2 ** 53 + 1, _OVERFLOW - 1, _OVERFLOW, 3 * _OVERFLOW, 2 ** 1074,
             2 ** 1100, 10 ** 6, 2 ** 62]
    edges += [-v for v in edges]
    return sorted({min(max(v, lo_), hi_) for v in edges} | {lo_, hi_})


def _term(text: str):
    """The term ``text`` (a comparison: its node, 1 where it is true)."""
    try:
        if any(op in text for op in ("<", "==", "!=")):
            relation = next(iter(relations(parse_condition(text))))
            assume(getattr(relation.lhs, "is_float_comparison", False))
            return relation.lhs
        return parse_term(text)
    except ParseError:          # a constant division by zero, a huge literal power: refused as input
        assume(False)


def _inside(value, enclosure: FloatRange) -> bool:
    if value != value:
        return enclosure.nan
    return enclosure.lo <= value <= enclosure.hi


@settings(max_examples=400, deadline=None)
@given(_float(), _BOX, _BOX)
@example("math.sqrt(-4.0)", (None, None), (None, None))
@example("(y * -4) ** 0.5", (None, None), (6, 12))
@example("x / 3", (None, None), (None, None))
@example("2.0 ** (x)", (2000, None), (0, 0))
def test_every_value_of_a_float_term_lies_in_its_enclosure(text, box_x, box_y):
    term = _term(f"math.floor({text})").args[0]          # the float term inside
    bounds = Bounds({symbol("x"): box_x, symbol("y"): box_y})
    enclosure = bounds.floats(term)
    for vx, vy, value in _values(term, box_x, box_y):
        assert enclosure is not None and _inside(value, enclosure), (text, vx, vy, value, enclosure)


@settings(max_examples=400, deadline=None)
@given(_ROUNDING, _float(), _float(), _LEAF, _BOX, _BOX)
@example("math.floor({f})", "(-6 * x) / (7 * x)", "0.5", "x", (6, None), (0, 0))
@example("math.floor({f})", "math.sqrt(x * x)", "0.5", "x", (None, None), (0, 0))
@example("math.floor({f})", "x / 3", "0.5", "x", (0, 2 ** 60), (0, 0))
def test_a_term_said_to_evaluate_everywhere_does(shape, f, g, i, box_x, box_y):
    """``Bounds.evaluates``: what lets a float goal be proven from value ranges (none of its float nodes
    raises anywhere in the box)."""
    from shapeproof.solver.language.terms import divisors
    term = _term(shape.format(f=f, g=g, i=i))
    if not Bounds({symbol("x"): box_x, symbol("y"): box_y}).evaluates(term):
        return
    for vx in _points(*box_x)[::2]:
        for vy in _points(*box_y)[::3]:
            point = {"x": vx, "y": vy}
            try:            # an integer division by 0 is the relation's divisors' business
                if any(evaluate_term(d, point) == 0 for d in divisors([term])):
                    continue
            except Undefined:
                continue
            evaluate_term(term, point)          # raises Undefined where it does not


@settings(max_examples=400, deadline=None)
@given(_ROUNDING, _float(), _float(), _LEAF, _BOX, _BOX)
@example("{f} < {g}", "math.sqrt(x)", "-4.0", "x", (None, None), (None, None))
@example("{i} < {f}", "x / 3", "-4.0", "x", (None, None), (None, None))
# (-inf) ** 0.1
@example("{f} < {g}", "float(x)", "((float(x) * 1e300)) ** 0.1", "x", (None, -1), (None, None))
def test_every_value_of_an_integer_node_over_floats_lies_in_its_interval(shape, f, g, i, box_x, box_y):
    term = _term(shape.format(f=f, g=g, i=i))
    interval = Bounds({symbol("x"): box_x, symbol("y"): box_y})(term)
    for vx, vy, value in _values(term, box_x, box_y):
        assert interval is not None and interval.contains(value), (str(term), vx, vy, value, interval)


def _values(term, box_x, box_y):
    """``(x, y, value)`` at a spread of points of the box where Python evaluates ``term``."""
    for vx in _points(*box_x)[::2]:
        for vy in _points(*box_y)[::3]:
            try:
                yield vx, vy, evaluate_term(term, {"x": vx, "y": vy})
            except Undefined:
                continue


def _quiet(goal, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return prove(goal, **{"timeout": 0.5, **kw})


@pytest.mark.parametrize("goal,ranges,fact", [
    # bench.fuzz_soundness, seed 7: a fact that raises everywhere (math.sqrt of a negative constant)
    ("max(1, (-5)) < y", {"x": (None, None), "y": (-5, None), "z": (2, 8)},
     "math.ceil(x / 16) > math.floor(math.sqrt((-4)))"),
    ("math.floor(x / 3) == (y * y)", {"x": (-5, -3), "y": (None, 6)},
     "math.trunc(math.pow((-5), 0.5) * 4) != CeilDiv(0, 5)"),
    # a complex power everywhere in range: y * (-6) < 0
    ("x != y", {"x": (None, None), "y": (6, None)}, "math.sqrt((y * (-6))) < int((-1) / x)"),
    ("x > (y * z)", {"x": (5, 11), "y": (-3, 1), "z": (5, None)}, "math.sqrt(z * z) < -1"),
    ("x == y", {"x": (None, None), "y": (None, None)}, "(x / 7 % 1) > 1"),
    # bench.fuzz_soundness, seed 0: float floor division of operands of one sign is not negative
    ("min(x, x) <= TruncDiv(3, x)", {"x": (None, 5)}, "(x / 3 // 1) > 5"),
    ("(x * x) == x", {"x": (0, None)}, "((x + x) / 3 // 1) <= (5 + (-6))"),
])
def test_a_fact_on_floats_that_holds_nowhere_proves_any_goal(goal, ranges, fact):
    assert _quiet(goal, ranges=ranges).refuted              # the goal alone fails somewhere
    assert _quiet(goal, ranges=ranges, facts=[fact]).proven


def test_enclosures_of_the_usual_nodes():
    x = symbol("x")
    bounds = Bounds({x: (None, None)})
    def inner(text):
        return parse_term(f"math.floor({text})").args[0]
    assert bounds.floats(inner("math.sqrt(-4.0)")) is None
    assert bounds.floats(inner("x / 7 % 1")) == FloatRange(0.0, 1.0)
    largest = math.sqrt(float(_OVERFLOW - 1))
    assert Bounds({x: (0, None)}).floats(inner("math.sqrt(x)")) == FloatRange(0.0, largest)
    def comparison(text):
        return next(iter(relations(parse_condition(text)))).lhs
    assert bounds(comparison("x / 3 < 2.5")) == (0, 1)
    assert bounds(comparison("math.sqrt(x * x) < -0.5")) == (0, 0)
    assert Bounds({x: (3000, None)})(parse_term("math.floor(2.0 ** x)")) is None     # overflows everywhere


@pytest.mark.parametrize("goal,ranges", [
    # bench.fuzz_soundness, seed 0: float goals whose float nodes raise nowhere in range
    ("x != math.floor((x * (-6)) / (7 * x))", {"x": (6, None)}),        # the quotient is -6/7 for every x
    ("min((-4), 0) < math.floor((-1) / (x * 1))", {"x": (1, None)}),
])
def test_a_float_goal_holds_where_value_ranges_show_it_true_and_defined(goal, ranges):
    assert _quiet(goal, ranges=ranges).proven


@pytest.mark.parametrize("goal,ranges,facts", [
    # bench.fuzz_soundness, seed 0: x // x is 1 where it is defined, inside a float node too
    ("~(math.ceil((x // x) / 16) < math.floor(math.ceil(7 / 16) ** 0.75))", {"x": (2, None)}, []),
    ("(7 * 6) < max(x, (-4))", {"x": (-5, None)}, ["float((x % x)) * 0.5 >= int(x / x)"]),
])
def test_integer_terms_inside_float_nodes_are_normalized(goal, ranges, facts):
    assert _quiet(goal, ranges=ranges, facts=facts).proven


@pytest.mark.parametrize("strategy", ["rewrite", "cascade", "z3"])
def test_a_rule_that_cancels_a_float_node_keeps_where_it_raises(strategy):
    """``w % 1`` is 0, but ``math.floor(math.sqrt(y))`` raises for y < 0: the normal form keeps that."""
    for goal in ("math.floor(math.sqrt(y)) % 1 == 0", "(math.floor(math.sqrt(y)) * 2) // 2 == x - x",
                 "math.floor(x / y) % 1 == 0"):
        v = _quiet(goal, ranges={"x": (-5, None), "y": (-3, 3)}, strategy=strategy)
        assert not v.proven, v
        assert v.status is Status.UNKNOWN or v.counterexample["y"] <= 0, v


def test_a_garbage_collection_does_not_count_against_a_deadline():
    """A full collection took 225 ms in a 20,000-question fuzz run: with a 0.1 s budget that question ran
    out before any strategy started (the fuzz's "out of time" verdicts on easy guards)."""
    import gc
    import time
    from shapeproof.solver.problems.deadline import PAUSES, PAUSE_CREDIT, Deadline
    assert PAUSES in gc.callbacks
    deadline = Deadline(0.05)
    PAUSES("start", {"generation": 2})            # as the collector calls it
    time.sleep(0.12)
    PAUSES("stop", {"generation": 2})
    assert not deadline.expired() and 0.02 < deadline.remaining() <= 0.05
    long_pause = Deadline(0.05)
    PAUSES("start", {"generation": 2})
    PAUSES.total += 10.0                          # a pause of 10 s: credited up to the budget and 0.5 s
    PAUSES("stop", {"generation": 2})
    assert 0.05 + PAUSE_CREDIT < long_pause.remaining() <= 2 * 0.05 + PAUSE_CREDIT


# -- linear relaxations of affine float chains (solver/strategies/relax.py), for z3 --------------------------

_AFFINE_CONST = st.sampled_from(["0.1", "0.29", "0.3", "1.5", "3", "-2.0", "0.75", "7", "1e10", "3e-15"])


@st.composite
def _affine_chain(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(["float({t})", "{t} / {c}"])).format(
            t=draw(st.sampled_from(["x", "y", "x * y", "x // 7", "3 * x - y", "5"])),
            c=draw(st.sampled_from(["3", "-7", "16", "1", "1000003"])))
    a, b = draw(_affine_chain(depth=depth - 1)), draw(_affine_chain(depth=depth - 1))
    return draw(st.sampled_from(["({a} + {b})", "({a} - {b})", "({a} * {c})", "({c} * {a})", "({a} / {c})",
                                 "(-{a})"])).format(a=a, b=b, c=draw(_AFFINE_CONST))


_VALUES = st.one_of(st.integers(-50, 50), st.integers(-2 ** 70, 2 ** 70),
                    st.sampled_from([2 ** 53 + 1, -(2 ** 53) - 3, 10 ** 17 + 7, 2 ** 62 - 1, 3 * 2 ** 900]))


@settings(max_examples=500, deadline=None)
@given(_affine_chain(), _VALUES, _VALUES)
@example("((float(x) * 0.1) * 3)", 7, 0)
@example("(x / 3 - float(x) * 0.3)", 2 ** 53 + 1, 0)
def test_an_affine_float_chain_is_within_its_relaxation_of_the_exact_value(text, vx, vy):
    from fractions import Fraction
    from shapeproof.solver.strategies.relax import affine
    term = _term(f"math.floor({text})").args[0]
    relaxed = affine(term)
    assume(relaxed is not None)
    try:
        value = evaluate_term(term, {"x": vx, "y": vy})
    except Undefined:
        return
    assume(math.isfinite(value))
    def at(t):
        return 1 if t is None else evaluate_term(t, {"x": vx, "y": vy})
    exact = sum(c * at(t) for t, c in relaxed.coeffs.items())
    size = sum(m * abs(at(t)) for t, m in relaxed.size.items())
    assert abs(Fraction(value) - exact) <= relaxed.rho * size, (text, vx, vy, value, float(exact))


@pytest.mark.parametrize("goal,ranges,fact", [
    # bench.fuzz_soundness, seeds 0 and 7: facts on floats that hold nowhere, by a relation z3 sees only
    # through the relaxation (|floor(y / 1.5) - y / 1.5| < 1 + 2**-50 * |y|)
    ("(y // 6) != 3", {"x": (None, -6), "y": (3, None)}, "math.floor(y / 1.5) == (y + 3)"),
    ("((-2) // x) <= TruncDiv(x, 6)", {"x": (0, None)}, "math.ceil(x / 3) > x"),
    ("x < 3", {"x": (None, None)}, "math.floor(x / 0.1) == (-4)"),
    ("x != ((-1) // y)", {"x": (6, 7), "y": (None, 3)}, "int(y / 5) != (x * y)"),
])
def test_z3_proves_through_the_relaxation_of_float_facts(goal, ranges, fact):
    assert _quiet(goal, ranges=ranges).refuted
    assert _quiet(goal, ranges=ranges, facts=[fact], strategy="z3", timeout=2.0).proven


# -- value ranges over pieces of the box (solver/strategies/pieces.py) ---------------------------------------

_END = st.one_of(st.none(), st.integers(-10 ** 6, 10 ** 6), st.integers(-2 ** 1200, 2 ** 1200))


@settings(max_examples=500, deadline=None)
@given(_END, _END)
def test_a_range_is_cut_into_parts_that_cover_it_once(lo, hi):
    from shapeproof.solver.strategies.pieces import split
    assume(lo is None or hi is None or lo <= hi)
    parts = split(lo, hi)
    if parts is None:
        assert (lo is not None and hi is not None and lo == hi) or (lo is not None and lo >= 2 ** 1100) or (
            hi is not None and hi <= -2 ** 1100)
        return
    assert len(parts) == 2
    (a, b), (c, d) = sorted(parts, key=lambda p: -math.inf if p[0] is None else p[0])
    assert a == lo and d == hi and b is not None and c == b + 1          # adjacent, nothing left out
    assert (a is None or a <= b) and (d is None or c <= d)
    assert parts[0] != (lo, hi) and parts[1] != (lo, hi)


@pytest.mark.parametrize("goal,ranges,fact", [
    # bench.fuzz_soundness, seed 0: facts that hold nowhere, seen piece by piece
    ("x < (y + y)", {"x": (4, None), "y": (3, 8)}, "math.sqrt((x - (-1))) >= x"),
    ("x > (y * z)", {"x": (5, 11), "y": (-3, 1), "z": (5, None)}, "z ** 0.5 == 2.5"),       # no int is 6.25
    ("x != ((-4) * 5)", {"x": (None, None)}, "(x - (-2)) ** 0.5 == 2.5"),
    ("((x - 5) < x) and (TruncDiv(y, x) <= y)", {"x": (3, 9), "y": (None, None)},
     "y < math.floor(math.sqrt(y))"),
])
def test_value_ranges_over_pieces_of_the_box_settle_float_facts(goal, ranges, fact):
    assert _quiet(goal, ranges=ranges).refuted
    v = _quiet(goal, ranges=ranges, facts=[fact], strategy=PiecesStrategy())
    assert v.proven, v


def test_pieces_find_a_counterexample_python_confirms():
    v = _quiet("x != 4", ranges={"x": (None, None)}, facts=["(x + 2) ** 0.5 < 2.5"],
               strategy=PiecesStrategy())
    assert v.refuted and v.counterexample["x"] == 4, v


def test_pieces_of_a_box_with_three_unbounded_ends_are_counted_without_overflow():
    """bench.fuzz_soundness, seed 0: a piece's size (inf times a 1100-bit int) overflowed a float (an
    internal error); the guard fails where z / -7 overflows, past -7 * 2**1024."""
    v = _quiet("not (math.trunc(math.pow(6, 0.5) * (-5)) >= int(z / (-7)))",
               ranges={"x": (None, None), "y": (1, 2), "z": (None, 5)}, facts=["min(x, 1) < min(z, y)"],
               strategy=PiecesStrategy())
    assert v.refuted and v.counterexample["z"] < -7 * 2 ** 1023, v
