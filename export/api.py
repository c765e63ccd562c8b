"""``shapeproof.export``: torch.export's call, with shapeproof's engine deciding every shape question."""
from __future__ import annotations

import gc
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.export import ExportedProgram

import dataclasses

from shapeproof import solver as F
from shapeproof.shapes import (
    DimKind, GuardReport, Query, ShapeEnv, asserts_that_narrow, joint_fixes, lift, suggest_fixes,
)
from shapeproof.solver import DEFAULT_TIMEOUT
from shapeproof.tracer.module_state import ModuleState

from .search.acceptance import Acceptance, judge, share_note
from .errors import ExportError
from .search.narrow import NOT_WORTH_A_TRACE, widest_single_program
from .search.checks import accepted_sizes, python_guard, variable_sources
from .search.inputs import bound_arguments
from .search.regions import RegionSearch, search_regions
from .settings import ExportSettings
from .search.traces import LocalTrace, canonical, data_dependent_cause, set_input_checks, trace
from .search.zero_one import disagreement, moved_off_zero_one
from .specs import apply_fixes, normalize_spec
from .search.split import SplitProgram, split_program

__all__ = ["export", "export_with_report", "ExportResult", "suggest_dynamic_shapes"]

# region predicates in an error message are cut to this many characters (all of them are in error.regions)
REGION_WIDTH = 400
# Traces (the first included) that widen a program torch.export would restrict with input checks (over
# several named dims, or on Dim.AUTO/DYNAMIC dims), without split or a time_budget: ViT's
# `num_patches == num_positions and height == width` needs a third trace to cover the declared ranges,
# whose program differs and so widens nothing; a Swin under Dim.AUTO took 20 traces of 15 s each.
WIDENING_TRACES = 2


@dataclass
class ExportResult:
    """An exported program plus what the engine did to get it.

    ``program`` is torch's ``ExportedProgram``, or a ``SplitProgram`` (one
    member per region) when ``split=True`` needed several.  ``regions`` is the
    region search when the first trace's guards did not hold everywhere.
    """

    program: ExportedProgram | SplitProgram
    engine: ShapeEnv
    report: GuardReport
    seconds: float
    model_name: str = ""           # the model's class name, for reports
    regions: RegionSearch | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def discharged(self) -> list[Query]:
        """Questions the engine proved that torch's reasoning left open (``ShapeEnv.discharged``)."""
        return self.engine.discharged


_freezes = 0
_freezes_lock = threading.Lock()


@contextmanager
def _older_objects_frozen():
    """Keep the garbage collector's full collections off the objects alive when the export began.

    A full collection walks every live object (some 450,000 once torch and
    transformers are imported: 0.25 s, a quarter of a ViT trace), and an
    export's own allocations start one now and then; frozen, the older
    objects are not walked (nor freed) until the export ends.  Nested and
    concurrent exports share one freeze: the last to finish thaws.  A
    process that froze objects itself (a server before forking) manages
    freezing alone: thawing would thaw its objects too.
    """
    global _freezes
    with _freezes_lock:
        ours = _freezes > 0 or gc.get_freeze_count() == 0
        if ours:
            if _freezes == 0:
                gc.freeze()
            _freezes += 1
    try:
        yield
    finally:
        if ours:
            with _freezes_lock:
                _freezes -= 1
                if _freezes == 0:
                    gc.unfreeze()


