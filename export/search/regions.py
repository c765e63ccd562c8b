"""Regions of the declared ranges that need different programs, found by tracing again.

A trace at one example records guards; the conjunction of those not proven
over the declared ranges is the *region* where the traced program is valid.
When the regions found so far do not cover the declared ranges, the solver
returns a point outside all of them, and the model is traced again with
example sizes taken from that point.  A program that computes another
trace's function on that trace's region is valid on the union of both
regions: when the graphs are identical (a guard that only chose between
identical code paths, a short-circuit ``and``), or when they agree up to
exact identities (``merge.py``: the padding side of ``if H % ws: pad``
serves the side that needs no padding, where it pads by 0 and slices
nothing off).  A guard separating such traces is not a restriction of the
program.

Regions are formulas over *canonical* input variables, one per input dim the
user can set (the Dim name, else the input path), so regions from different
traces are comparable.  The search stops when the solver proves that the
regions cover the declared ranges, when more than ``max_regions`` distinct
programs are found, or after ``max_traces`` traces that no program served
(several traces often give one program: each trace's region is only as wide
as its own guards, so every combination of pad branches is traced once).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from functools import partial

from sympy import Expr, Symbol

from shapeproof import solver as F      # the solver's facade: conditions, questions, guard code
from shapeproof.solver import holding_grid, prove, symbol, truth
from shapeproof.tracer.module_state import ModuleState
from shapeproof.tracer.probe import failure_at

from .inputs import input_sizes, inputs_at
from ..programs.merge import Merge, could_unify, serves
from ..progress import TraceProgress, point_str, wanted
from .trace_pool import (
    PATIENCE, SLACK, Child, RayTask, ShippedFailure, plain_fields, program_bytes, program_from, workers_of,
)
from .traces import LocalTrace, Trace, buffer_ids, buffer_names, tidy, trace
from ..settings import ExportSettings

# A coverage question is asked once per trace (seconds each) and unions of regions are
# the hardest queries of an export (measured: a 437,500-point box over a Swin window
# partition ran out at 2 s), so it gets more time than a guard.
COVERAGE_TIMEOUT = 30.0
# the next trace is taken at sizes up to NEAR times the first example's (plus NEAR_SLACK) where the regions
# leave such a point uncovered: a Dim.AUTO dim is unbounded
NEAR, NEAR_SLACK = 4, 64
# Several traces often give one program (identical graphs, or a program that serves another trace's
# region), so a search may take this many traces per program allowed, whatever else it counts.
TRACES_PER_REGION = 3
# Traces run side by side only where the first took this many seconds: a child's fork, and its program's
# trip back through torch's pickler, cost a few tenths of a second (measured on small models).
SIDE_BY_SIDE_WORTH = 1.0

@dataclass
class Region:
    """Where one program is valid: the union of the regions of the traces that produced it."""

    traces: list[Trace]
    predicate: F.Formula               # disjoint from the regions before it (dispatch order)

    @property
    def program(self):
        return self.traces[0].program


@dataclass
class RegionSearch:
    traces: list[Trace]
    regions: list[Region] = field(default_factory=list)
    covered: bool = False
    reason: str = ""                   # why the search stopped without covering the ranges
    merges: list[str] = field(default_factory=list)   # programs found to serve other traces' regions
    programs: Programs | None = None                   # the traces grouped by the program serving them

    @property
    def box(self) -> dict[Symbol, tuple]:
        """The declared ranges, an open upper end cut at the largest size a tensor has (an int64): the
        solver refutes a float guard over an unbounded range past the largest double, where Python raises,
        and no input has such a size."""
        return {s: (lo, sys.maxsize if hi is None else hi) for s, (lo, hi) in self.traces[0].ranges.items()}

    def describe(self, width: int | None = None) -> list[str]:
        """One line per region; predicates longer than ``width`` characters are cut (Swin's run to 36 KB)."""
        lines = []
        for i, region in enumerate(self.regions, 1):
            at = "; ".join(point_str(t.point) for t in region.traces)
            text = str(region.predicate)
            if width is not None and len(text) > width:
                text = f"{text[:width]}... ({len(text)} characters in all)"
            lines.append(f"region {i}: {text} (traced at {at})")
        return lines


def search_regions(model, args, kwargs, spec, first: LocalTrace, settings: ExportSettings, *,
                   max_total: int | None = None, one_program_only: bool = False,
                   widen_while: float | None = None) -> RegionSearch:
    """Trace at points outside the regions found so far until they cover the declared ranges.

    No trace starts after ``settings.stop_at``: the caller's time budget.  ``settings.progress`` shows a
    bar of traces on stderr (``progress.py``).  With ``settings.workers`` above 1 (None: the executor's
    default, ``trace_pool.workers_of``, asked only once a search would trace side by side), up to that many
    points are traced side by side (``trace_pool.py``, ``_more_points``), in forked children or, with
    ``executor="ray"``, Ray tasks; a trace made there is read like one made here, in turn, if its point is
    still outside every region by then.

    The traces that no identity merged into an earlier program are bounded by ``max_regions``, or with
    ``split`` by ``TRACES_PER_REGION * max_regions``; ``max_total`` (default
    ``TRACES_PER_REGION * max_regions``) bounds all of them.  With
    ``one_program_only`` the search stops once two programs differ in a way
    no later trace could unify (the caller can only use a single program
    valid everywhere).  ``widen_while``: past ``max_total`` the search goes on
    (up to the default bound) while every trace so far joined one program and
    the regions leave at least this share of the declared box uncovered.
    """
    strategy, timeout, max_regions = settings.strategy, settings.timeout, settings.max_regions
    stop_at, workers = settings.stop_at, settings.workers
    max_traces = TRACES_PER_REGION * max_regions if settings.split else max_regions
    bound = max(max_traces, TRACES_PER_REGION * max_regions)
    max_total = bound if max_total is None else max_total
    search = RegionSearch([first])
    programs = Programs(search.box, strategy, timeout)
    programs.add(first)
    bar = TraceProgress(wanted(settings.progress), max_total)
    bar.traced(first.point, 1, first.seconds)
    failing = _where_the_model_fails(model, args, kwargs, first)
    pending: list[tuple[dict[str, int], Child | RayTask]] = []     # points traced elsewhere, in order
    try:
        while True:
            if failing is not None:
                point, failure = failing
                where = point_str({**first.point, **point})
                search.reason = (f"at {where} the model itself fails (run at those shapes on fake tensors): "
                                 f"{_first_line(failure)}")
                break
            count = len(programs.groups)
            if count > max_regions:
                search.reason = f"more than max_regions={max_regions} distinct programs"
                break
            if one_program_only and count > 1 and not programs.may_unify():
                search.reason = f"a second, different program was needed: {programs.apart()}"
                break
            regions = [t.region for t in search.traces if t.region is not None]
            if len(regions) < len(search.traces):
                search.reason = "a guard depends on something other than input sizes"
                break
            verdict = prove(F.disj(*regions), ranges=search.box, strategy=strategy,
                            timeout=max(timeout, COVERAGE_TIMEOUT))
            if verdict.proven:
                search.covered = True
                break
            if not verdict.refuted:
                search.reason = ("the solver could not decide whether the regions cover the ranges "
                                 f"({verdict.reason})")
                break
            spent = len(search.traces) >= max_total and not (
                len(search.traces) < bound and _worth_widening(programs, regions, search.box, widen_while))
            if len(search.traces) - programs.merged >= max_traces or spent:
                search.reason = (f"{len(search.traces)} traces ({count} distinct programs) did not cover the "
                                 f"declared ranges (max_regions={max_regions})")
                break
            found = _answered(pending, F.neg(F.disj(*regions)), model, first, stop_at)
            if found is None:
                if stop_at is not None and time.perf_counter() >= stop_at:
                    search.reason = f"the time budget ran out after {len(search.traces)} traces"
                    break
                assert verdict.counterexample is not None, "a refuted verdict has a counterexample"
                counterexample = _next_point(first, regions, search.box, verdict.counterexample, strategy,
                                             timeout)
                point = {**first.point, **counterexample}
                tied = sorted(set(counterexample) - settable(first.sizes))
                if tied:
                    search.reason = (f"no inputs realize {point_str(counterexample)}: torch ties "
                                     f"{', '.join(tied)} to other dims")
                    break
                try:
                    new_args, new_kwargs = inputs_at(model, args, kwargs, input_sizes(first.sizes, point))
                except (OSError, MemoryError, OverflowError) as exc:    # past int64: no tensor has that size
                    search.reason = f"inputs at {point_str(point)} do not fit in memory ({_first_line(exc)})"
                    break
                apart = len(search.traces) - programs.merged
                room = min(max_total - len(search.traces), max_traces - apart)
                side = 1
                if room > 1 and first.seconds >= SIDE_BY_SIDE_WORTH:
                    workers = workers_of(settings.executor) if workers is None else workers  # Ray starts here
                    side = min(workers, room)
                for other, call in _more_points(model, args, kwargs, first, regions, search.box,
                                                counterexample, side - 1, strategy, timeout):
                    elsewhere = _side_trace(model, call, spec, settings, first)
                    if elsewhere is None:
                        break
                    pending.append((other, elsewhere))
                found = trace(model, new_args, new_kwargs, spec, settings, after=first)
            search.traces.append(found)
            if found.program is None:
                assert found.failure is not None          # a trace without a program says why
                search.reason = (f"at {point_str(found.point)} the model itself cannot be traced: "
                                 f"{_first_line(found.failure)}")
                break
            if found.region is None or truth(found.region, found.at) is not True:
                search.reason = f"the trace at {point_str(found.point)} does not hold at its own example"
                break
            programs.add(found)
            bar.traced(found.point, len(programs.groups), found.seconds)
    finally:
        for _, child in pending:
            child.end()
    bar.close()
    search.regions = _regions(programs.groups, search.box)
    search.merges = programs.log
    search.programs = programs
    return search


def _side_trace(model, call: tuple[tuple, dict], spec, settings: ExportSettings,
                first: LocalTrace) -> Child | RayTask | None:
    """A trace at ``call``'s inputs, continuing ``first``, under way in a forked child or a Ray task; None
    where this process may not have a child (multiprocessing refuses one to a daemonic process, the system
    may refuse a fork)."""
    if settings.executor == "ray":
        first.started_from.restore()          # Ray pickles the model as it is now
        carried = (buffer_names(model, first.followed_buffers), first.unmerged)
        return RayTask(traced_elsewhere, model, *call, spec, settings, carried)
    run = partial(trace, model, *call, spec, settings, after=first)
    try:
        return Child(run, partial(_shipped, model=model))
    except (AssertionError, OSError):
        return None


def traced_elsewhere(model, args: tuple, kwargs: dict, spec, settings: ExportSettings,
                     carried: tuple[frozenset[str], frozenset]) -> dict:
    """A Ray task: a trace continuing ``carried`` (``trace``), shipped."""
    return _shipped(trace(model, args, kwargs, spec, settings, carried=carried), model)


def _answered(pending: list[tuple[dict[str, int], Child | RayTask]], outside: F.Formula, model,
              first: LocalTrace, stop_at: float | None) -> Trace | None:
    """The trace of the first child in ``pending`` whose point is still ``outside`` the regions, once it
    answers (None: no child answered); children whose points the regions now cover are ended unread."""
    while pending:
        point, child = pending.pop(0)
        if truth(outside, {symbol(k): v for k, v in point.items()}) is not True:
            child.end()
            continue
        until = child.started + PATIENCE * first.seconds + SLACK
        data = child.answer(until if stop_at is None else min(until, max(stop_at, time.perf_counter())))
        if data is None:
            continue
        try:
            return _unshipped(data, model, first.started_from)
        except Exception:                   # noqa: BLE001 -- a program that does not load is no answer
            continue
    return None


def _more_points(model, args, kwargs, first: LocalTrace, regions: list[F.Formula], box: dict,
                 counterexample: dict, count: int, strategy: str, timeout: float) -> list[tuple[dict, tuple]]:
    """Up to ``count`` more points to trace beside ``counterexample``, each with its inputs: each outside
    the regions and outside the *cell* of every point chosen before it (where the first trace's guards
    fall as they do at that point, the region its trace will most likely have), so that each trace side by
    side likely finds a region of its own."""
    points: list[tuple[dict, tuple]] = []
    guessed, last = list(regions), counterexample
    for _ in range(count):
        guessed.append(_cell(first, {**first.point, **last}))
        verdict = prove(F.disj(*guessed), ranges=box, strategy=strategy, timeout=timeout)
        if not verdict.refuted or not verdict.counterexample:
            break
        last = _next_point(first, guessed, box, verdict.counterexample, strategy, timeout)
        point = {**first.point, **last}
        if set(last) - settable(first.sizes):
            break
        try:
            points.append((point, inputs_at(model, args, kwargs, input_sizes(first.sizes, point))))
        except (OSError, MemoryError, OverflowError):
            break
    return points


def _cell(first: LocalTrace, point: dict[str, int]) -> F.Formula:
    """The first trace's guards, each as it falls at ``point`` (those it cannot judge there left out)."""
    at = {symbol(k): v for k, v in point.items()}
    guards = first.region.args if isinstance(first.region, F.And) else (first.region,)
    sides = []
    for guard in guards:
        holds = truth(guard, at) if guard is not None else None
        if holds is not None:
            sides.append(guard if holds else F.neg(guard))
    return F.conj(*sides)


# what a trace made in a child (or a Ray task) keeps there: its engine and torch's shape environment
# (``Trace`` has neither), the model state it started from (the search's is the same), and objects that
# do not pickle as they are (the program goes as bytes, a failure as its first line)
_LEFT_IN_THE_CHILD = {"engine", "torch_env", "report", "started_from", "program", "failure"}


def _shipped(t: LocalTrace, model) -> dict:
    """The plain data of ``t``, pickled to the search's process; buffers by name, not by object."""
    data = plain_fields(t, _LEFT_IN_THE_CHILD)
    data["followed_buffers"] = buffer_names(model, t.followed_buffers)
    data["program"] = None if t.program is None else program_bytes(t.program, model)
    data["failure"] = None if t.failure is None else _first_line(t.failure)
    return data


def _unshipped(data: dict, model, started_from: ModuleState) -> Trace:
    """A trace from ``_shipped`` data; its program holds ``model``'s own weights (``program_from``)."""
    data = dict(data)
    data["followed_buffers"] = buffer_ids(model, data["followed_buffers"])
    shipped, failure = data.pop("program"), data.pop("failure")
    program = None if shipped is None else program_from(shipped, model)
    return Trace(program=program, failure=None if failure is None else ShippedFailure(failure),
                 started_from=started_from, **data)


def _worth_widening(programs: Programs, regions: list[F.Formula], box: dict, share: float | None) -> bool:
    """Whether one more trace may pay: every trace so far joined one program, and the inputs no region
    covers are at least ``share`` of the box (counted; not where the box is too large to count)."""
    if share is None or len(programs.groups) != 1:
        return False
    left = holding_grid(F.neg(F.disj(*regions)), box)
    return left is not None and left.share >= share


class Programs:
    """Traces grouped by a program that serves them all (``merge.serves``), in discovery order.

    The first member of a group is its program.  A new trace joins the first
    group whose program serves it; otherwise it becomes the program of every
    group it serves entirely (merging them), or starts a group of its own.
    """

    def __init__(self, box: dict, strategy: str, timeout: float):
        self.box, self.strategy, self.timeout = box, strategy, timeout
        self.groups: list[list[Trace]] = []
        self.log: list[str] = []               # one line per merge, with what it took
        self.merged = 0                        # traces an identity merge put into an earlier program
        self._answers: dict = {}

    def serves(self, a: Trace, b: Trace) -> Merge:
        key = (id(a), id(b))
        if key not in self._answers:
            self._answers[key] = serves(a, b, self.box, self.strategy, max(self.timeout, COVERAGE_TIMEOUT),
                                        self.timeout)
        return self._answers[key]

    def add(self, t: Trace) -> None:
        if t.fingerprint is None or t.region is None:
            return
        for group in self.groups:
            answer = self.serves(group[0], t)
            if answer.ok:
                group.append(t)
                self._note(group[0], t, answer)
                self.merged += answer.reason != "identical graphs"
                return
        served = [g for g in self.groups if all(self.serves(t, m).ok for m in g)]
        for g in served:
            self._note(t, g[0], self.serves(t, g[0]))
        self.merged += bool(served)
        merged = [t] + [m for g in served for m in g]
        rest = [g for g in self.groups if all(g is not s for s in served)]
        at = self.groups.index(served[0]) if served else len(self.groups)
        self.groups = rest[:at] + [merged] + rest[at:]

    def _note(self, a: Trace, b: Trace, answer: Merge) -> None:
        if answer.reason != "identical graphs":
            self.log.append(f"the program traced at {point_str(a.point)} serves the region traced at "
                            f"{point_str(b.point)} ({answer.reason}, {answer.seconds:.1f} s)")

    def may_unify(self) -> bool:
        """Whether a later trace might still serve every group (no difference is known to be real)."""
        first = self.groups[0][0]
        return all(could_unify(first, g[0]) for g in self.groups[1:])

    def apart(self) -> str:
        """Why the first two programs stay apart, both ways, for messages."""
        a, b = self.groups[0][0], self.groups[1][0]
        return (f"the program traced at {point_str(a.point)} does not serve {point_str(b.point)} "
                f"({self.serves(a, b).reason}), nor the other way round ({self.serves(b, a).reason})")


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"


def _where_the_model_fails(model, args, kwargs, first: LocalTrace) -> tuple[dict, Exception] | None:
    """A counterexample of the first trace's guards where the model does not even run, with its exception
    (``probe.py``).

    It ends the search at once (fail fast): no program serves inputs the
    model fails on, and traces at the other counterexamples cannot change
    that.  Probing stops after a quarter of the first trace's time.
    """
    until = time.perf_counter() + first.seconds / 4
    points = []
    for violation in first.report.violations:
        point = violation.counterexample
        if point and point.keys() <= settable(first.sizes) and point not in points:
            points.append(point)
    for point in points:
        if time.perf_counter() > until:
            break
        sizes = input_sizes(first.sizes, {**first.point, **point})
        try:
            inputs = inputs_at(model, args, kwargs, sizes)
        except (OSError, MemoryError, OverflowError):
            continue                    # a counterexample far out in a declared range: not probed
        first.started_from.restore()
        failure = failure_at(model, *inputs)
        if failure is not None:
            return point, failure
    return None


def near(box: dict, point: dict[str, int]) -> dict:
    """``box`` cut to sizes at most ``NEAR`` times the example's (plus ``NEAR_SLACK``) where it reaches
    further: a ``Dim.AUTO`` dim has no upper end, and a solver's counterexample there can be inputs of
    terabytes."""
    cut = {}
    for s, (lo, hi) in box.items():
        example = point.get(s.name)
        top = None if example is None else max(NEAR * example, example + NEAR_SLACK)
        cut[s] = (lo, hi if top is None or (hi is not None and hi <= top) else top)
    return cut


def _inside(point: dict[str, int], box: dict) -> bool:
    """Whether ``point`` (by variable name) lies in ``box`` (by variable) on every dim they share."""
    return all((lo is None or lo <= point[s.name]) and (hi is None or point[s.name] <= hi)
               for s, (lo, hi) in box.items() if s.name in point)


def _next_point(first: Trace, regions: list, box: dict, counterexample: dict, strategy: str,
                timeout: float) -> dict:
    """Where to trace next: outside ``regions`` (``counterexample`` is one such point), on the other side
    of every branch of the first trace where there is one (``_other_side``), near its example if possible
    (``near``)."""
    nearby = near(box, first.point)
    for where in (nearby, box):
        found = _other_side(first, regions, where, strategy, timeout)
        if found is not None:
            return found
    covered = F.disj(*regions)
    return toward(covered, nearer(covered, counterexample, nearby, strategy, timeout), first.point, box)


def toward(covered: F.Formula, point: dict[str, int], example: dict[str, int], box: dict) -> dict[str, int]:
    """``point`` (outside ``covered``) moved toward ``example``, one variable at a time, as far as it stays
    outside: the solver's corner crosses every guard at once (a 2x2 image, which a strided model cannot
    even trace), a point next to the example crosses one (64x32 for a 64x64 example)."""
    by_name = {s.name: s for s in box}

    def outside(p: dict[str, int]) -> bool:
        return truth(covered, {by_name[n]: v for n, v in p.items() if n in by_name}) is False

    current = dict(point)
    for name, goal in example.items():
        if name not in by_name or name not in current or current[name] == goal:
            continue
        if outside({**current, name: goal}):
            current[name] = goal
            continue
        known, beyond = current[name], goal          # outside at ``known``, not at ``beyond``
        while abs(beyond - known) > 1:
            middle = (known + beyond) // 2
            if outside({**current, name: middle}):
                known = middle
            else:
                beyond = middle
        current[name] = known
    return current


def nearer(goal: F.Formula, counterexample: dict, nearby: dict, strategy: str, timeout: float) -> dict:
    """A counterexample of ``goal`` inside ``nearby`` (``near``) where there is one, else
    ``counterexample`` (one found over a wider box)."""
    if _inside(counterexample, nearby):
        return counterexample
    verdict = prove(goal, ranges=nearby, strategy=strategy, timeout=timeout)
    return verdict.counterexample if verdict.refuted and verdict.counterexample else counterexample


def _other_side(first: Trace, regions: list, box: dict, strategy: str, timeout: float) -> dict | None:
    """A point outside ``regions`` on the other side of every Python branch of the first trace, where the
    first trace's other guards hold (None if there is none).

    With pad branches this is where every pad is taken and no size-1 edge is
    crossed: the trace there has the most general code, and its program
    serves most of the others.  Genuinely different paths come out early too.
    """
    if not first.branches:
        return None
    others = [g for g in (first.region.args if isinstance(first.region, F.And) else (first.region,))
              if g not in first.branches]
    goal = F.disj(*regions, F.neg(F.conj(*(F.neg(b) for b in first.branches), *others)))
    verdict = prove(goal, ranges=box, strategy=strategy, timeout=timeout)
    return verdict.counterexample if verdict.refuted else None


def settable(sizes: dict[str, Expr]) -> set[str]:
    """Canonical variables some input dim is a function of alone (``x.size(0) = 32*k`` sets ``k``).

    A variable torch tied to another dim while tracing (``x + y`` makes
    ``y.size(0)`` read as ``x.size(0)``) has no input of its own, so a point
    giving it a value of its own cannot be traced.
    """
    return {next(iter(term.free_symbols)).name for term in sizes.values() if len(term.free_symbols) == 1}


def union_of(members: list[Trace]) -> F.Formula:
    """The union of the regions of a group of traces (``Programs.add`` groups only traces that have one)."""
    parts = []
    for t in members:
        assert t.region is not None, "a grouped trace has a region"
        parts.append(t.region)
    return F.disj(*parts)


def _regions(groups: list[list[Trace]], box: dict) -> list[Region]:
    """One region per program, in discovery order, each made disjoint from those before it."""
    regions: list[Region] = []
    before: F.Formula = F.FALSE
    for members in groups:
        union = union_of(members)
        regions.append(Region(members, tidy(F.conj(union, F.neg(before)), box)))
        before = F.disj(before, union)
    return regions


def check_partition(predicates: list[F.Formula], box: dict, *, strategy="cascade",
                    timeout: float = COVERAGE_TIMEOUT) -> list[str]:
    """Problems with ``predicates`` as a dispatch table over ``box``: gaps and overlaps, with a witness each.

    Empty when the solver proves that they cover the box and are pairwise
    disjoint; an undecided question is reported as a problem too.
    """
    problems = []
    cover = prove(F.disj(*predicates), ranges=box, strategy=strategy, timeout=timeout)
    if not cover.proven:
        problems.append(f"not covered: {cover.counterexample or cover.reason}")
    for i in range(len(predicates)):
        for j in range(i + 1, len(predicates)):
            apart = prove(F.neg(F.conj(predicates[i], predicates[j])), ranges=box, strategy=strategy,
                          timeout=timeout)
            if not apart.proven:
                problems.append(f"regions {i + 1} and {j + 1} overlap: "
                                f"{apart.counterexample or apart.reason}")
    return problems
