"""Every strategy on a table of guards: each answer must agree with the truth or be unknown."""
import time
import warnings

import numpy as np
import pytest

from shapeproof.solver import STRATEGIES, Status, parse_condition, parse_term, prove
from shapeproof.solver.strategies.cascade import Cascade
from shapeproof.solver.strategies.enumerate import EnumerateStrategy, holds_along
from shapeproof.solver.problems.deadline import Deadline
from shapeproof.solver.problems.problem import Problem
from shapeproof.solver.language.terms import symbol
from shapeproof.solver.problems.strategy import Strategy, unknown

P, R = Status.PROVEN, Status.REFUTED

# goal, ranges, facts, truth (the cascade must reach it)
TABLE = [
    ("((2*T*T) // T) == 2*T", {"T": (2, 1024)}, (), P),
    ("((2*T*T) // T) == 2*T", {"T": (1, None)}, (), P),
    ("(T % 4) != 0", {"T": (2, 1024)}, (), R),
    ("(1 + ((T - T % 4) // 4)) != (4 + T - T % 4)", {"T": (2, None)}, (), P),
    ("((64 + (-16)*(L % 4) + 16*L) % 64) == 0", {"L": (2, 4096)}, (), P),
    ("T <= 16*math.ceil(T / 16)", {"T": (2, 2 ** 52)}, (), P),      # doubles: exact below 2**53 only
    ("(1 % (1 + ((L - 1) // S))) != 0", {"L": (2, None), "S": (2, None)}, ("L >= 2*S",), P),
    ("(1 % (1 + ((L - 1) // S))) != 0", {"L": (2, 4096), "S": (1, 8)}, (), R),
    ("((1 + (seq // S)) % N) != 0", {"seq": (1, 4096), "S": (4, 4), "N": (8, 8)}, (), R),
    ("(D + D*((L-1)//S)) == D*(1 + ((L-1)//S))", {"D": (1, 1024), "L": (2, 4096), "S": (1, 8)}, (), P),
    ("(H // 7)*7 == H", {"H": (7, 2048)}, ("H % 7 == 0",), P),
    ("(H // 7)*7 == H", {"H": (7, None)}, ("H % 7 == 0",), P),
    ("X // 4 * 4 + X % 4 == X", {"X": (-4096, 4096)}, (), P),
    ("((X - 5) // 4)*4 <= X - 5", {"X": (0, 4096)}, (), P),
    ("(H // 2) != H", {"H": (4, None)}, (), P),
    ("(H // (H // 2)) == 2", {"H": (4, None)}, (), P),
    ("(H % (H // 2)) == 0", {"H": (4, 512)}, (), R),
    ("(B // (B // 2)) > 1", {"B": (2, 64)}, (), P),
    ("min(a, b) <= max(a, b)", {"a": (None, None), "b": (None, None)}, (), P),
    ("max(1, T // 16) == T // 16", {"T": (16, None)}, (), P),
    ("max(1, T // 16) == T // 16", {"T": (1, None)}, (), R),
    ("x // (y - 2) >= 0", {"x": (0, 10), "y": (0, 5)}, (), R),      # y == 2 divides by zero
    ("y == 2 or x // (y - 2) >= -10", {"x": (0, 10), "y": (0, 5)}, (), P),
    ("s0 == 2*s1", {"s0": (2, 100), "s1": (1, 50)}, ("s0 == 2*s1",), P),
    ("(s0 // 2) == s1", {"s0": (2, None), "s1": (1, None)}, ("s0 == 2*s1",), P),
    ("(s0 // 2) == s1", {"s0": (2, None), "s1": (1, None)}, ("s0 == 2*s1 + 1",), P),
    ("(s0 // 2) == s1", {"s0": (2, None), "s1": (1, None)}, ("s0 == 2*s1 + 2",), R),
    ("u0 <= 10", {"u0": (0, None)}, ("u0 >= 0", "u0 < 11"), P),
    ("T > 5", {"T": (2, 10)}, ("T > 7",), P),
    ("T > 5", {"T": (2, 10)}, ("T > 20",), P),                     # no point satisfies the facts
    ("(x * x) % 4 != 2", {"x": (-50, 50)}, (), P),
    # undefined at y = w = 0: interval hints of the outer divisions must not hide where inner ones divide by 0
    ("y != 0 or w != 0 or (x // y) // 2 + (x // w) // 2 == 5", {"x": (1, 1), "y": (0, 1000), "w": (-1000, 0)},
     (), R),
    ("y != 5 or w != -7 or (2*(x // max(y - 5, 0))) // 3 + (2*(x // min(w + 7, 0))) // 3 == 12345",
     {"x": (1, 1000), "y": (0, None), "w": (None, 0)}, (), R),
]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("goal,ranges,facts,expected", TABLE, ids=[t[0][:40] for t in TABLE])
def test_strategies_agree_with_the_truth_or_say_unknown(name, goal, ranges, facts, expected):
    with warnings.catch_warnings():
        # a strategy caught lying by the re-check fails the test
        warnings.simplefilter("error", RuntimeWarning)
        v = prove(goal, ranges=ranges, facts=facts, strategy=name, timeout=5.0)
    assert v.status in (expected, Status.UNKNOWN), v
    if v.status is R:
        assert set(v.counterexample) == {s.name for s in Problem.build(goal, ranges, facts).symbols}
    if name == "cascade":
        assert v.status is expected, v