@_older_objects_frozen()
def export_with_report(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, *,
                       dynamic_shapes=None, strict: bool = False,
                       preserve_module_call_signature: tuple[str, ...] = (),
                       prefer_deferred_runtime_asserts_over_guards: bool = False, strategy="cascade",
                       timeout: float = DEFAULT_TIMEOUT, split: bool = False, max_regions: int = 8,
                       time_budget: float | None = None, progress: bool = False,
                       workers: int | None = None, executor: str = "fork",
                       cond_branches: bool = True) -> ExportResult:
    """Like ``export``, returning the ``ExportResult`` (program, engine, guard report, time)."""
    _check_module(model)
    if strict:
        warnings.warn("shapeproof.export traces non-strict (strict=False): the engine decides shapes of the "
                      "Python code as it runs", stacklevel=2)
    settings = ExportSettings(
        strategy=strategy, timeout=timeout, split=split, max_regions=max_regions, time_budget=time_budget,
        progress=progress, workers=workers, executor=executor, cond_branches=cond_branches,
        preserve_module_call_signature=preserve_module_call_signature,
        prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards)
    spec = normalize_spec(dynamic_shapes, model, args, kwargs)
    first = trace(model, args, kwargs, spec, settings)
    # a dim declared dynamic whose example is 0 or 1 is traced elsewhere in its range (``zero_one``)
    moved = moved_off_zero_one(model, args, kwargs, first.torch_env.zero_one_examples)
    if moved is None:
        return _exported(model, args, kwargs, spec, settings, first)
    at_the_example = ModuleState(model)      # as torch.export's one run at the example leaves it
    try:
        moved_first = trace(model, moved.args, moved.kwargs, spec, settings, lowest=moved.lowest)
        result = _exported(model, moved.args, moved.kwargs, spec, settings, moved_first)
        differs = disagreement(result.program, model, args, kwargs)
    except Exception as exc:  # noqa: BLE001  (traced at the example instead, as torch does)
        result, differs = None, f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
    finally:
        at_the_example.restore()
    if result is None or differs is not None:
        first.engine.notes.append(moved.failed_note(differs or "no program"))
        return _exported(model, args, kwargs, spec, settings, first)
    if isinstance(result.program, torch.export.ExportedProgram):
        result.program.example_inputs = (tuple(args), dict(kwargs or {}))
    result.warnings.extend(_warn([moved.note]))
    return result


def _exported(model, args: tuple, kwargs: dict | None, spec, settings: ExportSettings,
              first: LocalTrace) -> ExportResult:
    """The export the first trace leads to (``first``, at ``args``): its program, a region search's, a
    split program, or the error."""
    start, stop_at, split = settings.started, settings.stop_at, settings.split
    strategy, timeout = settings.strategy, settings.timeout
    # later traces and probes run the model again; leave it as torch.export's one run at the example does
    after_first = ModuleState(model)
    try:
        data_dependent = data_dependent_cause(first.failure)
        if data_dependent is not None:
            raise data_dependent.with_traceback(None) from None
        report, name = first.report, type(model).__name__

        def result(program, search=None, warnings=()):
            return ExportResult(program, first.engine, report, time.perf_counter() - start, name, search,
                                list(warnings))

        def error(notes=(), regions=(), narrowing=None, report=report):
            return ExportError(report, [first.engine.explain(v) for v in report.violations],
                               first.engine.notes + list(notes), first.failure, engine=first.engine,
                               seconds=time.perf_counter() - start, model_name=name, regions=list(regions),
                               narrowing=narrowing, input_names=_input_names(model, args, kwargs), spec=spec)

        if report.specialized:
            raise error() from first.failure
        if report.violations:
            if first.program is None:
                raise error() from first.failure
            paths = search_regions(model, args, kwargs, spec, first, settings, one_program_only=not split)
            if paths.covered and len(paths.regions) == 1:
                # one program serves every trace: the violated guards only chose between code paths that
                # compute the same function there (identical graphs, or identical up to exact identities)
                return result(_serving(paths), paths)
            if paths.covered and split:
                return result(split_program(model, first, paths), paths)
            if all(v.torch_keeps for v in report.violations):
                return result(*_kept_like_torch(first, paths))
            narrowing, unfinished = None, None
            if not split and len(paths.traces) > 1:
                # without a budget of the caller's, narrowing may take as long again as the export so far,
                # and a few traces (a failing export reports within about twice its own time); with one,
                # the budget alone bounds it
                now = time.perf_counter()
                until = stop_at if stop_at is not None else now + (now - start)
                narrowing, unfinished = widest_single_program(
                    model, args, kwargs, spec, first, paths, settings, stop_at=until, capped=stop_at is None)
            notes = _region_notes(paths, split) + ([unfinished] if unfinished else [])
            raise error(notes, paths.regions, narrowing) from first.failure
        if first.failure is not None:
            raise first.failure
        notes = (_unproven_note(first.engine, report, strategy) + _unread_note(first)
                 + _asserts_note(first, timeout)
                 + _loops_note(first))
        search: RegionSearch | None = None
        if report.restrictions:
            # torch.export keeps these as input checks; other traces may show that the program serves
            # more (a check over named dims may then become the whole region of the program, hence the
            # longer search).  Each trace costs about torch's whole export, so without split or a
            # budget of the caller's, widening such a check takes one more trace: the program then checks
            # the regions of the traces it serves, which always include torch's own.  Over named dims the
            # user declared, it goes on while the traces keep joining one program and its checks would
            # still reject a share of the declared inputs worth a trace (a Swin block's `.contiguous()`
            # of its un-padded window copies only where H is no multiple of the window: 1 in 6 heights)
            named = bool(_named_relations(first.engine, report))
            capped = not split and stop_at is None
            search = search_regions(model, args, kwargs, spec, first, settings,
                                    one_program_only=not split and not named,
                                    max_total=WIDENING_TRACES if capped else None,
                                    widen_while=1 - NOT_WORTH_A_TRACE if capped and named else None)
            if search.covered and len(search.regions) == 1:
                return result(_serving(search), search, _warn(notes))
            if search.covered and split:
                return result(split_program(model, first, search), search, _warn(notes))
            # the regions the first program's group serves, covered or not (none: a guard beyond input sizes)
            widened = bool(search.regions) and len(search.regions[0].traces) > 1
            served = (_checking_its_region(first, search) if search.covered or (widened and not split)
                      else None)
            if served is not None:
                program, predicate, kept = served
                acceptance = judge(model, args, kwargs, first, predicate)
                if acceptance is not None and acceptance.refuses_valid_sizes:
                    raise error(*_refusal(first, acceptance, timeout)) from None
                further = "" if search.covered else ", or with a time_budget to look for a wider program"
                accepted = accepted_sizes(predicate, search.box)
                return result(program, search, _warn(notes + [
                    "the program rejects inputs outside its region (like torch.export, which keeps guards "
                    f"over several dims as input checks): {_cut(kept)}"
                    + (f"; it accepts {accepted}" if accepted else "")
                    + f"; export with split=True for one package covering every region{further}"]))
        acceptance = judge(model, args, kwargs, first, first.region)
        if acceptance is not None and acceptance.refuses_valid_sizes:
            raise error(*_refusal(first, acceptance, timeout)) from None
        narrowed = {s.name for s in acceptance.narrowed} if acceptance is not None else set()
        notes += (_restriction_notes(first.engine, report, split, narrowed)
                  + share_note(acceptance, with_share=bool(report.unproven)))
        return result(first.program, search, _warn(notes))
    finally:
        after_first.restore()


