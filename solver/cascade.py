"""The ``cascade`` strategy: cheap procedures first, SMT last, verdicts cached.

Order and why: ``enumerate`` is complete and the fastest procedure on small
boxes (about 0.1 ms for a few thousand points, with the smallest
counterexample), and answers at once where a box is too large for it;
``interval`` costs microseconds on small terms and proves what value ranges
show on boxes of any size (it goes second: the questions a trace brings are
those torch's own value-range analysis could not settle, and on the boxes
enumeration covers it decided 4 of 262 questions of ``vit_patch_embed_dyn`` and
0 of 39 of ``pixel_unshuffle_derived_dim``, at 0.3-2 ms each on their large
terms); ``probe`` evaluates the low ends of larger boxes (an
unbounded ``u0 == 0`` fails at 1 in microseconds); ``rewrite`` normalizes
``//`` and ``%`` and settles many unbounded guards; ``enumerate`` then takes
boxes too large for its first pass whose grid is still cheap (``grid_work``:
a batch dim times two image dims is 350,000 points, but each subterm mentions
one or two of them); ``z3`` then works on the *rewritten* problem, where the
nested pad-to-multiple guards it gives up on in their raw form are easy;
``enumerate`` gets a last, larger budget for boxes too big for the first
passes (``z3`` leaves it half the time when it can decide the box).  Decided
verdicts are cached by the query's canonical form (goal, facts, ranges), so a
guard that recurs across layers is solved once.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Sequence

from .enumerate import EnumerateStrategy
from .interval import IntervalStrategy
from .probe import ProbeStrategy
from .problem import Deadline, Problem
from .rewrite import Reductions, RewriteStrategy, Simplified
from .smt import Z3Strategy
from .strategy import Outcome, Strategy, run
from .verdict import Status, Verdict

__all__ = ["Cascade"]

# array elements an enumeration before z3 may compute on a box of more than 100,000 points: a batch
# dim times two image dims is 350,000 points, but most subterms mention one or two of them (about 5 ns
# an element: at most ~20 ms where z3 takes 20-60 ms; and at most 32 MB of node arrays while the
# question lasts, about what z3's first context adds to the process)
WORK_BEFORE_Z3 = 4_000_000

# a symbol's part of the sub-box where floats are exact: far below 2**53 even through products of two
_EXACT_SPAN = 2 ** 20


def _clip(lo, hi) -> tuple:
    """At most ``_EXACT_SPAN`` values of ``[lo, hi]``, from its lower end (sizes are small there)."""
    if lo is None:
        lo = -_EXACT_SPAN if hi is None else hi - _EXACT_SPAN
    return lo, lo + _EXACT_SPAN if hi is None else min(hi, lo + _EXACT_SPAN)


def default_stages(reductions: Reductions) -> list[Strategy]:
    """The cascade's stages in the order above; ``rewrite`` and ``rewrite+z3`` share ``reductions``."""
    return [
        EnumerateStrategy(max_points=100_000),
        IntervalStrategy(),
        ProbeStrategy(),
        RewriteStrategy(reductions),
        EnumerateStrategy(max_points=0, max_work=WORK_BEFORE_Z3),
        Simplified(Z3Strategy(), reductions),
        EnumerateStrategy(max_points=4_000_000),
    ]


class Cascade(Strategy):
    """Runs strategies in order until one decides; thread-safe LRU cache of decided verdicts.

    Its verdict names the stage that decided (``enumerate``, ``rewrite+z3``, ...), so it answers through
    ``verdict`` rather than ``decide``; each stage's answer is checked by ``strategy.run``.
    """

    name = "cascade"
    decides_floats = True       # it routes float nodes to enumeration itself

    def __init__(self, stages: Sequence[Strategy] | None = None, cache_size: int = 8192,
                 reductions: Reductions | None = None):
        self.stages = list(stages) if stages is not None else default_stages(
            reductions if reductions is not None else Reductions())
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        verdict = self.verdict(problem, deadline)
        point = None if verdict.counterexample is None else {
            s: verdict.counterexample[s.name] for s in problem.symbols}
        return Outcome(verdict.status, verdict.reason, point)

    def release(self) -> None:
        for stage in self.stages:
            stage.release()

    def __call__(self, problem: Problem, deadline: Deadline) -> Verdict:
        return self.verdict(problem, deadline)

    def verdict(self, problem: Problem, deadline: Deadline) -> Verdict:
        start = time.perf_counter()
        with self._lock:
            hit = self._cache.get(problem.key)
            if hit is not None:
                self._cache.move_to_end(problem.key)
        if hit is not None:
            return replace(hit, seconds=time.perf_counter() - start, reason=hit.reason + " (cached)")
        reasons = []
        for i, stage in enumerate(self.stages):
            if deadline.expired():
                reasons.append("out of time")
                break
            if problem.has_floats and not stage.decides_floats:
                # float nodes that are not exact in doubles: only enumeration evaluates them
                continue
            budget = self._budget(i, problem, deadline) if stage.open_ended else deadline
            verdict = run(stage, problem, budget)
            if verdict.decided:
                result = replace(verdict, seconds=time.perf_counter() - start)
                with self._lock:
                    self._cache[problem.key] = result
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
                return result
            reasons.append(f"{stage.name}: {verdict.reason}")
        if problem.has_floats:
            refuted = None if deadline.expired() else self._refute_where_exact(problem, deadline)
            if refuted is not None:
                return replace(refuted, seconds=time.perf_counter() - start,
                               reason=f"{refuted.reason} (in the part of the ranges where doubles are exact)")
            reasons.insert(0,
                           "float arithmetic that is not exact in doubles over the ranges (only enumeration "
                              "evaluates it)")
        return Verdict(Status.UNKNOWN, self.name, time.perf_counter() - start, "; ".join(reasons))

    def _refute_where_exact(self, problem: Problem, deadline: Deadline) -> Verdict | None:
        """A counterexample from a sub-box where every float is exact in doubles (there the float nodes are
        integer nodes every stage decides): a point of the sub-box is a point of the box, so a refutation
        there refutes the goal; a proof there says nothing about the rest and is not returned."""
        clipped = {s: _clip(*problem.ranges[s]) for s in problem.symbols}
        if clipped == dict(problem.ranges):
            return None
        sub = Problem.build(problem.goal, clipped, problem.facts)
        if sub.has_floats:
            return None
        verdict = self(sub, deadline)
        return verdict if verdict.refuted else None

    def _budget(self, i: int, problem: Problem, deadline: Deadline) -> Deadline:
        """Half the time left when a later stage is sure to decide given time: an SMT call that
        runs out must not starve an enumeration that settles the same box."""
        later = self.stages[i + 1:]
        if any(isinstance(s, EnumerateStrategy) and s.covers(problem) for s in later):
            return deadline.share(0.5)
        return deadline

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