def test_verdict_fields():
    v = prove("(T % 4) != 0", ranges={"T": (2, 1024)}, strategy="enumerate")
    assert v.status == "refuted" and v.status.value == "refuted"   # a str-valued enum
    assert v.counterexample == {"T": 4}                              # the smallest one
    assert v.strategy == "enumerate" and v.seconds >= 0 and v.reason


def test_unknown_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown strategy"):
        prove("T > 1", strategy="magic")


def test_timeouts_are_respected():
    # quadratic residues mod 4093 over an unbounded range: hard for every procedure
    start = time.perf_counter()
    v = prove("(L*(L+1)*(L+2)) % 4093 != 5", ranges={"L": (0, None)}, timeout=0.3)
    assert time.perf_counter() - start < 2.0
    assert v.status in (Status.UNKNOWN, Status.REFUTED)


def test_cascade_caches_decided_verdicts():
    first = prove("(T % 6) != 5", ranges={"T": (0, 99)})
    again = prove("(T % 6) != 5", ranges={"T": (0, 99)})
    assert first.counterexample == again.counterexample == {"T": 5}
    assert again.reason.endswith("(cached)")


class _Stalling(Strategy):
    """A search that uses whatever time it is given and decides nothing (Z3 on a hard query)."""

    name = "stall"
    open_ended = True

    def decide(self, problem, deadline):
        while not deadline.expired():
            time.sleep(0.01)
        return unknown("gave up")


def test_an_open_ended_stage_leaves_time_for_enumeration():
    cascade = Cascade([_Stalling(), EnumerateStrategy()])
    problem = Problem.build("(T % 7) != 3", {"T": (0, 1000)}, ())
    verdict = cascade(problem, Deadline(0.5))
    assert verdict.status is Status.REFUTED and verdict.counterexample == {"T": 3}
    unbounded = Problem.build("(T % 7) != 3", {"T": (0, None)}, ())
    assert cascade(unbounded, Deadline(0.2)).status is Status.UNKNOWN


def test_torch_strategy_does_not_pass_on_torchs_wrong_proofs():
    """torch's value ranges prove TruncDiv(x, y) <= y - 4 here; Python says False at x = -2, y = 3."""
    pytest.importorskip("torch")
    from shapeproof.tracer import TorchStrategy

    verdict = prove("TruncDiv(x, y) <= -4 + y", ranges={"x": (-3, -2), "y": (3, 4)}, strategy=TorchStrategy())
    assert verdict.refuted and verdict.counterexample == {"x": -2, "y": 3}


def test_probe_refutes_at_the_low_end_of_an_unbounded_range_without_search():
    """``u0 == 0`` over [0, inf) fails at 1: the probe stage finds it in plain Python (Z3 took 30-130 ms)."""
    verdict = prove("u0 == 0", ranges={"u0": (0, None)})
    assert verdict.refuted and verdict.strategy == "probe" and verdict.counterexample == {"u0": 1}
    assert prove("(32*u0) >= 2", ranges={"u0": (0, None)}).counterexample == {"u0": 0}


def test_the_probe_screens_its_points_together_and_keeps_only_what_python_confirms():
    """The screen is numpy's exact evaluator; where its values would leave int64 the points are checked in
    Python one by one, and a point is never taken on the screen's word alone."""
    from shapeproof.solver.strategies.probe import ProbeStrategy

    screened = prove("x > 5 or y < 2", ranges={"x": (1, None), "y": (0, None)}, facts=["y == x + 1"],
                     strategy=ProbeStrategy())
    assert screened.refuted and screened.counterexample == {"x": 1, "y": 2}   # the fact allows it
    assert prove("x % 3 == 0 or x < 2", ranges={"x": (1, None)}, strategy=ProbeStrategy()).counterexample == {
        "x": 2}
    huge = prove("x * x * x * x < 1000000000000000000000000000000", ranges={"x": (2 ** 40, None)},
                 strategy=ProbeStrategy())
    assert huge.refuted and huge.counterexample == {"x": 2 ** 40}


