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

import inspect
import math
import sys
import mmap
import time
from dataclasses import dataclass, field
from functools import cached_property, partial

import sympy
import torch
from shapeproof.shapes import GuardReport, ShapeEnv, lift
from shapeproof.tracer.torch_internals import pytree
from shapeproof import solver as F      # the solver's facade: conditions, questions, guard code
from shapeproof.solver import (
    Bounds, Solver, divisors, evaluate_term, guard_code, holding_grid, prove, simplify, symbol, truth,
)
from shapeproof.tracer.engine_env import EngineShapeEnv, TorchDataDependentError, engine_tracing
from shapeproof.tracer.size_tracking import small_buffers
from shapeproof.tracer.module_state import ModuleState
from shapeproof.tracer.probe import failure_at
from shapeproof.tracer.size_asserts import label_size_asserts
from shapeproof.tracer.stack_room import with_stack_room
from shapeproof.tracer.torch_internals import EXPORTED_PROGRAM_GUARDS_ATTRIBUTE
from sympy import Expr, Symbol

from .merge import Merge, copies_written, could_unify, serves
from .program_terms import ProgramTerms
from .progress import TraceProgress, point_str, wanted
from .specs import dim_specs
from .trace_pool import (
    PATIENCE, SLACK, Child, RayTask, ShippedFailure, plain_fields, program_bytes, program_from, workers_of,
)

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
# Below a page or so an anonymous map saves nothing over torch.zeros.
_LAZY_ZEROS_BYTES = 1 << 16

__all__ = ["set_input_checks", "LocalTrace", "Region", "RegionSearch", "Trace", "python_guard",
           "search_regions", "trace"]


@dataclass
class Trace:
    """One run of the exporter at one example point, and what a region search reads of it.

    A trace made in another process (``trace_pool.py``) is one of these; one
    made here is a ``LocalTrace``, which keeps the engine that judged it too.
    """

    point: dict[str, int]              # canonical variable -> value the example had
    program: torch.export.ExportedProgram | None
    failure: BaseException | None
    region: F.Formula | None           # None: the guards mention something that is not an input dim
    sizes: dict[str, Expr]             # torch's input source name -> canonical term
    ranges: dict[Symbol, tuple]        # canonical variable -> range reasoning starts from
    declared: dict[Symbol, tuple]      # canonical variable -> range the user declared (what programs accept)
    seconds: float
    started_from: ModuleState          # the model's attributes when it began (later traces start there too)
    symbols: dict[Symbol, Expr] = field(default_factory=dict)   # torch symbol -> canonical term
    branches: list[F.Formula] = field(default_factory=list)      # the region's guards from Python branches
    followed_buffers: frozenset[int] = frozenset()   # ids of the buffers sizes were followed through
    unmerged: frozenset = frozenset()  # ``if``s (file, line) whose body must not be taken for every input
    # torch's input checks that the engine did not judge (declared equalities between inputs, guards it
    # could not read): what the program keeps once a region search has judged the rest
    torch_checks: list[str] = field(default_factory=list)

    @cached_property
    def at(self) -> dict[Symbol, int]:
        """The example point by variable, for ``truth``."""
        return {symbol(k): v for k, v in self.point.items()}

    @cached_property
    def terms(self) -> ProgramTerms:
        """The program's integer values and shapes as terms over the canonical variables (for merging)."""
        assert self.program is not None, "only a trace that gave a program is merged"
        return ProgramTerms(self.program, self.symbols, set(self.ranges))

    @property
    def fingerprint(self) -> str | None:
        """Two traces with the same fingerprint compute the same function wherever both are valid (the code
        of every graph: a scan's or cond's body is a graph of its own, called by name from the top one)."""
        if self.program is None:
            return None
        graphs = [m.code for _, m in self.program.graph_module.named_modules()
                  if isinstance(m, torch.fx.GraphModule)]
        return "\n".join(graphs) + "\n" + str(self.program.graph_signature)


@dataclass(kw_only=True)
class LocalTrace(Trace):
    """A trace made in this process, with the engine and torch shape environment that made it."""

    engine: ShapeEnv
    torch_env: EngineShapeEnv
    report: GuardReport


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


