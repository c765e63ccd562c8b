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
passes (``z3`` leaves it half the time when it can decide the box).  A float
question whose box is too large to enumerate is searched for counterexamples
in parts of its box (``parts``, before ``z3``), settled by value ranges over
pieces of its box (``pieces``, after ``z3``), and one the stages leave open
is settled, where it can be, by easier ones (``weaken``): the facts without
floats, the goal without the facts on floats, its cases over symbols with few
values, the part of the box where doubles are exact.  Decided verdicts are
cached by the query's canonical form (goal, facts, ranges), so a guard that
recurs across layers is solved once.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import replace
from typing import Sequence

from .enumerate import EnumerateStrategy
from .interval import IntervalStrategy
from .pieces import PiecesStrategy
from .probe import ProbeStrategy
from ..problems.deadline import Deadline
from ..problems.problem import Problem
from .rewrite import Reductions, RewriteStrategy, Simplified
from . import weaken
from .smt import Z3Strategy
from ..problems.strategy import Outcome, Strategy, check_counterexample, run
from ..problems.verdict import Status, Verdict

__all__ = ["Cascade"]

# array elements an enumeration before z3 may compute on a box of more than 100,000 points: a batch
# dim times two image dims is 350,000 points, but most subterms mention one or two of them (about 5 ns
# an element: at most ~20 ms where z3 takes 20-60 ms; and at most 32 MB of node arrays while the
# question lasts, about what z3's first context adds to the process)
WORK_BEFORE_Z3 = 4_000_000


def default_stages(reductions: Reductions) -> list[Strategy]:
    """The cascade's stages in the order above; ``rewrite`` and ``rewrite+z3`` share ``reductions``."""
    return [
        EnumerateStrategy(max_points=100_000),
        IntervalStrategy(),
        ProbeStrategy(),
        RewriteStrategy(reductions),
        EnumerateStrategy(max_points=0, max_work=WORK_BEFORE_Z3),
        weaken.BoxParts(),
        Simplified(Z3Strategy(), reductions),
        PiecesStrategy(),
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
            weakened = None if deadline.expired() else self._weakened(problem, deadline)
            if weakened is not None:
                result = replace(weakened, seconds=time.perf_counter() - start)
                with self._lock:
                    self._cache[problem.key] = result
                return result
            reasons.insert(0,
                           "float arithmetic that is not exact in doubles over the ranges (only enumeration "
                              "evaluates it exactly; the other stages bound it)")
        return Verdict(Status.UNKNOWN, self.name, time.perf_counter() - start, "; ".join(reasons))

    def _weakened(self, problem: Problem, deadline: Deadline) -> Verdict | None:
        """The verdict of an easier question that settles ``problem`` (``weaken``), or None."""
        vacuous = weaken.float_free_facts(problem)
        if vacuous is not None:
            verdict = self(vacuous, deadline)
            if verdict.proven:
                return replace(verdict, reason=f"{verdict.reason} (the facts without floats hold nowhere)")
        easier = weaken.without_float_facts(problem)
        if easier is not None:
            verdict = self(easier, deadline)
            if verdict.proven:
                return replace(verdict, reason=f"{verdict.reason} (without the facts on floats, which only "
                                               "restrict)")
            if verdict.refuted:
                point = _point(verdict, easier.symbols)
                found = self._refuted(problem, self._extended(problem, point, deadline), verdict,
                                      "without the facts on floats, which hold there too")
                if found is not None:
                    return found
        split = self._split(problem, deadline)
        if split is not None:
            return split
        part = weaken.exact_part(problem)
        if part is not None and not part.has_floats and not deadline.expired():
            verdict = self(part, deadline)
            if verdict.refuted:
                point = _point(verdict, part.symbols)
                return self._refuted(problem, point, verdict,
                                     "in the part of the ranges where doubles are exact")
        return None

    def _split(self, problem: Problem, deadline: Deadline) -> Verdict | None:
        """Proven in every case of ``weaken.cases``, or refuted in one; None otherwise."""
        reasons: dict[str, None] = {}
        for values, case in weaken.cases(problem) or ():
            verdict = self(case, deadline)
            if verdict.refuted:
                point = {**values, **_point(verdict, case.symbols)}
                return self._refuted(problem, self._extended(problem, point, deadline), verdict,
                                     f"at {', '.join(f'{s} = {v}' for s, v in values.items())}")
            if not verdict.proven:
                return None
            reasons[verdict.reason] = None
        if not reasons:
            return None
        return Verdict(Status.PROVEN, "cascade", 0.0, f"in each case of {', '.join(s.name for s in values)}: "
                       + "; ".join(reasons))

    def _extended(self, problem: Problem, point: dict, deadline: Deadline) -> dict | None:
        """``point`` with values for the symbols it lacks where ``problem``'s facts hold, or None (a symbol
        no fact then mentions takes its value nearest to 0)."""
        missing = [s for s in problem.symbols if s not in point]
        if not missing:
            return point
        question = weaken.witness(problem, point)
        verdict = self(question, deadline)
        if not verdict.refuted:
            return None
        found = _point(verdict, question.symbols)
        return {**point, **{s: found[s] if s in found else weaken.nearest_zero(*problem.ranges[s])
                            for s in missing}}

    def _refuted(self, problem: Problem, point: dict | None, found: Verdict, how: str) -> Verdict | None:
        """``found``'s refutation at ``point`` as one of ``problem``, if it is one there (checked in
        Python, as every counterexample is)."""
        if point is None or check_counterexample(problem, point) is not None:
            return None
        return Verdict(Status.REFUTED, found.strategy, found.seconds, f"{found.reason} ({how})",
                       {s.name: int(point[s]) for s in problem.symbols})

    def _budget(self, i: int, problem: Problem, deadline: Deadline) -> Deadline:
        """Half the time left when a later stage is sure to decide given time, or easier questions follow
        (a float question's): an SMT call that runs out must not starve an enumeration that settles the
        same box."""
        later = self.stages[i + 1:]
        if problem.has_floats or any(isinstance(s, EnumerateStrategy) and s.covers(problem) for s in later):
            return deadline.share(0.5)
        return deadline

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()


def _point(verdict: Verdict, symbols) -> dict:
    """The refuted ``verdict``'s counterexample, by symbol."""
    assert verdict.counterexample is not None
    return {s: verdict.counterexample[s.name] for s in symbols}
