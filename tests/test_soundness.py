"""Random guards with // and % (negative operands included) against brute force.

Every PROVEN must hold at every point of the box where the facts hold; every
REFUTED must come with a point where the facts hold and the goal does not.
"""
import os
import warnings

from hypothesis import HealthCheck, given, settings, strategies as st

from shapeproof.tracer import TorchStrategy  # strategy "torch" is held to the same standard
from shapeproof.solver import STRATEGIES, CeilDiv, FloorDiv, Max, Min, Mod, Status, TruncDiv, prove, symbol
from shapeproof.solver.language.formula import conj, disj, neg, rel
from shapeproof.solver.problems.problem import Problem
from shapeproof.solver.language.evaluate import truth

from brute import brute_force

SYMS = [symbol("x"), symbol("y"), symbol("z")]
NODES = [FloorDiv, Mod, CeilDiv, TruncDiv]

leaves = st.one_of(st.sampled_from(SYMS), st.integers(-7, 7))


def _node(children):
    arith = st.tuples(children, children, st.sampled_from(["+", "-", "*"])).map(
        lambda t: t[0] + t[1] if t[2] == "+" else t[0] - t[1] if t[2] == "-" else t[0] * t[1])
    division = st.tuples(st.sampled_from(NODES), children, children).map(lambda t: t[0](t[1], t[2]))
    minmax = st.tuples(st.sampled_from([Min, Max]), children, children).map(lambda t: t[0](t[1], t[2]))
    return st.one_of(arith, division, division, minmax)


terms = st.recursive(leaves, _node, max_leaves=6).map(lambda t: t if not isinstance(t, int)
                                                      else __import__("sympy").Integer(t))
relations = st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), terms,
                      terms).map(lambda t: rel(*t))
formulas = st.recursive(relations, lambda c: st.one_of(
    st.tuples(c, c).map(lambda t: conj(*t)), st.tuples(c, c).map(lambda t: disj(*t)), c.map(neg),
    st.tuples(c, c).map(lambda t: conj(*t, ordered=False)),       # sympy's And and Or
    st.tuples(c, c).map(lambda t: disj(*t, ordered=False))),
    max_leaves=3)
boxes = st.lists(st.tuples(st.integers(-6, 6), st.integers(0, 7)), min_size=3, max_size=3).map(
    lambda spans: {s.name: (lo, lo + width) for s, (lo, width) in zip(SYMS, spans)})


_STRATEGY = {"torch": TorchStrategy()}
NAMES = sorted([*STRATEGIES, *_STRATEGY])


def _check(goal, box, facts, name):
    problem = Problem.build(goal, box, facts)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        v = prove(goal, ranges=box, facts=facts, strategy=_STRATEGY.get(name, name), timeout=5.0)
    truth_everywhere, _ = brute_force(problem)
    if v.status is Status.PROVEN:
        assert truth_everywhere, f"{name} proved a false guard: {problem.describe()}"
    elif v.status is Status.REFUTED:
        assert not truth_everywhere, f"{name} refuted a true guard: {problem.describe()}"
        point = {symbol(k): val for k, val in v.counterexample.items()}
        assert all(truth(f, point) is True for f in problem.facts)
        assert truth(problem.goal, point) is not True
    if name in ("enumerate", "cascade"):
        assert v.status is not Status.UNKNOWN, v   # both are complete on small boxes


SETTINGS = settings(max_examples=int(os.environ.get("SHAPEPROOF_EXAMPLES", 150)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(formulas, boxes, st.sampled_from(NAMES))
def test_random_guards_against_brute_force(goal, box, name):
    _check(goal, box, (), name)


@SETTINGS
@given(formulas, relations, boxes, st.sampled_from(NAMES))
def test_random_guards_with_facts_against_brute_force(goal, fact, box, name):
    _check(goal, box, (fact,), name)


# Near int64: huge constants and boxes far from zero.  Enumeration evaluates in int64, so it must
# either refuse (UNKNOWN) or agree with Python's exact integers; it must not decide from wrapped values.
huge = st.sampled_from([10 ** 6, 10 ** 9, -(10 ** 9), 2 ** 31, 3 * 2 ** 40]).map(__import__("sympy").Integer)
huge_terms = st.recursive(st.one_of(st.sampled_from(SYMS), huge), lambda c: st.one_of(
    st.tuples(c, c).map(lambda t: t[0] * t[1]), _node(c)), max_leaves=6)          # products are what overflow
huge_relations = st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), huge_terms,
                           huge_terms).map(lambda t: rel(*t))
huge_boxes = st.lists(st.tuples(st.sampled_from([-(10 ** 9), 0, 10 ** 9, 2 ** 40]), st.integers(0, 2)),
                      min_size=3, max_size=3).map(
    lambda spans: {s.name: (lo, lo + width) for s, (lo, width) in zip(SYMS, spans)})


@SETTINGS
@given(huge_relations, huge_boxes)
def test_enumeration_near_int64_is_exact_or_refuses(goal, box):
    problem = Problem.build(goal, box, ())
    v = prove(goal, ranges=box, strategy="enumerate", timeout=5.0)
    if v.status is not Status.UNKNOWN:
        assert (v.status is Status.PROVEN) == brute_force(problem)[0], problem.describe()


def test_enumeration_refuses_what_would_wrap():
    """``2**40 * 2**40`` wraps to 0 in int64; deciding from that would prove a false guard."""
    v = prove("x*x == 0", ranges={"x": (2 ** 40, 2 ** 40)}, strategy="enumerate")
    assert v.status is Status.UNKNOWN and "int64" in v.reason


def test_enumeration_bounds_quotients_by_their_values():
    """``x // 10**6`` is at most 10 here, so its cube is small although ``x**3`` would overflow."""
    box = {"x": (10 ** 7 - 1000, 10 ** 7)}
    assert prove("(x // 1000000)**3 <= 1000", ranges=box, strategy="enumerate").status is Status.PROVEN
    refuted = prove("(x // 1000000)**3 < 1000", ranges=box, strategy="enumerate")
    assert refuted.counterexample == {"x": 10 ** 7}