def canonical(engine: ShapeEnv) -> dict[Symbol, Symbol]:
    """Input dims the user sets; symbols the engine derived (``T = 4*k``) are lifted away first."""
    return {s: symbol(info.label) for s, info in engine.symbols.items() if info.backed
            and s not in engine.derived}


def tidy(f: F.Formula, box: dict) -> F.Formula:
    """A smaller equivalent of ``f`` over ``box``, in the guards' own words.

    Region predicates are unions of conjunctions of guards that repeat the
    same relation in both polarities and in different spellings.  Relations
    are identified by the rewrite strategy's normal form, the boolean
    structure is minimized over them, and each is printed as first written
    (``(W + (7 - W % 7) % 7) // 7 != 1`` rather than its normal form).
    Divisors that the box keeps nonzero are dropped from the printout only.
    """
    bounds = Bounds(box)
    atoms: dict = {}           # normal form (positive polarity) -> (boolean atom, relation as written)

    def atom(r: F.Rel):
        normal = simplify(r, box)
        positive = normal if not (isinstance(normal, F.Rel)
                                  and normal.op in ("!=", ">", ">=")) else F.neg(normal)
        flip = positive is not normal
        if positive not in atoms:
            atoms[positive] = (sympy.Symbol(f"_a{len(atoms)}"), _undivided(F.neg(r) if flip else r, bounds))
        return sympy.Not(atoms[positive][0]) if flip else atoms[positive][0]

    def to_bool(g):
        if isinstance(g, F.Const):
            return sympy.true if g.value else sympy.false
        if isinstance(g, F.Rel):
            return atom(g)
        parts = [to_bool(a) for a in g.args]
        return sympy.And(*parts) if isinstance(g, F.And) else sympy.Or(*parts)

    expr = to_bool(f)
    if len(atoms) > 10:        # minimizing is exponential in the atoms; keep f as it is
        return f
    written = {b: r for b, r in atoms.values()}

    def from_bool(b):
        if b is sympy.true or b is sympy.false:
            return F.TRUE if b is sympy.true else F.FALSE
        if isinstance(b, sympy.Symbol):
            return written[b]
        if isinstance(b, sympy.Not):
            return F.neg(written[b.args[0]])
        parts = [from_bool(a) for a in b.args]
        return F.conj(*parts) if isinstance(b, sympy.And) else F.disj(*parts)

    return from_bool(sympy.simplify_logic(expr, form="dnf"))


def _undivided(r: F.Formula, bounds: Bounds) -> F.Formula:
    """``r`` without the cancelled divisors the box keeps away from zero (they cannot make it undefined
    there)."""
    if not isinstance(r, F.Rel):
        return r
    visible = divisors((r.lhs, r.rhs))
    keep = frozenset(d for d in r.divisors if d in visible or (b := bounds(d)) is None or b.contains(0))
    return F.Rel(r.op, r.lhs, r.rhs, keep) if keep != r.divisors else r


def _region(engine: ShapeEnv, report: GuardReport, canon: dict) -> list[tuple[F.Formula, bool]] | None:
    """The trace's unproven guards over canonical variables, each with whether a Python branch asked it
    (rather than an op's shape rule); None when one mentions something that is not an input dim."""
    parts = []
    for guard in report.guards:
        if guard.verdict is not None and guard.verdict.proven:
            continue
        lifted = lift(engine, guard.condition)
        if not lifted.free_symbols <= canon.keys():
            return None
        parts.append((F.substitute(lifted, canon), guard.from_branch))
    return parts


def symbol_terms(torch_env: EngineShapeEnv, canon: dict) -> dict[Symbol, Expr]:
    """torch's symbols as terms in canonical variables; a dim declared ``32*k`` is ``32*k``, through torch's
    replacement of its symbol, rather than a variable of its own that could take values apart from ``k``."""
    out = {}
    for torch_sym in {**torch_env.symbol_map, **torch_env.var_to_sources}:
        term = _engine_term(torch_env, torch_env.replacements.get(torch_sym, torch_sym))
        if term is None or not term.free_symbols <= canon.keys():
            term = torch_env.symbol_map.get(torch_sym)
        if term is not None and term.free_symbols <= canon.keys():
            out[torch_sym] = term.xreplace(canon)
    return out


