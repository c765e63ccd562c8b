"""The widest part of the declared ranges that one program serves, when the whole of them needs several.

A region search without ``split`` stops at the first two programs no
identity unifies (Swin: patch padding ``4 - W % 4`` is not 0 where ``W % 4 ==
0``; inputs no larger than a window take another path).  The error should
then offer the widest ranges where *one* program works, not the narrow ones
the first trace's guards ask for: most of the first trace's violated guards
are pad branches that another trace's program serves, and only a few are
genuine code paths.

Each violated guard is tried alone: a trace where it is false and the
others hold tells whether the first program's group serves that side
(identity merge) or not (a genuine path: the guard becomes a restriction).
The joint fix of the genuine guards is then *verified*: the solver must
prove that its box lies inside the union of the regions the first program's
group serves, tracing again at any point it finds outside; then each of its
bounds moves out as far as the same proof, with no new trace, shows those
regions reach.  The error holds the serving program, checking its inputs
against that box.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from torch.export import ExportedProgram

from shapeproof import solver as F      # the solver's facade: conditions, questions
from shapeproof.shapes import Fix, FixKind, dim_fix, joint_fixes
from shapeproof.solver import Mod, prove, symbol, truth

from ..progress import point_str
from .checks import python_guard, variable_sources
from .inputs import input_sizes, inputs_at
from .regions import COVERAGE_TIMEOUT, TRACES_PER_REGION, RegionSearch, near, nearer, settable, union_of
from ..settings import ExportSettings
from .traces import LocalTrace, Trace, canonical, set_input_checks, trace

__all__ = ["Narrowing", "widest_single_program"]

# A violated guard one of whose fixes keeps this share of the declared ranges is taken as a genuine
# restriction without a trace of its other side: that trace costs as much as the export and could win
# back at most the rest (the sizes 2 and 3 that a 0/1 guard such as ``T // 4 != 1`` excludes).
NOT_WORTH_A_TRACE = 0.99


@dataclass
class Narrowing:
    """A verified restriction of the declared ranges under which one program serves every input."""

    fixes: list[Fix]
    program_point: dict[str, int]     # where the serving program was traced
    traces: int                       # traces the narrowing took (beyond the search's)
    seconds: float
    # the serving program, checking its inputs against the fixes: no export again (which would trace again)
    program: ExportedProgram | None = field(default=None, repr=False)

    def describe(self) -> str:
        return ("one program (traced at " + point_str(self.program_point) + ") serves every input with "
                + "; ".join(f.description for f in self.fixes)
                + f" (verified by the solver over the traces' regions; {self.traces} more trace(s), "
                  f"{self.seconds:.1f} s)")


def fix_predicate(fixes: list[Fix]) -> F.Formula | None:
    """The inputs a list of spec fixes allows, over canonical variables (None for a fix that is no box)."""
    parts = []
    for fix in fixes:
        s = symbol(fix.dim)
        if fix.kind in (FixKind.RANGE, FixKind.MULTIPLE):
            lo, hi, step, rest = _sizes(fix)
            parts += [F.eq(Mod(s, step), rest)] if fix.kind is FixKind.MULTIPLE else []
            parts += [F.ge(s, lo)] if lo is not None else []
            parts += [F.le(s, hi)] if hi is not None else []
        elif fix.kind is FixKind.STATIC:
            parts.append(F.eq(s, fix.value))
        else:
            return None
    return F.conj(*parts)


def _kept(fixes: list[Fix]) -> float:
    """The share of the declared ranges the fixes keep (a static dim keeps nothing)."""
    return math.prod(0.0 if f.kind is FixKind.STATIC else 1.0 if f.kept is None else f.kept for f in fixes)


def _best_kept(violation) -> float:
    """The largest share of the declared ranges one of the violation's own fixes keeps."""
    return max((f.kept for f in violation.fixes if f.kept is not None), default=0.0)