def _refusal(first, acceptance: Acceptance, timeout: float) -> tuple:
    """``(notes, regions, narrowing, report)`` of the error where the program's checks would refuse most
    declared sizes, some the model runs at, and narrow a named dim by itself (torch.export raises there
    too): the checks on the narrowed dims become the error's violations, with verified fixes."""
    engine, report = first.engine, first.report
    canon = canonical(engine)
    narrowed = set(acceptance.narrowed)
    promoted = [v for v in report.restrictions if F.substitute(v.lifted, canon).free_symbols & narrowed]
    for v in promoted:
        v.fixes = suggest_fixes(engine, v.guard, v.lifted, timeout)
    refused = dataclasses.replace(
        report, violations=promoted, restrictions=[v for v in report.restrictions if v not in promoted],
        combined_fixes=joint_fixes(engine, promoted, timeout) if promoted else None)
    at = ", ".join(f"{k} = {v}" for k, v in (acceptance.model_runs or {}).items())
    narrowed_names = ", ".join(s.name for s in acceptance.narrowed)
    note = (f"the program's input checks would accept, of the declared sizes, {acceptance.text}; the model "
            f"runs at {at}, which they reject (torch.export fails here too: a check narrows {narrowed_names} "
            "by itself); export with split=True for one package covering the other code paths too")
    return [note], (), None, refused


def _cut(text: str) -> str:
    """A long input check, as a warning shows it (the program holds all of it)."""
    return text if len(text) <= REGION_WIDTH else text[:REGION_WIDTH] + " ..."


def _checking_its_region(first, search: RegionSearch) -> tuple | None:
    """``(program, region predicate, input check)``: the program of the first trace's group, made to check
    its inputs against the region it serves; None where that region is not an input check (a variable
    with no input to read it from)."""
    region = search.regions[0] if search.regions else None
    check = None if region is None else python_guard(region.predicate, variable_sources(first.sizes))
    if region is None or check is None or region.program is None:
        return None
    set_input_checks(region.traces[0], check)
    return region.program, region.predicate, check


