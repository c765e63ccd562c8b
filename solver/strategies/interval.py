"""The ``interval`` strategy: decide a goal from value-range bounds alone (``ranges``).

Facts first narrow the box by propagating linear bounds; a relation is
proven when its interval satisfies it everywhere and it is defined
everywhere; a goal that can hold nowhere is refuted at any box point that
satisfies the facts, and a fact that holds nowhere proves the goal (facts
only restrict).  Cheap (microseconds) and incomplete by design: it cannot
see that ``16*(T//16) <= T``, which is what ``rewrite`` and ``z3`` are for.
"""
from __future__ import annotations

from ..problems.bounds import Bounds
from ..problems.deadline import Deadline
from ..problems.problem import Problem
from ..problems.ranges import box_truth, tighten
from ..problems.strategy import (
    Outcome, Strategy, check_counterexample, proven, refuted, sample_points, unknown,
)

__all__ = ["IntervalStrategy"]


class IntervalStrategy(Strategy):
    name = "interval"
    decides_floats = True       # float nodes bounded loosely, and never taken to be defined

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        ranges = tighten(problem.ranges, problem.facts)
        if ranges is None:
            return proven("the facts exclude every point in range")
        bounds = Bounds(ranges)
        if any(box_truth(fact, bounds)[1] for fact in problem.facts):
            return proven("a fact holds nowhere in range (value-range bounds)")
        always, never = box_truth(problem.goal, bounds)
        if always:
            return proven("value-range bounds satisfy the goal everywhere")
        if never:
            narrowed = Problem(problem.goal, problem.facts, problem.symbols, ranges)
            for point in sample_points(narrowed, count=8):
                if check_counterexample(problem, point) is None:
                    return refuted(point, "value-range bounds show the goal can never hold")
            return unknown("the goal can never hold, but no point satisfying the facts was found")
        return unknown("value-range bounds are inconclusive")
