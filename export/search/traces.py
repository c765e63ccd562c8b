"""One trace: the exporter run once at one example point, with the engine deciding shapes, and what a region
search reads of it (its region, its sizes over the canonical variables, its program and input checks).

Regions are formulas over *canonical* input variables, one per input dim the
user can set (the Dim name, else the input path), so regions from different
traces are comparable.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property

import sympy
import torch
from sympy import Expr, Symbol

from shapeproof import solver as F      # the solver's facade: conditions, questions, guard code
from shapeproof.shapes import GuardReport, ShapeEnv, lift
from shapeproof.solver import Bounds, Solver, divisors, simplify, symbol
from shapeproof.tracer.control.branch_sites import SiteAbandoned
from shapeproof.tracer.engine_env import EngineShapeEnv, TorchDataDependentError, engine_tracing
from shapeproof.tracer.module_state import ModuleState
from shapeproof.tracer.sizes.size_asserts import label_size_asserts
from shapeproof.tracer.sizes.size_tracking import small_buffers
from shapeproof.tracer.stack_room import with_stack_room
from shapeproof.tracer.torch_internals import EXPORTED_PROGRAM_GUARDS_ATTRIBUTE

from ..settings import ExportSettings
from .checks import derived_dim_checks, set_checks
from ..programs.merge import copies_written
from ..programs.program_terms import ProgramTerms
from ..specs import dim_specs

__all__ = ["Trace", "LocalTrace", "trace", "canonical", "tidy", "symbol_terms", "unmerged_after",
           "buffer_names", "buffer_ids", "data_dependent_cause", "set_input_checks"]


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


def trace(model, args: tuple, kwargs: dict | None, spec, settings: ExportSettings,
          after: LocalTrace | None = None,
          carried: tuple[frozenset[str], frozenset] | None = None,
          lowest: dict[str, int] | None = None) -> LocalTrace:
    """Export once with the engine deciding shapes; never raises for shape reasons (the caller decides).

    ``settings.options`` are torch.export.export's own keyword arguments, passed through.  ``after`` is an
    earlier trace of the same export, which this one continues: its ``started_from`` puts the model's
    attributes back first (``module_state.py``), its buffers are followed, and its solver answers (a
    verdict depends only on the question, goal, facts and ranges, so one trace's are the next one's:
    traces of one model ask mostly the same).  Without one, the model's small buffers whose values
    sizes go through are followed only if the trace fails on a data-dependent size without them
    (EnCodec keeps its strides in int64 buffers).  A followed value becomes a runtime assert that the
    buffer still holds it, which a program that mutates the buffer (a step counter) breaks at its next
    call, so those are never followed.  ``carried`` continues an earlier trace made in another process
    (Ray's, which shares no memory with this one): the names of the buffers it followed, and the ``if``s
    it did not merge.  ``lowest``: input dims whose example of 0 or 1 was moved off (``zero_one``), with
    that size, which the trace takes into account.
    """
    if after is not None:
        after.started_from.restore()
    started_from = after.started_from if after is not None else ModuleState(model)
    solver = after.engine.solver if after is not None else Solver(settings.timeout)  # shared by retries below
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
            buffers = {i: b for i, b in candidates.items() if i in followed}
            found = _export_once(model, args, kwargs, spec, settings, buffers, solver, unmerged, lowest)
            refused = unmerged_after(found[1], found[2], found[3])
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
        set_checks(program, getattr(program, EXPORTED_PROGRAM_GUARDS_ATTRIBUTE) + derived_dim_checks(sizes))
        label_size_asserts(program, torch_env.size_tracker)
        torch_checks = torch_env.input_checks(program.graph_module, drop_mirrored=True)
    branches = [g for g, branch in parts or () if branch]
    return LocalTrace(point, program, failure, region, sizes, ranges, declared, seconds, started_from,
                      symbols, branches, followed, unmerged, torch_checks,
                      engine=engine, torch_env=torch_env, report=report)


def unmerged_after(torch_env: EngineShapeEnv, program, failure: BaseException | None = None) -> frozenset:
    """The ``if``s a trace must not merge, as found by the trace and its program: those whose body was not
    an identity where skipped, and those whose copies (a pad, ``contiguous``) share memory with an in-place
    write of the program, where dropping the copy would change what the write reaches.  A trace that gave no
    program also gives up the loops it rolled and the ``if``s it ran as conds, unless it ended because
    one site refused (that site is the one refused)."""
    merging, rolling, conds = torch_env.branch_merging, torch_env.loop_rolling, torch_env.branch_conds
    assert merging is not None and rolling is not None and conds is not None, \
        "engine traces merge branches, roll loops and run branches as conds"
    suspect = program is None and not _a_refusal(failure)
    refused = frozenset(merging.refused) | rolling.refused_after(suspect) | conds.refused_after(suspect)
    if program is None or not merging.merged:
        return refused
    return refused | copies_written(program.graph, merging.merged)


def _a_refusal(failure: BaseException | None) -> bool:
    """Whether a trace ended because a branch or loop being merged, rolled or run as a cond refused."""
    return _in_chain(failure, (SiteAbandoned,)) is not None


def _export_once(model, args, kwargs, spec, settings: ExportSettings,
                 buffers: dict[int, torch.Tensor], solver: Solver,
                 unmerged: frozenset = frozenset(), lowest: dict[str, int] | None = None) -> tuple:
    """``(engine, torch_env, program or None, failure or None)`` of one ``torch.export.export`` call that
    follows sizes through ``buffers``, its engine asking ``solver``, merging every ``if`` it can but
    ``unmerged``."""
    engine = ShapeEnv(strategy=settings.strategy, timeout=settings.timeout, solver=solver)
    prefer_deferred = settings.prefer_deferred_runtime_asserts_over_guards
    context, torch_env = engine_tracing(engine, dim_specs(spec), buffers, prefer_deferred, unmerged,
                                        settings.cond_branches, lowest)
    program, failure = None, None
    with context:
        try:
            program = with_stack_room(torch.export.export, model, args, kwargs, dynamic_shapes=spec,
                                      strict=False, **settings.options)
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
    return _in_chain(exc, (TorchDataDependentError,))


def _in_chain(exc: BaseException | None, types: tuple[type, ...]):
    """The first exception of one of ``types`` in ``exc``'s chain of causes and contexts, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, types):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def set_input_checks(t: Trace, region_check: str | None = None) -> None:
    """Make the program of ``t`` check its inputs against its region instead of its own trace's guards.

    torch's own checks that the engine did not judge (declared equalities
    between inputs, guards it could not read) stay.
    """
    assert t.program is not None, "only a trace that gave a program checks inputs"
    region_checks = [region_check] if region_check else []
    set_checks(t.program, t.torch_checks + derived_dim_checks(t.sizes) + region_checks)