def _kept_like_torch(first, search: RegionSearch) -> tuple:
    """``(program, search, warnings)`` where torch.export keeps every violated guard as an input check
    (guards on roots of derived dims no input carries): the program of the first trace's group, checking
    its inputs against the region it serves, which holds torch's own."""
    served = _checking_its_region(first, search)
    program, predicate = (first.program, first.region) if served is None else served[:2]
    symbols = first.engine.symbols
    roots = sorted({symbols[s].label for v in first.report.violations for s in v.lifted.free_symbols
                    if symbols[s].uncarried_root})
    accepted = accepted_sizes(predicate, search.box) if predicate is not None else None
    return program, search, _warn([
        f"the program checks on its inputs what the code needs of {', '.join(roots)}, the root(s) of derived "
        "dims that no input carries, as torch.export does (it keeps such guards as input checks)"
        + (f": it accepts {accepted}" if accepted else "")
        + "; export with split=True for one package covering every region"])


def _serving(search: RegionSearch) -> ExportedProgram:
    """The program of the only region, checking its inputs against nothing but what torch keeps."""
    program = search.regions[0].traces[0]
    set_input_checks(program)
    assert program.program is not None, "a region's traces gave programs"
    return program.program


def _input_names(model, args, kwargs) -> tuple[str, ...]:
    """The inputs of ``model.forward`` in the order a positional ``dynamic_shapes`` lists them (torch binds
    the call to the signature); none when the call does not bind."""
    try:
        return tuple(bound_arguments(model, args, kwargs).arguments)
    except (TypeError, ValueError):
        return ()


def _warn(notes: list[str]) -> list[str]:
    for note in notes:
        warnings.warn(f"shapeproof.export: {note}", stacklevel=3)
    return notes


def _named_relations(engine: ShapeEnv, report: GuardReport) -> list:
    """Restrictions between named dims only: torch keeps them as input checks; other traces may widen them."""
    return [v for v in report.restrictions
            if all(engine.symbols[s].kind is DimKind.STRICT for s in v.lifted.free_symbols)]