def _sizes(torch_env: EngineShapeEnv, symbols: dict[Symbol, Expr]) -> dict[str, Expr]:
    """Each input dim (by torch's source name) as a term in canonical variables."""
    return {source.name: symbols[sym] for sym, sources in torch_env.var_to_sources.items() if sym in symbols
            for source in sources}


def _engine_term(torch_env: EngineShapeEnv, expr: Expr) -> Expr | None:
    if not all(s in torch_env.symbol_map for s in expr.free_symbols):
        return None
    return expr.xreplace({s: torch_env.symbol_map[s] for s in expr.free_symbols})


def trace(model, args: tuple, kwargs: dict | None, spec, strategy: str, timeout: float,
          options: dict | None = None, after: LocalTrace | None = None,
          carried: tuple[frozenset[str], frozenset] | None = None) -> LocalTrace:
    """Export once with the engine deciding shapes; never raises for shape reasons (the caller decides).

    ``options`` are torch.export.export's own keyword arguments, passed through.  ``after`` is an
    earlier trace of the same export, which this one continues: its ``started_from`` puts the model's
    attributes back first (``module_state.py``), its buffers are followed, and its solver answers (a
    verdict depends only on the question, goal, facts and ranges, so one trace's are the next one's:
    traces of one model ask mostly the same).  Without one, the model's small buffers whose values
    sizes go through are followed only if the trace fails on a data-dependent size without them
    (EnCodec keeps its strides in int64 buffers).  A followed value becomes a runtime assert that the
    buffer still holds it, which a program that mutates the buffer (a step counter) breaks at its next
    call, so those are never followed.  ``carried`` continues an earlier trace made in another process
    (Ray's, which shares no memory with this one): the names of the buffers it followed, and the ``if``s
    it did not merge.
    """
    if after is not None:
        after.started_from.restore()
    started_from = after.started_from if after is not None else ModuleState(model)
    solver = after.engine.solver if after is not None else Solver(timeout)   # shared by the retries below
    start = time.perf_counter()
    candidates = small_buffers(model)
    followed: frozenset[int] = frozenset()
    unmerged: frozenset = frozenset()
    if after is not None:
        followed, unmerged = after.followed_buffers, after.unmerged
    elif carried is not None:
        followed, unmerged = buffer_ids(model, carried[0]), carried[1]

    def export_once():
        """One export; again without the branch merges it finds unsound (each attempt refuses at least
        one more ``if``, so this ends)."""
        nonlocal unmerged
        while True:
            found = _export_once(model, args, kwargs, spec, strategy, timeout, options,
                                 {i: b for i, b in candidates.items() if i in followed}, solver, unmerged)
            refused = unmerged_after(found[1], found[2])
            if refused <= unmerged:
                return found
            unmerged |= refused
            started_from.restore()

    engine, torch_env, program, failure = export_once()
    if after is None and carried is None and data_dependent_cause(failure) is not None and candidates:
        followed = frozenset(candidates)
        started_from.restore()
        engine, torch_env, program, failure = export_once()
    mutated = _mutated_buffers(model, program) & followed
    if mutated and torch_env.size_tracker.bindings:
        followed -= mutated
        started_from.restore()
        engine, torch_env, program, failure = export_once()
    report = engine.produce_guards()
    seconds = time.perf_counter() - start
    canon = canonical(engine)
    parts = None if torch_env.unmirrored else _region(engine, report, canon)
    region = None if parts is None else F.conj(*(g for g, _ in parts))
    ranges = {canon[s]: info.range for s, info in engine.symbols.items() if s in canon}
    declared = {canon[s]: info.declared for s, info in engine.symbols.items() if s in canon}
    point: dict[str, int] = {}
    for s, info in engine.symbols.items():
        if s in canon:
            assert info.hint is not None, "canonical variables are backed: they have an example value"
            point[canon[s].name] = info.hint
    symbols = symbol_terms(torch_env, canon)
    sizes = _sizes(torch_env, symbols)
    torch_checks = []
    if program is not None:
        _set_checks(program, getattr(program, EXPORTED_PROGRAM_GUARDS_ATTRIBUTE) + derived_dim_checks(sizes))
        label_size_asserts(program, torch_env.size_tracker)
        torch_checks = torch_env.input_checks(program.graph_module, drop_mirrored=True)
    branches = [g for g, branch in parts or () if branch]
    return LocalTrace(point, program, failure, region, sizes, ranges, declared, seconds, started_from,
                      symbols, branches, followed, unmerged, torch_checks,
                      engine=engine, torch_env=torch_env, report=report)


