"""Easier questions that settle a float question the cascade's stages leave open.

Float nodes that are not exact in doubles over the box are decided by
enumeration, and bounded by enclosures (``Bounds.floats``) and linear
relaxations (``relax``) in the other strategies; enumeration takes no unbounded
box.  Three plain facts settle many such questions anyway:

* *facts only restrict*: a goal that holds under fewer facts holds under all of
  them, so a goal without floats is asked without the facts that have them
  (``without_float_facts``), and any goal holds where the facts without floats
  hold nowhere (``float_free_facts``).  A counterexample of the question without
  the facts on floats is one of the original wherever those facts hold at it,
  which evaluating them there shows exactly (IEEE evaluation at one point is
  exact); values for the symbols only they mention are searched for apart
  (``witness``);
* *a box is the union of its slices*: where float nodes read symbols with a
  few values each (``x in [3, 9]`` beside an unbounded ``T``), the question
  is asked at each of those values (``cases``), where the floats are constants;
  it holds if it holds in every case;
* *a point of a part of the box is a point of the box*: a counterexample found
  near zero (``near_zero``: a small box around 0, or the end of a range nearest
  to it), where every float is exact (``exact_part``), or at magnitudes past
  the largest double (``far_points``: there ``float(x)`` and ``x / 3`` raise in
  Python, so a float goal over an unbounded range is undefined) refutes the goal;
  a proof over a part says nothing of the rest and is not used.
"""
from __future__ import annotations

import itertools
import math
from typing import Mapping

from sympy import Integer, Symbol

from ..language import formula as F
from .enumerate import EnumerateStrategy
from ..problems.deadline import Deadline
from ..problems.problem import Problem
from ..problems.strategy import Outcome, Strategy, check_counterexample, refuted, unknown

__all__ = ["without_float_facts", "float_free_facts", "witness", "cases", "near_zero", "exact_part",
           "far_points", "nearest_zero", "BoxParts"]

# points of the box near zero that a refutation search evaluates (enumeration: a few ms)
NEAR_ZERO_POINTS = 20_000
# a symbol's part of the box where floats are exact: far below 2**53 even through products of two
EXACT_SPAN = 2 ** 20
# past the largest double (2**1024) by more than any divisor of a guard, where ``x / c`` overflows too; and
# just below it, where ``float(x)`` still is a double but arithmetic on it overflows to inf
FAR = (2 ** 1100, 2 ** 1023)
# a symbol with at most this many values is split on when float nodes read it, in at most MAX_CASES cases
FEW_VALUES = 16
MAX_CASES = 64


def _has_floats(f: F.Formula) -> bool:
    return any(r.has_floats for r in F.relations(f))


def _over(problem: Problem, goal: F.Formula, facts: tuple) -> Problem:
    """``goal`` under ``facts`` over ``problem``'s ranges of their symbols."""
    symbols = set(goal.free_symbols).union(*(f.free_symbols for f in facts))
    ordered = tuple(s for s in problem.symbols if s in symbols)
    return Problem(goal, facts, ordered, {s: problem.ranges[s] for s in ordered})


def without_float_facts(problem: Problem) -> Problem | None:
    """The question without its facts on floats, when its goal has none (None otherwise)."""
    kept = tuple(f for f in problem.facts if not _has_floats(f))
    if _has_floats(problem.goal) or len(kept) == len(problem.facts):
        return None
    return _over(problem, problem.goal, kept)


def float_free_facts(problem: Problem) -> Problem | None:
    """Whether the facts without floats hold nowhere (proven: the question holds vacuously), for a goal
    with floats under some such facts (None otherwise)."""
    kept = tuple(f for f in problem.facts if not _has_floats(f))
    if not _has_floats(problem.goal) or not kept:
        return None
    return _over(problem, F.FALSE, kept)


def witness(problem: Problem, point: Mapping[Symbol, int]) -> Problem:
    """Where ``problem``'s facts hold with ``point`` given: a question whose counterexamples (its goal is
    false) are values for the symbols ``point`` does not give."""
    given = {s: Integer(v) for s, v in point.items()}
    facts = tuple(F.substitute(f, given) for f in problem.facts)
    rest = {s: problem.ranges[s] for s in problem.symbols if s not in given}
    return Problem.build(F.FALSE, rest, facts)