def _restriction_notes(engine: ShapeEnv, report: GuardReport, split: bool,
                       narrowed: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Say what the program's input checks narrow: ranges the user declared, or a branch taken in user code.

    Guards that ops need of ``Dim.AUTO``/``Dim.DYNAMIC`` dims (broadcast
    equalities, slice bounds) are what those kinds ask export to infer, and
    torch.export keeps them silently; so does shapeproof.  A relation between named dims that narrows one
    of them by itself (``narrowed``, by label) is a check torch.export fails on instead.
    """
    named = _named_relations(engine, report)
    branches = [v for v in report.restrictions
                if all(v is not n for n in named) and v.guard.from_branch]
    notes = []
    if named:
        alone = sorted({engine.symbols[s].label for v in named for s in v.lifted.free_symbols} & narrowed)
        like = (f"torch.export fails on them: they narrow {', '.join(alone)} by itself" if alone
                else "as torch.export does")
        notes.append(f"the program checks these relations between named dims on its inputs ({like}): "
                     + "; ".join(engine.render(v.lifted) for v in named)
                     + _share(engine, [v.lifted for v in named]))
    if branches:
        notes.append("the program checks on its inputs what the code decided about Dim.AUTO/Dim.DYNAMIC dims "
                     "(as torch.export does): " + "; ".join(f"{engine.render(v.lifted)} ({v.guard.where})"
                                                        for v in branches)
                     + _share(engine, [v.lifted for v in branches])
                     + ("" if split else "; export with split=True to cover the other side of a branch too"))
    if report.pinned_together:
        sizes = ", ".join(f"{label} = {size}" for label, size in report.pinned_together)
        notes.append("the program's input checks accept one size only of these Dim.DYNAMIC dims, though no "
                     "single check says so (torch.export exports some such programs without a word): "
                     f"{sizes}; declare them Dim.STATIC, or change the code that needs that size")
    if report.pinned_zero_one:
        sizes = ", ".join(f"{label} = {size}" for label, size in report.pinned_zero_one)
        notes.append("the program's input checks accept one size only of these Dim.DYNAMIC dims "
                     "(torch.export lets such a dim become 0 or 1 and checks it on the inputs, as here): "
                     f"{sizes}; declare them Dim.STATIC, or change the code that needs that size")
    return notes


def _share(engine: ShapeEnv, checks: list) -> str:
    """``; it accepts ...``: the share of the declared sizes that input checks (formulas over input sizes)
    let through, in the user's names (an unbounded dim is counted over a window from its lower end, which
    the text names)."""
    predicate = F.conj(*checks)
    names = engine.label_map()
    if not predicate.free_symbols <= engine.symbols.keys():
        return ""
    box = {}
    for s in predicate.free_symbols:
        info = engine.symbols[s]
        (lo, hi), (range_lo, _) = info.declared, info.range    # Dim.AUTO declares nothing: torch's 2..
        box[names[s]] = (range_lo if lo is None else lo, hi)
    accepted = accepted_sizes(F.substitute(predicate, {s: names[s] for s in predicate.free_symbols}), box)
    return f"; it accepts {accepted}" if accepted else ""


def _unread_note(first) -> list[str]:
    """Guards torch recorded that the engine cannot read stay as input checks; never silently."""
    unread = first.torch_env.unmirrored
    if not unread:
        return []
    shown = "; ".join(str(g) for g in unread[:3]) + (f" (+{len(unread) - 3} more)" if len(unread) > 3 else "")
    return [f"{len(unread)} guard(s) could not be read by the engine; the program checks them on its inputs "
            f"and may reject shapes inside the declared ranges, a share the engine cannot count: {shown}"]


def _loops_note(first) -> list[str]:
    """Rolled loops that run no iteration at a size 0 or 1 the declared ranges allow: torch.export's 0/1
    convention traces those sizes as 2, and a scan cannot run zero times."""
    notes = []
    loops = {loop.key: loop for loop in first.torch_env.loop_rolling.rolled if loop.empty_at}
    for (file, line), loop in loops.items():
        at = ", ".join(f"{k} = {v}" for k, v in (loop.empty_at or {}).items())
        notes.append(f"the loop at {file}:{line} (`{loop.text}`) is one scan, which runs at least once: "
                     f"at {at}, which the declared ranges allow and torch.export traces as 2, the Python "
                     "loop runs no iteration and the program's scan raises in ep.module() (AOTInductor's "
                     "compiled loop runs zero times)")
    return notes


def _asserts_note(first, timeout: float) -> list[str]:
    """Runtime asserts that reject sizes inside the declared ranges (guards deferred by
    ``prefer_deferred_runtime_asserts_over_guards``): torch.export's program rejects them too, silently."""
    engine = first.engine
    narrowing = asserts_that_narrow(engine, engine.strategy, timeout)
    if not narrowing:
        return []
    shown = "; ".join(f"{engine.render(ra.condition)}" + (f" ({ra.where})" if ra.where else "")
                      for ra in narrowing[:3])
    more = f" (+{len(narrowing) - 3} more)" if len(narrowing) > 3 else ""
    return [f"the program asserts at run time what the code needs of the input sizes, which some sizes in "
            f"the declared ranges fail (as torch.export's does): {shown}{more}"]


def _unproven_note(engine: ShapeEnv, report: GuardReport, strategy: str) -> list[str]:
    """Guards the strategy could neither prove nor refute stay as input checks: say so, with the share of
    the declared sizes they accept (counted by evaluating them), not silently narrow."""
    if not report.unproven:
        return []
    shown = "; ".join(str(g.condition) for g in report.unproven[:3])
    more = f" (+{len(report.unproven) - 3} more)" if len(report.unproven) > 3 else ""
    share = _share(engine, [lift(engine, g.condition) for g in report.unproven])
    return [f"strategy {strategy!r} could not decide {len(report.unproven)} guard(s); the program checks "
            f"them on its inputs and may reject shapes inside the declared ranges: {shown}{more}{share}"]


def _region_notes(search: RegionSearch, split: bool) -> list[str]:
    if len(search.traces) < 2:
        return [f"no other region could be traced: {search.reason}"] if search.reason else []
    lines = ["the model takes different code paths in different parts of the declared ranges:"]
    lines += [f"  {line}" for line in search.describe(width=REGION_WIDTH)]
    if any(len(str(r.predicate)) > REGION_WIDTH for r in search.regions):
        lines.append("  (the whole predicates are in error.regions)")
    if search.reason:
        lines.append(f"  stopped: {search.reason}")
    if search.covered and not split:
        lines.append("  export with split=True to get one package of programs covering all of them")
    return lines