class _Narrower:
    def __init__(self, model, args, kwargs, spec, first: LocalTrace, search: RegionSearch,
                 settings: ExportSettings, *, stop_at: float | None, max_traces: int | None):
        self.model, self.args, self.kwargs, self.spec = model, args, kwargs, spec
        assert search.programs is not None, "search_regions groups the traces it made"
        self.first, self.programs = first, search.programs
        self.traces = list(search.traces)
        self.settings, self.stop_at = settings, stop_at
        self.strategy, self.timeout = settings.strategy, settings.timeout
        self.box = search.box
        self.nearby = near(search.box, first.point)
        self.added = 0
        self.unfit: str | None = None     # inputs at a point the solver chose did not fit in memory
        self.max_added = max_traces
        canon = canonical(first.engine)
        self.guards = [(v, F.substitute(v.lifted, canon)) for v in first.report.violations]

    def group(self) -> list[Trace]:
        """The traces the first trace's program (or one that replaced it) serves."""
        return next(g for g in self.programs.groups if any(t is self.first for t in g))

    def served(self, t: Trace) -> bool:
        return any(member is t for member in self.group())

    def group_region(self) -> F.Formula:
        return union_of(self.group())

    def trace_cost(self) -> float:
        """Seconds a trace takes here (the mean of the search's traces)."""
        return sum(t.seconds for t in self.traces) / len(self.traces)

    def spent(self) -> bool:
        out_of_time = self.stop_at is not None and time.perf_counter() + self.trace_cost() > self.stop_at
        return out_of_time or self.unfit is not None or (self.max_added is not None
                                                          and self.added >= self.max_added)

    def counterexample(self, goal: F.Formula, timeout: float | None = None) -> tuple[bool, dict | None]:
        """Whether ``goal`` is proven over the box, else a point where it fails (None: undecided), near
        the first example where there is one (``regions.near``: the box may reach sizes whose inputs do
        not fit in memory)."""
        timeout = self.timeout if timeout is None else timeout
        verdict = prove(goal, ranges=self.box, strategy=self.strategy, timeout=timeout)
        if not verdict.refuted:
            return verdict.proven, None
        assert verdict.counterexample is not None, "a refuted verdict has a counterexample"
        return False, nearer(goal, verdict.counterexample, self.nearby, self.strategy, timeout)

    def trace_at(self, counterexample: dict) -> Trace | None:
        if self.spent():
            return None
        point = {**self.first.point, **counterexample}
        if set(counterexample) - settable(self.first.sizes):
            return None
        try:
            args, kwargs = inputs_at(self.model, self.args, self.kwargs, input_sizes(self.first.sizes, point))
        except (OSError, MemoryError) as exc:
            self.unfit = f"inputs at {point_str(point)} do not fit in memory ({exc})"
            return None
        found = trace(self.model, args, kwargs, self.spec, self.settings, after=self.first)
        self.traces.append(found)
        self.added += 1
        self.programs.add(found)
        return found

    def side_of(self, guard: F.Formula, others: F.Formula) -> Trace | None:
        """A trace where ``guard`` is false and ``others`` hold: one already made, else a new one."""
        for t in self.traces:
            if truth(guard, t.at) is False and truth(others, t.at) is True and t.program is not None:
                return t
        _, point = self.counterexample(F.disj(guard, F.neg(others)))
        return None if point is None else self.trace_at(point)

    def genuine(self) -> list | None:
        """The violated guards whose other side the first program does not serve (None: budget spent).

        A side whose program serves the first trace (by identities) but not
        every trace of its group may still be served by a more general trace:
        Swin's window pads at two stages each need the other's pad to be
        served.  One trace where every guard that may merge is on its other
        side at once decides them together (``_trace_every_side``).  A side
        the group serves but whose own program does not serve the first trace
        is a special path, not a pad (Swin V2's single window at 32 pixels):
        that guard stays on the first trace's side there.
        """
        found: list = []
        maybe: list = []
        special: list = []
        restriction: F.Formula = F.TRUE
        sides: dict[int, Trace] = {}
        settled = self._settle_sites(sides)
        for i, (violation, guard) in enumerate(self.guards):
            if i in settled:
                if id(violation) in sides:
                    maybe.append(violation)
                continue
            if _best_kept(violation) >= NOT_WORTH_A_TRACE:
                found.append(violation)
                restriction = F.conj(restriction, guard)
                continue
            others = F.conj(restriction, *(g for j, (_, g) in enumerate(self.guards) if j != i))
            side = self.side_of(guard, others) or self.side_of(guard, restriction)
            if side is None:
                if self.spent():
                    return None
                continue                  # holds wherever the restriction does
            if self.served(side):
                if side is not self.first and not self.programs.serves(side, self.first).ok:
                    special.append(violation)
                continue
            if self.programs.serves(side, self.first).ok:
                maybe.append(violation)
                sides[id(violation)] = side
            else:
                found.append(violation)
                restriction = F.conj(restriction, guard)
        merging = [g for v, g in self.guards if all(v is not f for f in found + special)]
        if maybe or len(merging) > 1:
            self._trace_every_side(restriction, merging, [g for v, g in self.guards if id(v) in sides])
            found += [v for v in maybe if not self.served(sides[id(v)])]
        return found

    def sites(self) -> list[list[int]]:
        """The violated guards worth a trace, by the place that asked them: one list per Python branch
        (file and line), one per other guard."""
        by_site: dict[object, list[int]] = {}
        for i, (violation, _) in enumerate(self.guards):
            if _best_kept(violation) >= NOT_WORTH_A_TRACE:
                continue
            where = violation.guard.where
            frame = where.frame if where is not None and violation.guard.from_branch else None
            by_site.setdefault((frame.filename, frame.lineno) if frame is not None else i, []).append(i)
        return list(by_site.values())

    def _settle_sites(self, sides: dict) -> set[int]:
        """The guards settled by one trace per Python branch asked at several places of the model (Swin's
        window pad, in every block of every stage): where all of one site's guards are on their other
        side at once and the rest hold, a trace the first program's group serves merges them all, and
        one whose program serves the first trace makes them all ``maybe`` (their side recorded in
        ``sides``).  Any other outcome leaves the site's guards to be tried one by one."""
        settled: set[int] = set()
        for members in self.sites():
            if len(members) < 2:
                continue
            others = F.conj(*(g for j, (_, g) in enumerate(self.guards) if j not in members))
            side = self.side_of(F.disj(*(self.guards[j][1] for j in members)), others)
            if side is None or side is self.first:
                continue
            if self.served(side):
                if not self.programs.serves(side, self.first).ok:
                    continue              # a special path somewhere in the site: one by one
            elif self.programs.serves(side, self.first).ok:
                sides.update((id(self.guards[j][0]), side) for j in members)
            else:
                continue
            settled.update(members)
        return settled

    def _trace_every_side(self, restriction: F.Formula, merging: list, maybe: list) -> None:
        """Trace where every ``maybe`` guard, and as many others that may merge as can be with them, are
        on their other side at once.

        A trace specializes its program to the guards true at its example
        (``(H // 4) % 4 == 0`` rewrites ``H // 4`` as a multiple of 4 in every
        shape after it), so only a trace where no pad guard holds gives a
        program general enough to serve the mixed regions (a pad on W but not
        on H) as well as the others.  The guards, as the first trace states
        them, may not all flip together (Swin V2's window count and its
        stage-2 pad, both over ``H // 16``): each is added while some point
        still flips every one so far.
        """
        flipped: list = []
        point = None
        for guard in maybe + [g for g in merging if all(g is not m for m in maybe)]:
            every_side = F.conj(restriction, *(F.neg(g) for g in flipped + [guard]))
            _, found = self.counterexample(F.neg(every_side))
            if found is not None:
                flipped, point = flipped + [guard], found
        if point is None:
            return
        every_side = F.conj(restriction, *(F.neg(g) for g in flipped))
        if not any(truth(every_side, t.at) is True for t in self.traces):
            self.trace_at(point)

    def verified(self, allowed: F.Formula) -> bool:
        """Whether the first program's group serves every point of ``allowed``, tracing where unsure."""
        while True:
            proven, point = self.counterexample(F.disj(F.neg(allowed), self.group_region()),
                                                max(self.timeout, COVERAGE_TIMEOUT))
            if proven:
                return True
            if point is None:
                return False
            found = self.trace_at(point)
            if found is None or not self.served(found):
                return False

    def widened(self, fixes: list[Fix]) -> list[Fix]:
        """Verified ``fixes`` with each bound moved out as far as the traces made so far serve.

        The fixes solve the first trace's guards, which it states over shapes
        the guards true at its example specialized: traced where no pad is
        taken, Swin's window clamp on the padded half size reads as one on
        ``H // 8`` (H >= 48 where the padding program's clamp allows 36).  The
        coverage proof shows, with no new trace, how far the regions already
        served reach: bisection over each bound, one dim at a time.
        """
        region = self.group_region()
        dims = {info.label: info for info in self.first.engine.symbols.values()}
        chosen: list[Fix | None] = list(fixes)

        def covered(i: int, fix: Fix | None) -> bool:
            if self.stop_at is not None and time.perf_counter() >= self.stop_at:
                return False
            allowed = fix_predicate([f for f in chosen[:i] + [fix] + chosen[i + 1:] if f is not None])
            return allowed is not None and prove(F.disj(F.neg(allowed), region), ranges=self.box,
                                                 strategy=self.strategy, timeout=COVERAGE_TIMEOUT).proven

        for i, fix in enumerate(fixes):
            if fix.kind not in (FixKind.RANGE, FixKind.MULTIPLE) or fix.dim not in dims:
                continue
            info = dims[fix.dim]
            lo, hi, step, rest = _sizes(fix)
            (range_lo, range_hi), modulus = info.range, fix.modulus

            def with_bounds(a, b):
                return dim_fix(fix.dim, a, b, info.range, info.declared, modulus, rest)

            if lo is not None and range_lo is not None and lo - step >= range_lo:
                steps = (lo - range_lo) // step
                lo -= step * _largest(lambda k: covered(i, with_bounds(lo - k * step, hi)), steps)
            if hi is not None and range_hi is not None and hi + step <= range_hi:
                steps = (range_hi - hi) // step
                hi += step * _largest(lambda k: covered(i, with_bounds(lo, hi + k * step)), steps)
            chosen[i] = with_bounds(lo, hi)
        return [f for f in chosen if f is not None]


