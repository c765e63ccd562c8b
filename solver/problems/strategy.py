"""The one interface every decision procedure implements, and the checks around it.

A strategy only has to say what it found (``Outcome``).  ``run`` times it,
and before anything leaves the solver it re-checks the answer in plain
Python: a counterexample must lie in range, satisfy the facts and violate the
goal, or it is dropped; a proof is spot-checked at a few points, and a point
that breaks it turns the answer into a (correct) refutation with a warning,
since that means the strategy has a bug.
"""
from __future__ import annotations

import random
import time
import warnings
from dataclasses import dataclass
from typing import Mapping

from sympy import Symbol

from ..language.evaluate import truth
from .deadline import Deadline
from .problem import Problem
from .verdict import Status, Verdict

__all__ = ["Outcome", "Strategy", "run", "check_counterexample", "sample_points"]


@dataclass(frozen=True)
class Outcome:
    status: Status
    reason: str
    counterexample: Mapping[Symbol, int] | None = None


def proven(reason: str) -> Outcome:
    return Outcome(Status.PROVEN, reason)


def unknown(reason: str) -> Outcome:
    return Outcome(Status.UNKNOWN, reason)


def refuted(point: Mapping[Symbol, int], reason: str) -> Outcome:
    return Outcome(Status.REFUTED, reason, dict(point))


class Strategy:
    """A decision procedure: ``decide`` must return by ``deadline`` (UNKNOWN if out of time)."""

    name = "strategy"
    open_ended = False      # may spend the whole deadline without deciding (search, not evaluation)
    decides_floats = False  # evaluates float nodes with Python's double-precision meaning

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        raise NotImplementedError

    def verdict(self, problem: Problem, deadline: Deadline) -> Verdict:
        """The checked, timed answer (``run``); a strategy made of others (``Cascade``) names the one that
        decided."""
        return run(self, problem, deadline)

    def release(self) -> None:
        """Drop what is kept between questions only to answer faster (no verdict depends on it)."""

    def __repr__(self) -> str:
        return f"<strategy {self.name}>"


def in_range(problem: Problem, point: Mapping[Symbol, int]) -> bool:
    for sym in problem.symbols:
        lo, hi = problem.ranges[sym]
        value = point.get(sym)
        if value is None or (lo is not None and value < lo) or (hi is not None and value > hi):
            return False
    return True


def check_counterexample(problem: Problem, point: Mapping[Symbol, int]) -> str | None:
    """None if ``point`` is a valid counterexample, else why not."""
    if not in_range(problem, point):
        return "it is outside the ranges"
    memo: dict = {}
    failed = next((fact for fact in problem.facts if truth(fact, point, memo) is not True), None)
    if failed is not None:
        return f"the fact {failed} does not hold there"
    if truth(problem.goal, point, memo) is True:
        return "the goal holds there"
    return None


def is_counterexample(problem: Problem, point: Mapping[Symbol, int]) -> bool:
    """``check_counterexample(...) is None`` without writing out why not (proofs check six points each)."""
    memo: dict = {}
    return (in_range(problem, point) and all(truth(fact, point, memo) is True for fact in problem.facts)
            and truth(problem.goal, point, memo) is not True)


def sample_points(problem: Problem, count: int = 6, seed: int = 0) -> list[dict[Symbol, int]]:
    """A few deterministic points of the box: low corner, high corner, middle, then random ones."""
    rng = random.Random(seed)
    choices = []
    for sym in problem.symbols:
        lo, hi = problem.ranges[sym]
        lo_ = lo if lo is not None else (min(0, hi) if hi is not None else 0)
        hi_ = hi if hi is not None else max(lo_, 0) + 4096
        choices.append((lo_, hi_))
    points = [
        {s: lo for s, (lo, _) in zip(problem.symbols, choices)},
        {s: hi for s, (_, hi) in zip(problem.symbols, choices)},
        {s: (lo + hi) // 2 for s, (lo, hi) in zip(problem.symbols, choices)},
    ]
    for _ in range(max(0, count - 3)):
        points.append({s: rng.randint(lo, hi) for s, (lo, hi) in zip(problem.symbols, choices)})
    unique = []
    for p in points:
        if p not in unique:
            unique.append(p)
    return unique


def _named(point: Mapping[Symbol, int], problem: Problem) -> dict[str, int]:
    return {s.name: int(point[s]) for s in problem.symbols}


def run(strategy: Strategy, problem: Problem, deadline: Deadline) -> Verdict:
    """Run ``strategy`` on ``problem`` and return a checked, timed ``Verdict``."""
    start = time.perf_counter()

    def verdict(status: Status, reason: str, point=None, name: str = strategy.name) -> Verdict:
        cex = _named(point, problem) if point is not None else None
        return Verdict(status, name, time.perf_counter() - start, reason, cex)

    if problem.empty:
        return verdict(Status.PROVEN, "a range is empty, so the goal holds vacuously")
    if deadline.expired():
        return verdict(Status.UNKNOWN, "out of time before starting")
    if problem.has_floats and not strategy.decides_floats:
        return verdict(Status.UNKNOWN, "float arithmetic that is not exact in doubles over the ranges; "
                       "only enumeration evaluates it")
    try:
        outcome = strategy.decide(problem, deadline)
    except RecursionError:
        return verdict(Status.UNKNOWN, "the terms are nested too deeply for this strategy")
    except Exception as exc:
        # a bug in one strategy must not take down the caller (tests turn this warning into a failure)
        warnings.warn(f"strategy {strategy.name} failed on {problem.describe()}: {exc!r}", RuntimeWarning,
                      stacklevel=2)
        return verdict(Status.UNKNOWN, f"internal error in {strategy.name}: {type(exc).__name__}")

    if outcome.status is Status.REFUTED:
        point = {s: int(v) for s, v in (outcome.counterexample or {}).items()}
        why_not = check_counterexample(problem, point)
        if why_not is not None:
            warnings.warn(f"strategy {strategy.name} returned an invalid counterexample ({why_not}) "
                          f"for {problem.describe()}", RuntimeWarning, stacklevel=2)
            return verdict(Status.UNKNOWN,
                           f"discarded a counterexample that failed the Python re-check: {why_not}")
        return verdict(Status.REFUTED, outcome.reason, point)

    if outcome.status is Status.PROVEN:
        for point in sample_points(problem):
            if is_counterexample(problem, point):
                warnings.warn(f"strategy {strategy.name} claimed a proof that fails at "
                              f"{_named(point, problem)} "
                              f"for {problem.describe()}", RuntimeWarning, stacklevel=2)
                return verdict(Status.REFUTED, f"{strategy.name} claimed a proof, but Python evaluation "
                               "refutes it", point, name=f"{strategy.name}+check")
        return verdict(Status.PROVEN, outcome.reason)

    return verdict(Status.UNKNOWN, outcome.reason)