def cases(problem: Problem) -> list[tuple[dict[Symbol, int], Problem]] | None:
    """The question at each value of the symbols with few values that float nodes read (None when there
    are none, or too many cases), with the values of each case."""
    read = set().union(*(r.free_symbols for f in (problem.goal, *problem.facts) for r in F.relations(f)
                         if r.has_floats))
    few = [s for s in problem.symbols if s in read and _count(*problem.ranges[s]) <= FEW_VALUES]
    if not few or len(few) == len(problem.symbols):
        return None                             # the whole box is small: enumeration has decided it
    if math.prod(_count(*problem.ranges[s]) for s in few) > MAX_CASES:
        return None
    out = []
    for values in itertools.product(*(range(lo, hi + 1) for lo, hi in (problem.ranges[s] for s in few))):
        point = dict(zip(few, values))
        given = {s: Integer(v) for s, v in point.items()}
        rest = {s: problem.ranges[s] for s in problem.symbols if s not in given}
        out.append((point, Problem.build(F.substitute(problem.goal, given), rest,
                                         tuple(F.substitute(f, given) for f in problem.facts))))
    return out


def _count(lo: int | None, hi: int | None) -> float:
    return float("inf") if lo is None or hi is None else max(0, hi - lo + 1)


def near_zero(problem: Problem, points: int = NEAR_ZERO_POINTS) -> Problem | None:
    """The question over at most ``points`` points of the box nearest to 0 (each symbol's window around
    0, moved inside its range), or None when that is the whole box."""
    if not problem.symbols:
        return None
    width = max(1, int(points ** (1 / len(problem.symbols))))
    part = {s: _window(problem.ranges[s][0], problem.ranges[s][1], width) for s in problem.symbols}
    return _part(problem, part)


def exact_part(problem: Problem) -> Problem | None:
    """The question over the part of the box within ``EXACT_SPAN`` of each range's lower end (sizes are
    small there), where floats are more often exact; None when that is the whole box."""
    part = {}
    for s in problem.symbols:
        lo, hi = problem.ranges[s]
        if lo is None:
            lo = -EXACT_SPAN if hi is None else hi - EXACT_SPAN
        part[s] = (lo, lo + EXACT_SPAN if hi is None else min(hi, lo + EXACT_SPAN))
    return _part(problem, part)


def far_points(problem: Problem) -> list[dict[Symbol, int]]:
    """Points with every symbol that has an open end either small (near 0, in range) or at one of the
    ``FAR`` magnitudes at that end, at least one of them far; the other symbols near 0."""
    choices = []
    for s in problem.symbols:
        lo, hi = problem.ranges[s]
        small = [nearest_zero(lo, hi)]
        far = [v for v in FAR if hi is None] + [-v for v in FAR if lo is None]
        choices.append(small + far)
    points = [dict(zip(problem.symbols, values)) for values in itertools.product(*choices)]
    return [p for p in points if any(abs(v) >= min(FAR) for v in p.values())]


def nearest_zero(lo: int | None, hi: int | None) -> int:
    """The value of ``[lo, hi]`` nearest to 0."""
    return _window(lo, hi, 1)[0]


def _window(lo: int | None, hi: int | None, width: int) -> tuple[int, int]:
    """``width`` consecutive values of ``[lo, hi]`` nearest to 0 (all of them when fewer)."""
    start = -(width // 2)
    if lo is not None and start < lo:
        start = lo
    if hi is not None and start + width - 1 > hi:
        start = hi - width + 1 if lo is None else max(lo, hi - width + 1)
    end = start + width - 1 if hi is None else min(hi, start + width - 1)
    return start, end


def _part(problem: Problem, part: dict) -> Problem | None:
    if part == dict(problem.ranges):
        return None
    return Problem.build(problem.goal, part, problem.facts)


class BoxParts(Strategy):
    """For a float question on a box too large to enumerate: enumeration of the part nearest to 0
    (``near_zero``), then the points past the largest double (``far_points``, in Python).  A counterexample
    there is one of the box; nothing is proven.  Integer questions are left to the stages that reason over
    the whole box (``z3`` finds their models)."""

    name = "parts"
    decides_floats = True

    def __init__(self, points: int = NEAR_ZERO_POINTS):
        self.points = points
        self._enumerate = EnumerateStrategy(max_points=points)

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        part = near_zero(problem, self.points) if problem.has_floats else None
        if part is None:
            return unknown("not a float question on a box too large to enumerate")
        outcome = self._enumerate.decide(part, deadline)
        if outcome.counterexample is not None:
            return refuted(outcome.counterexample, f"{outcome.reason} nearest to 0")
        for point in far_points(problem):
            if deadline.expired():
                break
            if check_counterexample(problem, point) is None:
                return refuted(point, "the goal fails past the largest double, where Python's float "
                                      "arithmetic raises")
        return unknown(f"no counterexample among the {self.points} points nearest to 0, nor past the largest "
                       "double")
