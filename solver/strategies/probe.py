"""The ``probe`` strategy: look for a counterexample at a few telling points before any search.

Boxes too large to enumerate (an unbounded size, ``u0 == 0`` over
``[0, inf)``) often fail at their smallest sizes.  Evaluating the goal in
plain Python at the low end of each range (and the high end, when there is
one) costs microseconds, where an SMT call costs tens of milliseconds.  The
points are screened together in numpy (``enumerate``'s exact evaluator); a
point found is re-checked in Python like any counterexample, and nothing is
ever proven here.
"""
from __future__ import annotations

import itertools

from .enumerate import PointsEvaluator
from ..problems.deadline import Deadline
from ..problems.problem import Problem
from ..problems.recent import Recent
from ..problems.strategy import Outcome, Strategy, check_counterexample, refuted, sample_points, unknown

__all__ = ["ProbeStrategy"]

_MAX_POINTS = 64
_RECENT_BOXES = 4                # evaluators kept between questions (a few dozen values per node)


class ProbeStrategy(Strategy):
    name = "probe"
    decides_floats = True       # it only evaluates, with Python's meaning

    def __init__(self):
        # by box: its points depend on the box alone, and its questions share facts and subterms
        self._recent: Recent[PointsEvaluator] = Recent(_RECENT_BOXES)

    def release(self) -> None:
        self._recent.clear()

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        points = list(self._points(problem))
        try:     # numpy screens all points at once (Python's truth on a large guard costs ~50 us a point)
            failing = self._evaluator(problem, points).failing(problem)
            candidates = [p for p, fails in zip(points, failing) if fails]
        except OverflowError:
            candidates = points
        for point in candidates:
            if deadline.expired():
                break
            if check_counterexample(problem, point) is None:
                return refuted(point, "the goal fails at a probed point")
        return unknown("no probed point fails the goal")

    def _evaluator(self, problem: Problem, points: list) -> PointsEvaluator:
        key = tuple((s, problem.ranges[s]) for s in problem.symbols)
        return self._recent.get_or_make(key, lambda: PointsEvaluator(problem.symbols, points))

    @staticmethod
    def _points(problem: Problem):
        """Small sizes first (each symbol's lowest few values and its highest), then ``sample_points``."""
        axes = []
        for sym in problem.symbols:
            lo, hi = problem.ranges[sym]
            start = lo if lo is not None else (hi - 2 if hi is not None else 0)
            values = [v for v in (start, start + 1, start + 2) if hi is None or v <= hi]
            if hi is not None and hi not in values:
                values.append(hi)
            axes.append(values)
        seen = 0
        for point in itertools.product(*axes):
            if seen == _MAX_POINTS:
                break
            seen += 1
            yield dict(zip(problem.symbols, point))
        yield from sample_points(problem, count=12)