def _sizes(fix: Fix) -> tuple[int | None, int | None, int, int]:
    """A range or multiple fix's bounds on the dim's own sizes, with its step and remainder."""
    if fix.kind is FixKind.RANGE:
        return fix.min, fix.max, 1, 0
    step, rest = fix.modulus, fix.remainder
    assert step is not None, "a multiple fix has a modulus"
    return (None if fix.min is None else step * fix.min + rest,
            None if fix.max is None else step * fix.max + rest, step, rest)


def _largest(holds, most: int) -> int:
    """The largest ``k`` in ``[0, most]`` with ``holds(k)``, for ``holds`` true at 0 and monotone
    (bisection); only a ``k`` where it held is returned."""
    low, high = 0, most
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def widest_single_program(model, args, kwargs, spec, first: LocalTrace, search: RegionSearch,
                          settings: ExportSettings, *, stop_at: float | None,
                          capped: bool = True) -> tuple[Narrowing | None, str | None]:
    """The widest verified spec restriction under which the first trace's program serves every input.

    No trace starts when it would overrun ``stop_at`` (at the search's mean
    cost per trace); ``capped`` also bounds the traces to one per violated
    guard plus ``TRACES_PER_REGION`` (without a budget of the caller's).
    Returns the narrowing, else None: when the violations are not all
    input-dim guards, when no joint fix exists or it is no wider than the
    first trace's own, when the budget runs out, or when a trace inside the
    fix's box needs another program.  The second value is a note when the
    budget ran out before a wider candidate was found or verified (the caller
    may give more).
    """
    start = time.perf_counter()
    max_traces = len(first.report.violations) + TRACES_PER_REGION if capped else None
    narrower = _Narrower(model, args, kwargs, spec, first, search, settings, stop_at=stop_at,
                         max_traces=max_traces)
    inputs = set(canonical(first.engine).values())
    if (not narrower.guards or any(t.region is None for t in narrower.traces)
            or any(not g.free_symbols <= inputs for _, g in narrower.guards)):
        return None, None
    trials = len(narrower.sites())       # at least one trace each (``genuine``)
    if stop_at is not None and start + narrower.trace_cost() * trials > stop_at:
        # fail fast: trying each guard (each branch) alone would not fit the budget; say what it would take
        branches = sum(1 for v in first.report.violations if v.guard.from_branch)
        if not branches:
            return None, None
        return None, (f"one program may serve a wider range than these fixes: {branches} of the violated "
                      "guards are Python branches on sizes, which often choose between code paths that one "
                      f"program serves (pad branches); looking for it takes at least {trials} "
                      f"more traces (about {narrower.trace_cost():.0f} s each here), more than this export's "
                      "budget: export with a larger time_budget to look for it")
    needed = narrower.genuine()
    if narrower.unfit is not None:
        return None, f"looking for one program over a wider range stopped: {narrower.unfit}"
    if not needed:
        return None, None
    fixes = joint_fixes(first.engine, needed, settings.timeout)
    if not fixes:
        return None, None
    if first.report.combined_fixes is not None and _kept(fixes) <= _kept(first.report.combined_fixes):
        return None, None                 # no wider than what the first trace's own guards allow
    allowed = fix_predicate(fixes)
    if allowed is None:
        return None, None
    if not narrower.verified(allowed):
        if not narrower.spent():
            return None, None             # a point of the box needs another program
        if narrower.unfit is not None:
            return None, (f"one program may serve every input with {'; '.join(f.description for f in fixes)}"
                          f", but verifying it stopped: {narrower.unfit}")
        return None, (f"one program may serve every input with {'; '.join(f.description for f in fixes)}, "
                      f"but verifying it needs more traces than this export's budget allowed "
                      f"({narrower.added} more, {time.perf_counter() - start:.1f} s); export with a larger "
                      "time_budget to verify it")
    fixes = narrower.widened(fixes)
    serving = narrower.group()[0]
    check = python_guard(fix_predicate(fixes) or F.TRUE, variable_sources(first.sizes))
    if check is not None:
        set_input_checks(serving, check)
    return Narrowing(fixes, serving.point, narrower.added, time.perf_counter() - start,
                     serving.program if check is not None else None), None