def test_enumeration_reuses_a_box_s_node_values_without_changing_any_verdict(monkeypatch):
    """One evaluator per recent box keeps its nodes' values between questions; every verdict must be the
    one a fresh strategy gives, the smallest counterexample included, also when evaluators are dropped
    for holding too much."""
    from shapeproof.solver.strategies import enumerate as enumeration

    ranges = {"H": (1, 300), "W": (1, 200)}
    goals = ["(H // 7) * 7 + H % 7 == H", "((H + 6) // 7) * ((W + 6) // 7) != 12",
             "(H // 7) * (W // 7) >= 1", "H % 7 == 0 or (7 - H % 7) % 7 > 0",
             "((H + 6) // 7) * 7 - H < 7 and W % 3 != 2", "H * W != 4096"]

    def answer(goal, strategy):
        verdict = prove(goal, ranges=ranges, strategy=strategy)
        return verdict.status, verdict.counterexample

    expected = [answer(goal, EnumerateStrategy()) for goal in goals]
    assert {status for status, _ in expected} == {Status.PROVEN, Status.REFUTED}
    shared = EnumerateStrategy()
    assert [answer(goal, shared) for goal in goals * 2] == expected * 2
    monkeypatch.setattr(enumeration, "_RECENT_BYTES", 1)
    assert [answer(goal, shared) for goal in goals] == expected


def test_a_solver_releases_the_node_values_enumeration_keeps():
    """A trace's environment outlives its questions (the region search keeps it): what enumeration keeps
    to answer faster is dropped when the trace ends, and the verdicts do not change."""
    from shapeproof.solver import Solver

    solver = Solver()
    kept = [s for s in solver.cascade.stages if isinstance(s, EnumerateStrategy)]
    first = solver.prove("(H // 7) * (W // 7) >= 1", ranges={"H": (1, 300), "W": (1, 200)})
    assert any(stage._recent for stage in kept)
    solver.release()
    assert not any(stage._recent for stage in kept)
    again = solver.prove("(H // 7) * (W // 7) >= 2", ranges={"H": (1, 300), "W": (1, 200)})
    assert (first.status, first.counterexample) == (Status.REFUTED, {"H": 1, "W": 1})
    assert again.refuted and again.counterexample == {"H": 1, "W": 1}


def test_enumeration_counts_the_bytes_it_keeps_as_it_keeps_them():
    """The cache bound reads each evaluator's kept bytes after every chunk, from a running count (summing
    the memos there cost as much as the evaluation): the count is what its integer, float and
    undefined-lane memos hold."""
    strategy = EnumerateStrategy()
    ranges = {"H": (1, 300), "W": (1, 200)}
    for goal in ("(H // 7) * (W // 7) >= 1", "math.ceil(W / 2.5) <= W + H", "math.floor(H * 0.7) < W + H"):
        prove(goal, ranges=ranges, strategy=strategy)
    assert any(vec.float_memo and vec.bad for vec in strategy._recent.values())
    for vec in strategy._recent.values():
        entries = [*vec.memo.values(), *vec.float_memo.values(), *vec.bad.values()]
        arrays = [a for entry in entries for a in (entry if isinstance(entry, tuple) else (entry,))]
        assert vec.nbytes() == sum(np.asarray(a).nbytes for a in arrays) > 0


def test_enumeration_evaluates_each_subterm_over_its_own_symbols_only():
    """The box is a grid with an axis per symbol: a pad term in ``H`` is computed once per ``H`` even when
    facts over ``W`` and ``B`` make the box 7 x 57 x 225 points (a Swin trace asks a thousand such
    questions); the smallest counterexample is still the first in the box's order."""
    strategy = EnumerateStrategy()
    ranges = {"B": (1, 7), "H": (8, 64), "W": (32, 256)}
    facts = ("W % 4 == 0 or B > 0", "min(H, W // 4) >= 8")
    pad = "(4 - ((H + 1) // 2) % 4) % 4"
    proven_ = prove(f"{pad} < 4", ranges=ranges, facts=facts, strategy=strategy)
    assert proven_.status is Status.PROVEN
    sizes: dict = {}
    for vec in strategy._recent.values():
        for term, (values, _) in vec.memo.items():
            sizes.setdefault(frozenset(s.name for s in term.free_symbols), set()).add(values.size)
    assert sizes[frozenset({"H"})] == {57} and sizes[frozenset({"W"})] == {225}
    assert sizes[frozenset({"B"})] == {7} and sizes[frozenset({"H", "W"})] == {57 * 225}
    refuted_ = prove(f"{pad} != 3 or W > 40", ranges=ranges, facts=facts, strategy=strategy)
    assert refuted_.status is Status.REFUTED and refuted_.counterexample == {"B": 1, "H": 9, "W": 32}


