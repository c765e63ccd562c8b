"""Every rewrite rule (one row of solver.rules.RULES) checked against brute force.

Each row's pattern is instantiated with random terms for its pattern
variables; wherever the rule fires, the result must equal the original term
at every point of the box where the original is defined.  Each rule must also
fire on its own example box, so no row goes untested.
"""
import itertools
import os

import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

from shapeproof.solver import FloorDiv, Max, Min, Mod, Undefined, evaluate_term, parse_term, symbol
from shapeproof.solver.problems.rules import RULES
from shapeproof.solver.problems.tight import TightBounds

VARIABLES = [symbol(n) for n in "abckq"]

# per rule: the box on which its own pattern must make it fire
EXAMPLE_BOX = {
    "floordiv_small_dividend": {"a": (0, 3), "b": (4, 9)},
    "floordiv_one_period": {"a": (14, 20)},
    "floordiv_by_quotient": {"a": (4, 40)},
    "floordiv_nested": {"a": (-20, 20), "b": (1, 5), "c": (1, 4)},
    "truncdiv_by_sign": {"a": (0, 9), "b": (1, 4)},
}
DEFAULT_BOX = {"a": (-6, 6), "b": (1, 5), "c": (1, 4), "k": (-3, 3), "q": (-4, 4)}


def _node_of(term, node_type):
    for sub in sympy.preorder_traversal(term):
        if isinstance(sub, node_type):
            return sub
    return None


def _assert_identity(rule, node, box):
    ranges = {symbol(n): r for n, r in box.items()}
    out = rule.apply(node, TightBounds(ranges))
    if out is None:
        return False
    names = sorted(box)
    for values in itertools.product(*(range(box[n][0], box[n][1] + 1) for n in names)):
        point = dict(zip(names, values))
        try:
            expected = evaluate_term(node, point)
        except Undefined:
            continue
        assert evaluate_term(out, point) == expected, f"{rule.name}: {node} -> {out} at {point}"
    return True


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_fires_on_its_example_and_is_exact(rule):
    box = {**DEFAULT_BOX, **EXAMPLE_BOX.get(rule.name, {})}
    node = _node_of(parse_term(rule.pattern), rule.node)
    assert node is not None, f"pattern of {rule.name} has no {rule.node.__name__} node"
    box = {n: r for n, r in box.items() if symbol(n) in node.free_symbols}
    assert _assert_identity(rule, node, box), f"{rule.name} did not fire on its own pattern {rule.pattern}"


small_terms = st.recursive(
    st.one_of(st.sampled_from([symbol("x"), symbol("y")]), st.integers(-5, 5).map(sympy.Integer)),
    lambda c: st.one_of(st.tuples(c, c).map(lambda t: t[0] + t[1]),
                        st.tuples(c, c).map(lambda t: t[0] * t[1]),
                        st.tuples(c, c).map(lambda t: FloorDiv(*t)), st.tuples(c, c).map(lambda t: Mod(*t)),
                        st.tuples(c, c).map(lambda t: Max(*t)), st.tuples(c, c).map(lambda t: Min(*t))),
    max_leaves=4)


@settings(max_examples=int(os.environ.get("SHAPEPROOF_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(RULES), st.lists(small_terms, min_size=5, max_size=5),
       st.tuples(st.integers(-5, 3), st.integers(0, 6)), st.tuples(st.integers(-5, 3), st.integers(0, 6)))
def test_rule_is_exact_on_random_instances(rule, substitutes, xr, yr):
    pattern = parse_term(rule.pattern)
    term = pattern.xreplace(dict(zip(VARIABLES, substitutes)))
    node = _node_of(term, rule.node)
    if node is None:
        return
    box = {"x": (xr[0], xr[0] + xr[1]), "y": (yr[0], yr[0] + yr[1])}
    _assert_identity(rule, node, {n: r for n, r in box.items() if symbol(n) in node.free_symbols})


def test_questions_over_one_box_share_normal_forms_and_still_name_their_rules():
    """A trace's questions share nested pad subterms over one box: each normal form is computed once and
    shared (hf_swinv2's trace at 53 x 53: solver 15.2 -> 9.6 s), and a question that finds a form gets
    the reduction, and the rule names, it would have computed alone."""
    from shapeproof.solver.problems.problem import Problem
    from shapeproof.solver.strategies.rewrite import Reductions, reduce_problem

    ranges = {"H": (32, 256), "W": (32, 256)}
    pad = "((4 - ((1 + (H - H % 4) // 4) % 4)) % 4)"
    goals = [f"{pad} < 4", f"({pad} + (W + 3) // 4) >= 8", f"(H - H % 4 + {pad}) % 4 >= 0",
             f"(1 + (H - H % 4) // 4 + {pad}) % 4 == 0"]
    cache = Reductions()
    for goal in goals:
        problem = Problem.build(goal, ranges, facts=("H + W >= 80",))     # a trace's facts span its box
        alone, shared = reduce_problem(problem), reduce_problem(problem, cache=cache)
        assert shared.problem == alone.problem
        assert set(shared.fired) == set(alone.fired) != set()
    forms = [f for f in cache._forms.values() if len(f)]
    assert len(forms) == 1                       # one box: the questions found each other's forms


def test_a_size_padded_to_even_and_halved_meets_pythons_halving_over_unbounded_sizes():
    """Swin's patch merging pads a stage to even and halves it (``(1 + q + q % 2) // 2``) where its
    bookkeeping computes ``(q + 1) // 2``, two stages deep; under Dim.AUTO nothing bounds the sizes, so only
    the normal form can show they agree (``sum_ceil_half``, ``floordiv_nested_sum``)."""
    from shapeproof.solver import prove

    stage = "((s + ((4 - (s % 4)) % 4)) // 4)"
    for q in (stage, f"((1 + {stage}) // 2)"):
        padded, halved = f"((1 + {q} + ({q} % 2)) // 2)", f"((1 + {q}) // 2)"
        for goal in (f"{padded} == {halved}", f"(({padded} * t) % {halved}) == 0"):
            verdict = prove(goal, ranges={"s": (2, None), "t": (1, None)}, strategy="rewrite", timeout=2.0)
            assert verdict.proven, (goal, verdict.reason)
    wrong = prove(f"((1 + {stage} + ({stage} % 2)) // 2) == ({stage} // 2)", ranges={"s": (2, None)},
                  strategy="cascade", timeout=2.0)
    assert wrong.refuted                     # the floor, not the ceiling: 5 // 2 is 2, not 3