def unmerged_after(torch_env: EngineShapeEnv, program) -> frozenset:
    """The ``if``s a trace must not merge, as found by the trace and its program: those whose body was not
    an identity where skipped, and those whose copies (a pad, ``contiguous``) share memory with an in-place
    write of the program, where dropping the copy would change what the write reaches."""
    merging, rolling = torch_env.branch_merging, torch_env.loop_rolling
    assert merging is not None and rolling is not None, "engine traces merge branches and roll loops"
    refused = frozenset(merging.refused) | rolling.refused_after(program)
    if program is None or not merging.merged:
        return refused
    return refused | copies_written(program.graph, merging.merged)


def _export_once(model, args, kwargs, spec, strategy: str, timeout: float, options: dict | None,
                 buffers: dict[int, torch.Tensor], solver: Solver,
                 unmerged: frozenset = frozenset()) -> tuple:
    """``(engine, torch_env, program or None, failure or None)`` of one ``torch.export.export`` call that
    follows sizes through ``buffers``, its engine asking ``solver``, merging every ``if`` it can but
    ``unmerged``."""
    engine = ShapeEnv(strategy=strategy, timeout=timeout, solver=solver)
    prefer_deferred = bool((options or {}).get("prefer_deferred_runtime_asserts_over_guards", False))
    context, torch_env = engine_tracing(engine, dim_specs(spec), buffers, prefer_deferred, unmerged)
    program, failure = None, None
    with context:
        try:
            program = with_stack_room(torch.export.export, model, args, kwargs, dynamic_shapes=spec,
                                      strict=False, **(options or {}))
        except Exception as exc:  # judged by the caller: a shape violation, data-dependent or model error
            failure = exc
    return engine, torch_env, program, failure


def _mutated_buffers(model, program) -> frozenset[int]:
    """The ids of the model's buffers ``program`` writes (in place or by assignment)."""
    if program is None:
        return frozenset()
    return buffer_ids(model, frozenset(program.graph_signature.buffers_to_mutate.values()))


def buffer_names(model, ids: frozenset[int]) -> frozenset[str]:
    return frozenset(name for name, b in model.named_buffers(remove_duplicate=False) if id(b) in ids)


def buffer_ids(model, names: frozenset[str]) -> frozenset[int]:
    return frozenset(id(b) for name, b in model.named_buffers(remove_duplicate=False) if name in names)


def data_dependent_cause(exc: BaseException | None) -> TorchDataDependentError | None:
    """The data-dependent error (a size torch could not know while tracing) in ``exc``'s chain, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TorchDataDependentError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


# ---------------------------------------------------------------------------- inputs at a point

def bound_arguments(model, args: tuple, kwargs: dict | None) -> inspect.BoundArguments:
    """The call bound to ``model.forward``'s signature, as torch binds it to read ``dynamic_shapes``."""
    return inspect.signature(model.forward).bind(*args, **(kwargs or {}))


def input_sizes(sizes: dict[str, Expr], point: dict[str, int]) -> dict[str, int]:
    """The size of every dynamic input dim (by torch's source name) at a canonical point."""
    env = {symbol(k): v for k, v in point.items()}
    return {name: int(evaluate_term(term, env)) for name, term in sizes.items()}