def test_a_rounded_float_compared_with_an_integer_is_enumerated_exactly():
    """``math.ceil(T / 3) == 13`` holds at 37..39 only.  The masks stay booleans where one side has a
    float wrapper and the other none (``~False`` is ``-1`` in Python: every lane failed)."""
    goal = parse_condition("math.ceil(T / 3) == 13")
    mask = holds_along(goal, symbol("T"), 1, 100)
    assert mask.dtype == bool and list(np.flatnonzero(mask) + 1) == [37, 38, 39]
    assert prove(goal, ranges={"T": (37, 39)}, strategy=EnumerateStrategy()).status is P
    refuted_ = prove(goal, ranges={"T": (37, 40)}, strategy=EnumerateStrategy())
    assert refuted_.status is R and refuted_.counterexample == {"T": 40}


def test_a_large_box_of_cheap_terms_is_enumerated_before_z3():
    """350,000 points (a batch dim and two image dims), each subterm over one or two of them: the grid
    costs far fewer array elements than points times nodes, so the cascade enumerates it instead of
    asking z3; a box whose grid is costly is still refused by that stage."""
    from shapeproof.solver.strategies.enumerate import grid_work

    ranges = {"B": (2, 8), "H": (32, 256), "W": (32, 256)}
    goal = "(B % (B*(H // 16)*(W // 16))) != 0"
    problem = Problem.build(goal, ranges)
    # three nodes over all of B, H, W (the %, the product, the relation), B, H, W, H // 16, W // 16 over
    # their own axes, the integers 16 and 0 one element each
    assert grid_work(problem) == 3 * 7 * 225 ** 2 + 7 + 4 * 225 + 2
    verdict = Cascade().verdict(problem, Deadline(10.0))
    assert verdict.status is Status.PROVEN and verdict.strategy == "enumerate"

    capped = EnumerateStrategy(max_points=0, max_work=grid_work(problem) - 1)
    assert prove(goal, ranges=ranges, strategy=capped).status is Status.UNKNOWN
    enough = EnumerateStrategy(max_points=0, max_work=grid_work(problem))
    refuted_ = prove("(B % (B*(H // 32)*(W // 32))) != 0", ranges=ranges, strategy=enough)
    assert refuted_.status is Status.REFUTED and refuted_.counterexample == {"B": 2, "H": 32, "W": 32}
    # the int64 overflow guard keeps one bound per node, not an array beside each value
    kept = [pair for vec in enough._recent.values() for pair in vec.memo.values()]
    assert kept and all(np.ndim(magnitude) == 0 for _, magnitude in kept)


def test_the_probe_evaluates_one_boxs_facts_once_for_all_its_questions():
    """A trace's questions share their box (hence the probe's points) and their facts: one evaluator per
    box serves them all, answering as a fresh probe does; releasing the strategy drops it."""
    from shapeproof.solver.strategies.probe import ProbeStrategy

    ranges = {"H": (1, 300), "W": (1, 200)}
    facts = ("(H // 7) * (W // 7) >= 0",)
    goals = ["H != 2", "W % 7 != 0 or H > 14", "H + W >= 3", "H*W != 600"]
    shared = ProbeStrategy()
    answers = []
    for goal in goals:
        fresh = prove(goal, ranges=ranges, facts=facts, strategy=ProbeStrategy())
        again = prove(goal, ranges=ranges, facts=facts, strategy=shared)
        assert (again.status, again.counterexample) == (fresh.status, fresh.counterexample)
        answers.append(again.status)
    assert Status.REFUTED in answers and Status.UNKNOWN in answers
    (evaluator,) = shared._recent.values()
    assert parse_term("(H // 7) * (W // 7)") in evaluator._vec.memo      # the fact's term, computed once
    shared.release()
    assert not shared._recent


def test_the_share_of_a_box_where_a_condition_holds_is_counted_exactly():
    """Against a brute-force count; None where the box is unbounded or too large to count."""
    from shapeproof.solver import holding_grid, truth

    goal = parse_condition("(H % 6) != 0 and (H // 6)*(W // 6) != 16 or W > 200")
    box = {symbol("H"): (32, 90), symbol("W"): (7, 256)}
    points = [{symbol("H"): h, symbol("W"): w} for h in range(32, 91) for w in range(7, 257)]
    expected = sum(truth(goal, p) is True for p in points) / len(points)
    assert holding_grid(goal, box, chunk=1000).share == holding_grid(goal, box).share == expected
    assert holding_grid(goal, {symbol("H"): (32, None), symbol("W"): (7, 256)}) is None
    assert holding_grid(goal, box, max_points=100) is None