def export(mod: torch.nn.Module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None,
           strict: bool = False, preserve_module_call_signature: tuple[str, ...] = (),
           prefer_deferred_runtime_asserts_over_guards: bool = False, strategy="cascade", split: bool = False,
           max_regions: int = 8, time_budget: float | None = None, progress: bool = False,
           workers: int | None = None, executor: str = "fork",
           cond_branches: bool = True) -> ExportedProgram | SplitProgram:
    """Export ``mod`` like ``torch.export.export(..., strict=False)``, proving shape guards with shapeproof.

    Takes torch.export.export's arguments, by its names (``strict=True`` is
    traced non-strict, with a warning), plus shapeproof's own: ``strategy``,
    ``split``, ``max_regions``, ``time_budget``, ``progress``, ``workers``,
    ``executor`` and ``cond_branches``.

    Returns torch's own ``ExportedProgram`` (save/load, ``.module()`` and
    ``run_decompositions`` work as usual).  When a guard holds on part of the
    declared ranges only, the model is traced again at a point of the other
    part: if every region gives the same graph, that program is valid
    everywhere; if not, ``split=True`` returns a ``SplitProgram`` (a program
    per region and a dispatcher), and otherwise ``ExportError`` is raised.  Its
    message leads with the input dim, the source line, a counterexample, the
    regions found and fixes; ``suggest_dynamic_shapes`` applies the fixes.
    ``max_regions`` bounds the number of distinct programs (the search may trace
    up to ``TRACES_PER_REGION`` times as often: a trace whose region another
    program serves, up to exact identities, adds no program).  ``time_budget``
    (seconds) bounds the whole search: no trace starts after it is spent, and
    the answer is what the traces so far support (the error says so).
    Without ``split``, a failed search then looks for the widest range one
    program serves, verified (``error.narrowing``; ``suggest_dynamic_shapes``
    applies it, ``error.narrowing.program`` is that program), within
    ``time_budget``, else within about the time spent so far and a few traces;
    when that runs out before it has found or verified a wider range, the
    error says so (naming the candidate once found) and
    what a larger ``time_budget`` would be for.
    ``progress=True`` shows the search's traces on stderr (needs tqdm).
    ``workers`` bounds the traces a search runs side by side, in processes
    forked from this one (default: one per core; 1 traces here only), or with
    ``executor="ray"`` as Ray tasks (default: the cluster's CPUs; the model is
    pickled to them).
    ``cond_branches`` (default True) runs an ``if`` on sizes, or on a boolean
    read from a tensor, whose sides differ as one ``torch.cond`` where its
    sides allow (straight-line code binding names read after it); False leaves
    every such ``if`` a guard, as torch.export does, and the region search
    above decides.
    """
    deferred = prefer_deferred_runtime_asserts_over_guards
    return export_with_report(mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                              preserve_module_call_signature=preserve_module_call_signature,
                              prefer_deferred_runtime_asserts_over_guards=deferred,
                              strategy=strategy, split=split, max_regions=max_regions,
                              time_budget=time_budget, progress=progress, workers=workers,
                              executor=executor, cond_branches=cond_branches).program


def _check_module(mod) -> None:
    """What torch.export.export checks first, with its errors (torch 2.13, ``torch/export/__init__.py``), so
    a drop-in raises what torch raises before any work (a function or a class failed deep in the tracer
    with ``AttributeError: ... has no attribute 'buffers'``)."""
    if not isinstance(mod, torch.nn.Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got {type(mod)}.")
    if isinstance(mod, torch.jit.ScriptModule):
        raise ValueError("Exporting a ScriptModule is not supported. Maybe try converting your ScriptModule "
                         "to an ExportedProgram using `TS2EPConverter(mod, args, kwargs).convert()` instead.")


def suggest_dynamic_shapes(error: ExportError, dynamic_shapes):
    """``dynamic_shapes`` with the verified fixes of ``error`` applied (``ExportError.fixes``: the widest
    restriction one program serves, else the combined fix, else the best fix of each violation)."""
    return apply_fixes(dynamic_shapes, error.fixes, error.input_names)