def inputs_at(model, args: tuple, kwargs: dict | None, sizes: dict[str, int]) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with every dim named in ``sizes`` resized.

    Non-strict export replaces inputs by fake tensors, so only shapes and
    dtypes matter; values are zeros (``lazy_zeros``).
    """
    bound = bound_arguments(model, args, kwargs)
    leaves, treespec = pytree.tree_flatten_with_path(dict(bound.arguments))
    new_leaves = []
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            prefix = "L" + pytree.keystr(path)
            shape = [sizes.get(f"{prefix}.size()[{d}]", n) for d, n in enumerate(leaf.shape)]
            if list(shape) != list(leaf.shape):
                leaf = lazy_zeros(shape, leaf.dtype, leaf.device)
        new_leaves.append(leaf)
    resized = pytree.tree_unflatten(new_leaves, treespec)
    return _as_called(bound.signature, resized, len(args), kwargs or {})


def _as_called(signature: inspect.Signature, values: dict, positional: int,
               kwargs: dict) -> tuple[tuple, dict]:
    """The bound ``values`` passed as the call passed them: ``positional`` arguments by position, the
    keywords of ``kwargs`` by keyword (``BoundArguments.args`` would move keywords to positions, and a
    program traced from such a call takes them positionally: calling it with the keywords fails)."""
    params = signature.parameters.values()
    leading = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var_positional = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    named = [values[name] for name in leading[:positional]]
    extra = list(values[var_positional]) if var_positional and positional > len(leading) else []
    by_keyword = {key: values[key] if key in keywords else values[var_keyword][key] for key in kwargs}
    return tuple(named + extra), by_keyword


def lazy_zeros(shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zeros that take no memory until written.

    Each program keeps its example inputs, and nothing writes them (the
    trace sees fake tensors): a region search at a batch of 8 images of
    219x84 would otherwise hold tens of MB per trace.  Pages of an
    anonymous map read as zero and are only allocated when touched.  The
    tensor owns the map's storage rather than viewing a flat tensor of it:
    export fakifies a view's ``_base`` too, and its size would become one
    more symbol of the trace (``x._base.size()[0]``).
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if device.type != "cpu" or nbytes < _LAZY_ZEROS_BYTES:
        return torch.zeros(shape, dtype=dtype, device=device)
    try:
        flat = torch.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype)
    except (TypeError, ValueError, RuntimeError):     # a dtype frombuffer does not take
        return torch.zeros(shape, dtype=dtype, device=device)
    contiguous = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return torch.empty(0, dtype=dtype).set_(flat.untyped_storage(), 0, shape, contiguous)


# ---------------------------------------------------------------------------- the search

def search_regions(model, args, kwargs, spec, first: LocalTrace, *, strategy: str, timeout: float,
                   max_regions: int, max_traces: int | None = None, max_total: int | None = None,
                   one_program_only: bool = False, options: dict | None = None, stop_at: float | None = None,
                   progress: bool = False, widen_while: float | None = None,
                   workers: int | None = 1, executor: str = "fork") -> RegionSearch:
    """Trace at points outside the regions found so far until they cover the declared ranges.

    No trace starts after ``stop_at`` (a ``time.perf_counter()`` value): the caller's time budget.
    ``progress`` shows a bar of traces on stderr (``progress.py``).  With ``workers`` above 1 (None: the
    executor's default, ``trace_pool.workers_of``, asked only once a search would trace side by side), up
    to that many points are traced side by side (``trace_pool.py``, ``_more_points``), in forked children
    or, with ``executor="ray"``, Ray tasks; a trace made there is read like one made here, in turn, if its
    point is still outside every region by then.

    ``max_traces`` (default ``max_regions``) bounds the traces that no
    identity merged into an earlier program; ``max_total`` (default
    ``TRACES_PER_REGION * max_regions``) bounds all of them.  With
    ``one_program_only`` the search stops once two programs differ in a way
    no later trace could unify (the caller can only use a single program
    valid everywhere).  ``widen_while``: past ``max_total`` the search goes on
    (up to the default bound) while every trace so far joined one program and
    the regions leave at least this share of the declared box uncovered.
    """
    max_traces = max_regions if max_traces is None else max_traces
    bound = max(max_traces, TRACES_PER_REGION * max_regions)
    max_total = bound if max_total is None else max_total
    search = RegionSearch([first])
    programs = Programs(search.box, strategy, timeout)
    programs.add(first)
    bar = TraceProgress(wanted(progress), max_total)
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
                    workers = workers_of(executor) if workers is None else workers   # Ray starts only here
                    side = min(workers, room)
                for other, call in _more_points(model, args, kwargs, first, regions, search.box,
                                                counterexample, side - 1, strategy, timeout):
                    elsewhere = _side_trace(executor, model, call, spec, strategy, timeout, options, first)
                    if elsewhere is None:
                        break
                    pending.append((other, elsewhere))
                found = trace(model, new_args, new_kwargs, spec, strategy, timeout, options, after=first)
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


def _side_trace(executor: str, model, call: tuple[tuple, dict], spec, strategy: str, timeout: float,
                options: dict | None, first: LocalTrace) -> Child | RayTask | None:
    """A trace at ``call``'s inputs, continuing ``first``, under way in a forked child or a Ray task; None
    where this process may not have a child (multiprocessing refuses one to a daemonic process, the system
    may refuse a fork)."""
    if executor == "ray":
        first.started_from.restore()          # Ray pickles the model as it is now
        carried = (buffer_names(model, first.followed_buffers), first.unmerged)
        return RayTask(traced_elsewhere, model, *call, spec, strategy, timeout, options, carried)
    run = partial(trace, model, *call, spec, strategy, timeout, options, after=first)
    try:
        return Child(run, partial(_shipped, model=model))
    except (AssertionError, OSError):
        return None


def traced_elsewhere(model, args: tuple, kwargs: dict, spec, strategy: str, timeout: float,
                     options: dict | None, carried: tuple[frozenset[str], frozenset]) -> dict:
    """A Ray task: a trace continuing ``carried`` (``trace``), shipped."""
    return _shipped(trace(model, args, kwargs, spec, strategy, timeout, options, carried=carried), model)


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


# ---------------------------------------------------------------------------- predicates as input checks

def set_input_checks(t: Trace, region_check: str | None = None) -> None:
    """Make the program of ``t`` check its inputs against its region instead of its own trace's guards.

    torch's own checks that the engine did not judge (declared equalities
    between inputs, guards it could not read) stay.
    """
    assert t.program is not None, "only a trace that gave a program checks inputs"
    region_checks = [region_check] if region_check else []
    _set_checks(t.program, t.torch_checks + derived_dim_checks(t.sizes) + region_checks)


def _set_checks(program, checks: list[str]) -> None:
    """The Python conditions ``program.module()`` asserts on its inputs (torch's ``_guards_code``), once
    each."""
    setattr(program, EXPORTED_PROGRAM_GUARDS_ATTRIBUTE, list(dict.fromkeys(checks)))


def derived_dim_checks(sizes: dict[str, Expr]) -> list[str]:
    """``size % a == 0`` for every input dim declared as ``a*Dim + b`` with ``|a| > 1``.

    torch's program checks such a dim's range but not that it is a multiple:
    torch.export gets that check only from guards its own reasoning happened to
    record, and the engine decides those statically.  Without it a 65-row image
    would run through a program traced for multiples of 32.  When the root dim
    is an input too, torch checks the equality itself.
    """
    read_directly = {term for name, term in sizes.items() if name.startswith("L[") and term.is_Symbol}
    return [f"({name} - {b}) % {abs(a)} == 0" if b else f"{name} % {abs(a)} == 0"
            for name, (var, a, b) in _linear_sizes(sizes)
            if abs(a) > 1 and var not in read_directly]      # torch checks an equality with a read root


def _linear_sizes(sizes: dict[str, Expr]) -> list[tuple[str, tuple[Symbol, int, int]]]:
    """``(name, (var, a, b))`` for each input dim whose size is ``a*var + b``, by name."""
    out = []
    for name, term in sorted(sizes.items()):
        if len(term.free_symbols) != 1:
            continue
        (var,) = term.free_symbols
        poly = sympy.Poly(term, var)
        if poly.degree() == 1:
            a, b = (int(c) for c in poly.all_coeffs())
            out.append((name, (var, a, b)))
    return out


def variable_sources(sizes: dict[str, Expr]) -> dict[Symbol, str]:
    """Each canonical variable as Python over torch's source names (``(L['x'].size()[1] - 1) // 2``)."""
    out: dict[Symbol, str] = {}
    for name, (var, a, b) in _linear_sizes(sizes):
        if var in out:
            continue
        text = name if b == 0 else f"({name} - {b})"
        out[var] = text if a == 1 else f"({text} // {a})"
    return out


def accepted_sizes(predicate: F.Formula, box: dict, limit: int = 4096) -> str | None:
    """What ``predicate`` accepts of ``box``, for messages: counted where the box has at most ``COUNTED``
    points (``3 of 64 (h, w): h in 2..3, w in 2..3``; past ``limit`` points with the share, ``504 of 32744
    (B, N), 2%``), else on an even grid of about ``limit`` of them (``about 87% of (h, w), on an even grid
    of 4096``: a periodic check, such as a square token count, can fool it); an unbounded dim is read from
    its lower end over ``UNBOUNDED_WINDOW`` sizes (the message says so).  None where the predicate reads no
    size."""
    if not predicate.free_symbols:
        return None
    spans, open_ended = {}, []
    for s in predicate.free_symbols:
        lo, hi = box.get(s, (None, None))
        lo = 0 if lo is None else lo
        if hi is None or hi >= sys.maxsize:            # ``RegionSearch.box`` cuts an open end there
            hi = lo + UNBOUNDED_WINDOW - 1
            open_ended.append(f"{s.name} in {lo}..{hi}")
        spans[s] = (lo, hi)
    window = f" (over {', '.join(sorted(open_ended))})" if open_ended else ""
    grid = holding_grid(predicate, spans, max_points=COUNTED)
    if grid is not None:
        count, total = int(grid.mask.sum()), grid.mask.size
        names = ", ".join(s.name for s in grid.symbols)
        runs = [_runs(grid.values(k)) for k in range(len(grid.symbols))]
        listed = count and not any(r is None for r in runs)          # a comb of sizes is a count alone
        share = f", {_percent(count / total)}" if total > limit else ""
        values = ": " + ", ".join(f"{s.name} in {r}" for s, r in zip(grid.symbols, runs)) if listed else ""
        return f"{count} of {total} ({names})" + window + share + values
    per_dim = max(2, int(limit ** (1 / len(spans))))
    steps, strided = {}, {}
    for s, (lo, hi) in spans.items():
        step = max(1, -(-(hi - lo) // (per_dim - 1)))
        index = Symbol(f"_{s.name}_k", integer=True)
        steps[index] = (0, (hi - lo) // step)
        strided[s] = lo + step * index
    grid = holding_grid(F.substitute(predicate, strided), steps, max_points=4 * limit)
    if grid is None:
        return None
    names = ", ".join(sorted(s.name for s in spans))
    hits = int(grid.mask.sum())
    if hits in (0, grid.mask.size):        # a sample is no proof of none or all (a check with a period)
        return (f"{'none' if hits == 0 else 'all'} of an even grid of {grid.mask.size} sizes of ({names})"
                f"{window}")
    share = _percent(hits / grid.mask.size)
    about = "" if share.startswith(("under", "over")) else "about "
    return f"{about}{share} of ({names}){window}, on an even grid of {grid.mask.size}"


UNBOUNDED_WINDOW = 256       # sizes from a dim's lower end counted where it has no upper one (Dim.AUTO)
# boxes counted point by point up to this size (numpy; a float power evaluates lane by lane in Python, about
# 1 s a million)
COUNTED = 1 << 20


def _percent(share: float) -> str:
    """A share as a message says it: 0% and 100% only when exactly so."""
    if share in (0, 1):
        return f"{share:.0%}"
    return "under 1%" if share < 0.01 else "over 99%" if share > 0.99 else f"{share:.0%}"


def _runs(values: list[int], most: int = 4) -> str | None:
    """``[2, 3, 4, 7]`` as ``2..4, 7``; None for more than ``most`` runs."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    if len(runs) > most:
        return None
    text = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in runs)
    return text if len(runs) == 1 else "{" + text + "}"


def python_guard(predicate: F.Formula, sources: dict[Symbol, str]) -> str | None:
    """``predicate`` as a Python expression torch's ExportedProgram evaluates as an input check.

    Returns None when a variable has no input source (nothing to read it from).
    """
    if not predicate.free_symbols <= sources.keys():
        return None
    return guard_code(predicate, sources)
