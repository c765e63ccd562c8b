"""Random traces against brute force.

A "trace" asks the environment a random sequence of questions about two
input dims.  Checked by exhaustive evaluation over the declared box:

* every answer equals the condition's value for the example input;
* every answer holds at every point of the box where the recorded guards hold
  (so the traced program is valid wherever its guards are);
* ``produce_guards`` marks a guard proven only if it holds on the whole box,
  and refuted only with a counterexample inside the box that violates it.
"""
import itertools
import os

from hypothesis import HealthCheck, assume, given, settings, strategies as st
from sympy import Integer

from shapeproof.shapes import ShapeEnv, Source
from shapeproof.shapes.report import _roots, lift
from shapeproof.solver import FloorDiv, Max, Min, Mod, Status, symbol
from shapeproof.solver.language.evaluate import truth
from shapeproof.solver.language.formula import conj, disj, rel, substitute

X, Y = symbol("x"), symbol("y")

leaves = st.one_of(st.sampled_from([X, Y]), st.integers(-3, 9).map(Integer))
terms = st.recursive(leaves, lambda c: st.one_of(
    st.tuples(c, c).map(lambda t: t[0] + t[1]),
    st.tuples(c, c).map(lambda t: t[0] * t[1]),
    st.tuples(c, st.integers(1, 8).map(Integer)).map(lambda t: FloorDiv(*t)),
    st.tuples(c, st.integers(1, 8).map(Integer)).map(lambda t: Mod(*t)),
    st.tuples(c, c).map(lambda t: FloorDiv(*t)),
    st.tuples(c, c).map(lambda t: Max(*t)), st.tuples(c, c).map(lambda t: Min(*t))), max_leaves=5)
relations = st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), terms,
                      terms).map(lambda t: rel(*t))
conditions = st.recursive(relations, lambda c: st.one_of(st.tuples(c, c).map(lambda t: conj(*t)),
                                                         st.tuples(c, c).map(lambda t: disj(*t))),
                                                         max_leaves=2)
spans = st.tuples(st.integers(0, 4), st.integers(2, 7)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=int(os.environ.get("SHAPEPROOF_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.lists(conditions, min_size=1, max_size=5), spans, spans, st.data())
def test_trace_answers_and_guard_verdicts_agree_with_brute_force(questions, span_x, span_y, data):
    hint_x = data.draw(st.integers(max(2, span_x[0]), span_x[1]))
    hint_y = data.draw(st.integers(max(2, span_y[0]), span_y[1]))
    env = ShapeEnv(timeout=5.0)
    sx = env.create_backed_symbol(hint_x, Source("x.size(0)", "x", 0), declared=span_x, dim_name="X")
    sy = env.create_backed_symbol(hint_y, Source("y.size(0)", "y", 0), declared=span_y, dim_name="Y")
    hints = {sx: hint_x, sy: hint_y}
    answers = []
    for q in questions:
        c = substitute(q, {X: sx, Y: sy})
        expected = truth(c, hints)
        assume(expected is not None)           # eager PyTorch would divide by zero on the example
        assert env.evaluate(c) is expected
        answers.append((c, expected))

    box = {s: env.symbols[s].range for s in (sx, sy)}
    points = [dict(zip(box, p)) for p in itertools.product(*(range(lo, hi + 1) for lo, hi in box.values()))]
    guards = [lift(env, g.condition) for g in env.guards]
    for point in points:
        if all(truth(g, point) is True for g in guards):
            for c, value in answers:
                assert truth(c, point) in (value, None), f"{c} answered {value} but differs at {point}"

    report = env.produce_guards(timeout=5.0)
    by_label = {env.symbols[s].label: s for s in (sx, sy)}
    for guard, lifted in zip(report.guards, guards):
        everywhere = all(truth(lifted, p) is True for p in points)
        if guard.verdict.status is Status.PROVEN:
            assert everywhere, f"guard {lifted} proven but fails in {box}"
        elif guard.verdict.status is Status.REFUTED:
            assert not everywhere
            (violation,) = [v for v in report.violations + report.restrictions if v.guard is guard]
            if any(r is violation for r in report.restrictions):
                # a relation kept as an input check leaves every size of a dim it taught a divisibility, and
                # of a dim that is an error anyway, a partner where it does not fail (it may be undefined
                # there: eager would divide by zero too); other dims it may narrow, as torch's checks do
                erring = {s for v in report.violations for s in v.lifted.free_symbols}
                for s in lifted.free_symbols & (_roots(env, guard.taught) | erring):
                    for value in range(box[s][0], box[s][1] + 1):
                        partners = [p for p in points if p[s] == value]
                        assert any(truth(lifted, p) is not False for p in partners), (lifted, s, value)
            point = {by_label[k]: v for k, v in violation.counterexample.items()}
            assert all(box[s][0] <= v <= box[s][1] for s, v in point.items())
            assert truth(lifted, {**hints, **point}) is not True
