"""torch's ShapeEnv with shapeproof's engine behind it.

shapeproof keeps torch's tracing (fake tensors, SymNode, make_fx, non-strict
export) and replaces the brain behind it: ``EngineShapeEnv`` is torch's
ShapeEnv with every question it cannot settle by itself handed to a
``shapeproof.shapes.ShapeEnv`` (the *engine*), which mirrors every symbol,
guard and runtime assert torch records.  Measured on torch 2.13:
a foreign SymNode class breaks under FakeTensorMode, while a ShapeEnv subclass
injected through an ambient TracingContext works with make_fx and with
``torch.export.export(strict=False)``.

Hooks and why:

* ``create_symbol`` / ``create_unbacked_*`` / ``_constrain_range_for_size``:
  mirror symbols, with the user's Dim name, declared range and derived-dim
  relation (torch itself only learns ``x.size(1) == 2*h`` after tracing).
* ``_maybe_evaluate_static``: torch's own static evaluation first (cheap, and
  it keeps torch's semantics for constants and replacements); when it gives
  up, the engine answers.  Proving here is what keeps a guard from existing.
* ``evaluate_expr`` / ``guard_or_defer_runtime_assert``: torch records the
  guard or runtime assert for what nobody could prove (so its bookkeeping,
  replacements and ``_guards_code`` stay consistent); the new records are
  mirrored into the engine with the user's source line.  Data-dependent
  errors are re-raised with the engine's explanation (``questions.annotated``).

The fake mode (``fake_mode``) follows sizes through small tensors and binds
torch's unbacked symbol for such a value to its size expression
(``size_tracking``); a binding to a constant waits for the next question
(``evaluate_expr``, ``produce_guards_verbose`` and every op flush it).
While a trace runs, ``range`` over sizes of fixed length and recurrent ops
keep sizes symbolic (``symbolic_range``, ``rnn_shapes``); what that changes
outside the trace acts on its own thread only (``patching``).
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import NamedTuple

import sympy
import torch

from shapeproof.shapes import DataDependentError, DimKind, ShapeEnv, Source, is_user_frame

from . import cond_sides
from .control.branch_cond import BranchConds
from .control.branch_merge import BranchMerging
from .control.cond import conds_under_their_conditions
from .control.early_returns import swapped
from .questions import (
    annotated, current_op, guarded_node, has_symbols, is_torch_frame, jumping_user_frame, provenance,
    smaller_than,
)
from .exact_cancel import exact_cancellation
from .fake_mode import EngineFakeTensorMode
from .sizes.int_arguments import IntArguments
from .sizes.hintless import hintless_answer, hintless_views
from .sizes.rnn_shapes import symbolic_rnns
from .sizes.size_asserts import sizes_checked_against_inputs
from .control.loop_bodies import loop_bodies_unfollowed
from .control.loops import LoopRolling
from .control.short_circuits import short_circuit_answer
from .sizes.size_tracking import SizeTracker
from .patching import engine_thread, tracing_turn
from .sym_expr_cache import cached_sym_exprs
from .sizes.user_globals import symbolic_user_names
from .sympy_bridge import Conversions, UnsupportedExpression, bounds_of
from .torch_internals import (
    BOOL_GUARD_PATH, FORCED_SPECIALIZATIONS, PRETTIFY_RESULTS, SOLVE_CONSTRAINTS, DimDynamic,
    GuardOnDataDependentSymNode,
    RelaxedUnspecConstraint, StrictMinMaxConstraint, TorchShapeEnv, TracingContext, UserError, UserErrorType,
    ValueRanges,
    convert_guards_to_code, tracing, uninteresting_files,
)

__all__ = ["DimSpec", "EngineShapeEnv", "TorchDataDependentError", "engine_tracing", "engine_patches",
           "readable_source"]


@dataclass(frozen=True)
class DimSpec:
    """What the user declared for one dim: a named range, or ``a*root + b`` of a root ``Dim``."""

    name: str
    min: int | None
    max: int | None
    root: "DimSpec | None" = None
    a: int = 1
    b: int = 0


class TorchDataDependentError(GuardOnDataDependentSymNode, DataDependentError):
    """torch's data-dependent error type (so torch's own handlers still catch it) with the engine's
    message."""

    def __init__(self, cond, engine_error: DataDependentError):
        GuardOnDataDependentSymNode.__init__(self, cond, str(engine_error))
        self.expression = engine_error.expression
        self.symbols = engine_error.symbols
        self.suggestions = engine_error.suggestions
        self.where = engine_error.where


_TRACER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SOURCE = re.compile(r"^L\['(?P<name>[^']+)'\](?P<rest>.*)$")


def readable_source(name: str) -> tuple[str, str | None, int | None]:
    """``L['x'].size()[1]`` -> ``("x.size(1)", "x", 1)``; kwargs and ``args[i]`` keep their path."""
    m = _SOURCE.match(name)
    if m is None:
        return name, None, None
    arg, rest = m.group("name"), m.group("rest")
    if arg in ("args", "kwargs"):
        inner = re.match(r"^\[(?:'([^']+)'|(\d+))\](.*)$", rest)
        if inner:
            arg = inner.group(1) or f"args[{inner.group(2)}]"
            rest = inner.group(3)
    dim = re.fullmatch(r"\.size\(\)\[(\d+)\]", rest)
    if dim:
        return f"{arg}.size({dim.group(1)})", arg, int(dim.group(1))
    return arg + rest, arg, None


def dim_kind(constraint_dim) -> DimKind:
    """The spec's promise for a dim, from the constraint torch attaches to it: a named ``Dim`` is a
    ``StrictMinMaxConstraint``, ``Dim.DYNAMIC`` a ``RelaxedUnspecConstraint``, ``Dim.AUTO`` none."""
    if isinstance(constraint_dim, RelaxedUnspecConstraint):
        return DimKind.DYNAMIC
    return DimKind.AUTO if constraint_dim is None else DimKind.STRICT


# Who answers a static question first.  torch's value-range analysis settles small expressions in
# well under a millisecond and decides most of them; on large nested ``//``/``%`` terms it takes tens
# of milliseconds and seldom decides (half of an hf_swin trace), where the engine is faster.
_TORCH_FIRST_NODES = 20


class ZeroOneExample(NamedTuple):
    """An input dim declared dynamic (a named ``Dim``, ``Dim.AUTO``/``DYNAMIC``) whose example size is 0 or
    1, which torch made that constant."""

    size: int
    dim_name: str | None                   # the user's Dim, when one was named
    declared: tuple | None                 # its declared range, when one was


class EngineShapeEnv(TorchShapeEnv):
    """torch's ShapeEnv whose undecided questions go to ``engine``, and whose records it mirrors."""

    hintless_views = True       # views of its sizes take torch's meta for sizes without a hint (hintless)

    def _init(self, *, engine: ShapeEnv | None = None, dim_specs: dict[str, DimSpec] | None = None, **kwargs):
        super()._init(**kwargs)
        self.engine = engine if engine is not None else ShapeEnv()
        self.dim_specs = dim_specs or {}
        self.symbol_map: dict[sympy.Symbol, sympy.Expr] = {}   # torch symbol -> engine term
        self._roots: dict[str, sympy.Symbol] = {}
        self._root_values: dict[str, tuple] = {}   # root Dim name -> (value, source that set it, its DimSpec)
        self._static_memo: dict = {}
        self._conversions = (0, Conversions())       # (len(symbol_map) it was built at, memo)
        # guards torch recorded that the engine cannot read (kept as input checks)
        self.unmirrored: list = []
        self.mirrored: set[int] = set()  # indices into self.guards of guards the engine records and judges
        self._producing_guards = False
        self._evaluating = 0            # depth of evaluate_expr calls (their guards may be deferred)
        # questions answered without a guard (hintless, short_circuits): (rule, question, answer)
        self.unguarded_answers: list[tuple[str, sympy.Basic, bool]] = []
        # set by engine_tracing: sizes followed through small tensors
        self.size_tracker: SizeTracker | None = None
        self.bool_symbols: set = set()  # unbacked symbols torch made for booleans of data (``bool(t)``)
        # set by engine_tracing: ``if``s on sizes whose body the trace takes for every input
        self.branch_merging: BranchMerging | None = None
        # set by engine_tracing: loops over sizes rolled into one scan
        self.loop_rolling: LoopRolling | None = None
        # set by engine_tracing: ``if``s whose sides differ, run as one torch.cond
        self.branch_conds: BranchConds | None = None
        # the sides of ``torch.cond`` being traced: the condition each runs under, in torch's sympy
        self.sides: list[sympy.Basic] = []
        # input dims declared dynamic whose example size is 0 or 1 (torch made them that constant)
        self.zero_one_examples: dict[str, ZeroOneExample] = {}
        # set by engine_tracing: the least size of input dims whose 0/1 example was moved off (by source)
        self.lowest: dict[str, int] = {}
        self._lowered: set[sympy.Symbol] = set()      # their symbols

    # -- symbols -----------------------------------------------------------------
    def create_symbol(self, val, source, dynamic_dim=None, constraint_dim=None, positive=True,
                      do_not_specialize_zero_one=False, symbolic_context=None):
        kwargs = dict(constraint_dim=constraint_dim, positive=positive,
                      do_not_specialize_zero_one=do_not_specialize_zero_one,
                      symbolic_context=symbolic_context)
        if dynamic_dim is not None:
            kwargs["dynamic_dim"] = dynamic_dim
        expr = super().create_symbol(val, source, **kwargs)
        lowest = self.lowest.get(source.name)
        if lowest is not None and isinstance(expr, sympy.Symbol):
            # an example of 0/1 moved off (``zero_one``): the program must serve it, so the trace may not
            # take the size for at least 2 there (torch's 0/1 convention); torch's own library questions on
            # it stay size-oblivious, as under its ``backed_size_oblivious`` (in ``evaluate_expr``)
            known = self.var_to_range[expr]
            self.var_to_range[expr] = ValueRanges(min(known.lower, lowest), known.upper)
            self.size_like.add(expr)
            self._lowered.add(expr)
        self._mirror_symbol(expr, int(val), source, constraint_dim, positive, do_not_specialize_zero_one,
                            dynamic=dynamic_dim == DimDynamic.DYNAMIC, lowest=lowest)
        return expr

    def _mirror_symbol(self, expr, val: int, source, constraint_dim, positive, keep_zero_one: bool,
                       dynamic: bool = False, lowest: int | None = None) -> None:
        name = source.name
        if name in self._roots:                        # torch's phantom symbol for a derived dim's root
            if isinstance(expr, sympy.Symbol):
                self.symbol_map[expr] = self._roots[name]
            return
        path, arg, dim = readable_source(name)
        src = Source(path, arg, dim)
        spec = self.dim_specs.get(self.source_name_to_debug_name.get(name, ""))
        strict = isinstance(constraint_dim, StrictMinMaxConstraint)
        declared = bounds_of(constraint_dim.vr) if strict else None
        create = functools.partial(self.engine.create_backed_symbol, val, src, declared=declared,
                                   dim_name=spec.name if spec else None, kind=dim_kind(constraint_dim),
                                   specialize_zero_one=False if keep_zero_one else None, lowest=lowest)
        if not isinstance(expr, sympy.Symbol):
            # declared dynamic, specialized on the example (an int in the spec, declared [1, 1], is static)
            if strict and val in (0, 1) and declared != (val, val):
                create()
            dynamic = strict or isinstance(constraint_dim, RelaxedUnspecConstraint) or dynamic
            if dynamic and val in (0, 1) and declared != (val, val) and dim is not None:
                self.zero_one_examples[name] = ZeroOneExample(val, spec.name if spec else None, declared)
            return
        if expr in self.symbol_map:                    # duck sizing: another input dim, same symbol
            self.engine.add_source(self.symbol_map[expr], src)
            return
        if spec is not None:
            self._check_derived(name, spec, val)
        if spec is not None and spec.root is not None:
            root = self._root_symbol(spec.root, (val - spec.b) // spec.a, keep_zero_one)
            engine_sym = create(name=expr.name)
            self.engine.relate(engine_sym, spec.a * root + spec.b)
        else:
            engine_sym = create(name=expr.name, is_size=bool(positive))
        self.symbol_map[expr] = engine_sym

    def _check_derived(self, source_name: str, spec: DimSpec, val: int) -> None:
        """The example must satisfy every derived dim's relation (``y = 2*dimx``) before tracing relies on it.

        torch checks this after tracing, with this message; the engine would
        otherwise relate sizes the example contradicts, and the trace would
        fail on a broadcast far from the cause.  The input blamed is the
        derived one, as in torch's message.
        """
        root = spec.root or spec
        implied, remainder = divmod(val - spec.b, spec.a)
        first = self._root_values.setdefault(root.name, (implied, source_name, spec, val, remainder))
        if remainder == 0 and first[4] == 0 and first[0] == implied:
            return
        value, blamed, blamed_spec, blamed_val = (implied, first[1], first[2], first[3]) \
            if spec.root is None else (first[0], source_name, spec, val)
        expected = blamed_spec.a * sympy.Symbol(root.name) + blamed_spec.b
        where = f"where {root.name} = {value}" if first[4] == 0 else f"for an integer {root.name}"
        raise UserError(UserErrorType.CONSTRAINT_VIOLATION,
                        f"Expected input {blamed} to be equal to {expected}, {where}, but got {blamed_val}")

    def _root_symbol(self, root: DimSpec, hint: int, keep_zero_one: bool) -> sympy.Expr:
        """The engine's symbol for a derived dim's root.  Where an input's dim is the root itself, it is that
        dim's symbol (torch keeps a 0/1 example of it symbolic under ``backed_size_oblivious``); a root no
        input carries is specialized on a 0/1 value as torch does."""
        if root.name not in self._roots:
            own = self.dim_specs.get(root.name)
            carried = own is not None and own.root is None
            self._roots[root.name] = self.engine.create_backed_symbol(
                hint, Source(root.name), declared=(root.min, root.max), name=f"{root.name}_root",
                dim_name=root.name, specialize_zero_one=False if keep_zero_one and carried else None,
                uncarried_root=not carried)
        return self._roots[root.name]

    def _set_replacement(self, a, tgt, msg):
        super()._set_replacement(a, tgt, msg)
        if (self.replacements.get(a) == tgt and tgt.is_number
                and isinstance(self.symbol_map.get(a), sympy.Symbol)):
            self.engine.note_specialization(self.symbol_map[a], int(tgt))

    def create_unbacked_symint(self, source=None):
        out = super().create_unbacked_symint(source)
        self._mirror_unbacked(out.node.expr)
        return out

    def create_unbacked_symbool(self):
        out = super().create_unbacked_symbool()
        self.bool_symbols |= out.node.expr.free_symbols
        for sym in out.node.expr.free_symbols:
            engine_sym = self._mirror_unbacked(sym)
            if engine_sym is not None:
                self.engine.constrain_range(engine_sym, 0, 1)
        return out

    def _mirror_unbacked(self, sym) -> sympy.Symbol | None:
        if not isinstance(sym, sympy.Symbol) or sym in self.symbol_map:
            return None
        op = current_op()
        where = provenance()
        path = f"{op or 'a data-dependent value'}" + (f" at {where.frame.short}" if where.frame else "")
        engine_sym = self.engine.create_unbacked_symbol(Source(path, op=op, where=where), name=sym.name)
        self.symbol_map[sym] = engine_sym
        return engine_sym

    def _constrain_range_for_size(self, a, min=None, max=None):
        super()._constrain_range_for_size(a, min=min, max=max)
        sym = a.node.expr if isinstance(a, torch.SymInt) else a
        if sym in self.symbol_map:
            engine_sym = self.symbol_map[sym]
            self.engine.symbols[engine_sym].size_like = True
            self.engine.constrain_range(engine_sym, 0 if min is None else min, max)

    def _get_user_frame(self):
        """torch's "user frame" (guard locations, and whether a question comes from an ``assert``
        statement, which torch turns into a runtime assert), skipping this module's hooks too."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename not in uninteresting_files() and not filename.startswith(_TRACER_DIR):
                return frame
            frame = frame.f_back
        return None

    # -- questions -----------------------------------------------------------------
    def _convert(self, expr):
        return self.conversions().condition_or_none(expr)

    def conversions(self) -> Conversions:
        """Memoized conversions under the symbols mapped so far (they only grow, and a mapped symbol keeps
        its term, so the memo is rebuilt only when one is added)."""
        built_at, conversions = self._conversions
        if built_at != len(self.symbol_map):
            conversions = Conversions(self.symbol_map)
            self._conversions = (len(self.symbol_map), conversions)
        return conversions

    # torch declares it an lru_cache wrapper (the annotation of its _lru_cache decorator); the override is
    # a plain method, memoized by the engine's version below
    def _maybe_evaluate_static(  # type: ignore[override]
            self, expr, *, unbacked_only=False, compute_hint=False, size_oblivious=False, axioms=None,
            var_to_range=None):
        def torch_static():
            return super(EngineShapeEnv, self)._maybe_evaluate_static(
                expr, unbacked_only=unbacked_only, compute_hint=compute_hint, size_oblivious=size_oblivious,
                axioms=axioms, var_to_range=var_to_range)

        if (unbacked_only or compute_hint or var_to_range is not None
                or not isinstance(expr, sympy.logic.boolalg.Boolean) or not has_symbols(expr)):
            return torch_static()
        if self._producing_guards and isinstance(expr, sympy.Eq) and axioms is None:
            # torch enforcing a declared equality between inputs (a shared Dim): the engine knows
            # it by declaration, but torch must record it so the program checks it on its inputs
            return torch_static()
        torch_first = axioms is not None or smaller_than(expr, _TORCH_FIRST_NODES)
        if torch_first:
            result = torch_static()
            if result is not None:
                return result
        key = (expr, size_oblivious, axioms is None, self.engine.knowledge.version, len(self.engine.guards),
               tuple(self.engine.assumptions))
        if key not in self._static_memo:
            self._static_memo[key] = self._engine_static(expr, size_oblivious, ranges_only=axioms is not None,
                                                         before_torch=not torch_first)
        decided = self._static_memo[key]
        if decided is None:
            return None if torch_first else torch_static()
        return sympy.true if decided else sympy.false

    # torch's _refine_ranges clears this cache by attribute; keep it reachable on the override (an
    # attribute of the function object, which mypy does not model)
    setattr(_maybe_evaluate_static, "cache_clear", TorchShapeEnv._maybe_evaluate_static.cache_clear)

    def _engine_static(self, expr, size_oblivious: bool, ranges_only: bool,
                       before_torch: bool) -> bool | None:
        cond = self._convert(expr)
        if cond is None:
            return None
        if ranges_only:    # torch's produce_guards pruning: its ranges, no guards as premises
            ranges = {}
            for sym in expr.free_symbols:
                engine_sym = self.symbol_map.get(sym)
                if isinstance(engine_sym, sympy.Symbol) and sym in self.var_to_range:
                    ranges[engine_sym] = bounds_of(self.var_to_range[sym])
            return self.engine.known_from_ranges(self.engine.knowledge.condition(cond), ranges)
        return self.engine.statically_known(cond, size_oblivious=size_oblivious, where=provenance(),
                                            before_torch=before_torch)

    def evaluate_expr(self, orig_expr, hint=None, fx_node=None, size_oblivious=False, fallback_value=None, *,
                      forcing_spec=False):
        if self.size_tracker is not None:
            self.size_tracker.flush()
        if self.branch_merging is not None and fallback_value is None and not size_oblivious:
            merged = self._merged_branch(orig_expr)
            if merged is not None:
                return merged
        if self.branch_conds is not None and fallback_value is None and self._a_boolean_of_data(orig_expr):
            frame, node = jumping_user_frame(), guarded_node()
            answer = None if frame is None or node is None else self.branch_conds.convert(
                frame, orig_expr, data=torch.SymBool(node))
            if answer is not None:
                return answer
        if self._lowered and fallback_value is not None and self._lowered & orig_expr.free_symbols \
                and self._maybe_evaluate_static(orig_expr) is None:
            # a library's guard_or_false/true on a dim whose 0/1 example was moved off: its fallback, no
            # guard, as torch answers it under ``backed_size_oblivious`` (the program is checked at 0/1)
            self.unguarded_answers.append(("size-oblivious at a moved 0/1", orig_expr, fallback_value))
            return fallback_value
        if self._backed(orig_expr) and self._maybe_evaluate_static(orig_expr) is None:
            hintless = hintless_answer(orig_expr, fallback_value, sys._getframe(1), self._at_least_one)
            if hintless is not None:
                rule, answer = hintless
                self.unguarded_answers.append((rule, orig_expr, answer))
                return answer
        if self.sides and not self._producing_guards:
            answered = cond_sides.answer_in_side(self, orig_expr, size_oblivious)
            if answered is not None:
                return answered
        before = len(self.guards)
        self._evaluating += 1
        try:
            result = super().evaluate_expr(orig_expr, hint, fx_node, size_oblivious, fallback_value,
                                           forcing_spec=forcing_spec)
        except GuardOnDataDependentSymNode as exc:
            if isinstance(exc, TorchDataDependentError):
                raise
            raise self._data_dependent(exc) from None
        finally:
            self._evaluating -= 1
        self._mirror_guards(before)
        return result

    def _backed(self, expr) -> bool:
        """Whether ``expr`` is of backed sizes only: of unbacked ones torch asks and answers itself (a
        data-dependent question then has the size tracker follow the tensors the sizes come from)."""
        return expr.free_symbols <= self.backed_var_to_val.keys()

    def _a_boolean_of_data(self, expr) -> bool:
        """Whether ``expr`` is the truth of booleans read from tensors (``if mask.any():``)."""
        symbols = expr.free_symbols
        return bool(symbols) and symbols <= self.bool_symbols and self._maybe_evaluate_static(expr) is None

    def _at_least_one(self, size) -> bool:
        return self._maybe_evaluate_static(sympy.Ge(size, 1)) == sympy.true

    def _merged_branch(self, expr) -> bool | None:
        """The answer ``branch_merge`` gives an ``if`` of the user's code on sizes, or ``short_circuits`` an
        operand of ``and``/``or`` outside torch, or None (a guard as usual).  Only a question Python asks
        for a conditional jump, and one neither torch nor the engine settles statically, is either."""
        frame = _asking_frame()
        if frame is None or not has_symbols(expr) or self._maybe_evaluate_static(expr) is not None:
            return None
        assert self.branch_merging is not None
        answer = self.branch_merging.decide(expr, frame) if is_user_frame(frame) else None
        if answer is None and self.branch_conds is not None and is_user_frame(frame):
            answer = self.branch_conds.convert(frame, expr)
        if answer is None and not is_torch_frame(frame) and self._backed(expr):
            answer = short_circuit_answer(frame)
            if answer is not None:
                self.unguarded_answers.append(("short circuit", expr, answer))
        return answer

    # -- the sides of a torch.cond (cond_sides) ---------------------------------------------
    def assuming(self, condition, taken: bool):
        """Within: the side of a ``torch.cond`` that ``condition`` takes when ``taken`` is traced
        (``cond_sides``)."""
        return cond_sides.assuming(self, condition, taken)

    def equal_on_side(self, condition, taken: bool, a, b) -> bool:
        return cond_sides.equal_on_side(self, condition, taken, a, b)

    def unified_size(self, condition, on_true, on_false):
        return cond_sides.unified_size(self, condition, on_true, on_false)

    def retracing(self):
        """Within: torch traces this environment's graphs again outside an engine trace (a program's
        ``run_decompositions``, ``torch.onnx.export``): the engine's patches in place, as in the trace."""
        return engine_patches()

    # torch's is wrapped in functools.lru_cache, which mypy cannot see as a method; not cached here either
    def guard_or_defer_runtime_assert(self, orig_expr, msg, fx_node=None):  # type: ignore[override]
        if self.sides and not self._producing_guards and self._backed(orig_expr):
            answered = cond_sides.answer_in_side(self, orig_expr, size_oblivious=False)
            if answered is not None:
                return bool(answered)
        before_guards, before_asserts = len(self.guards), self._assert_count()
        result = super().guard_or_defer_runtime_assert(orig_expr, msg, fx_node)
        self._mirror_guards(before_guards)
        if self._assert_count() > before_asserts:
            cond = self._convert(orig_expr)
            if cond is not None:
                self.engine.record_runtime_assert(cond, provenance(), str(msg or ""))
        elif self._evaluating and self.prefer_deferred_runtime_asserts_over_guards:
            # export's ``prefer_deferred_runtime_asserts_over_guards``: evaluate_expr defers its guard here,
            # after narrowing ranges or replacing symbols by it, which can leave nothing to assert; the
            # program then relies on the narrowed range, which the engine judges as the guard it is
            cond = self._convert(orig_expr)
            if cond is None:
                self.unmirrored.append(orig_expr)
            else:
                self.engine.record_guard(cond, where=provenance())
        return result

    def _assert_count(self) -> int:
        return sum(len(v) for v in self.deferred_runtime_asserts.values())

    def _mirror_guards(self, before: int) -> None:
        if before == len(self.guards):
            return                     # most questions add no guard (and ``range`` is patched while tracing)
        if self._producing_guards:
            # torch enforcing declared input equalities: they stay torch's input checks
            return
        for index in range(before, len(self.guards)):
            guard = self.guards[index]
            cond = self._convert(guard.expr)
            if cond is None:
                self.unmirrored.append(guard.expr)
            elif self.engine.record_guard(cond, where=provenance(), size_oblivious=guard.size_oblivious):
                self.mirrored.add(index)

    def input_checks(self, graph_module, drop_mirrored: bool) -> list[str]:
        """The program's input checks (torch's ``_guards_code``), optionally without the guards the engine
        judged.

        After a region search proves a program valid beyond its own trace,
        the guards the engine mirrored are no longer requirements; what stays
        is what torch recorded alone (declared equalities, unreadable guards).
        """
        if not drop_mirrored:
            return convert_guards_to_code(graph_module)
        kept = [g for i, g in enumerate(self.guards) if i not in self.mirrored]
        saved, self.guards = self.guards, kept
        try:
            return convert_guards_to_code(graph_module)
        finally:
            self.guards = saved

    # -- the end of the trace ----------------------------------------------------------
    def produce_guards_verbose(self, *args, input_contexts=None, **kwargs):
        """torch's guard production, with its constraint violations demoted to warnings.

        The engine checks every mirrored guard against the declared ranges
        itself (``ShapeEnv.produce_guards``) and explains failures; letting
        torch raise first would leave no program, and shapeproof needs the
        program of each region to export across shape-dependent branches.
        torch's solver would also raise when guards force a dim to a constant
        ("Specializations unexpectedly required"); those guards are the
        engine's to judge as well.  Guards the engine could not read stay in
        torch's list and so become the program's input checks.
        """
        if self.size_tracker is not None:
            self.size_tracker.flush()
        if input_contexts is not None:
            input_contexts = [_warn_only(c) for c in input_contexts]
        if kwargs.get("equalities_inputs") is not None:   # "the values of W and H must always be equal"
            kwargs["equalities_inputs"] = dataclasses.replace(kwargs["equalities_inputs"], warn_only=True)
        self._producing_guards = True
        try:
            produced = super().produce_guards_verbose(*args, input_contexts=input_contexts, **kwargs)
        finally:
            self._producing_guards = False
        if self.dim_constraints is not None:   # its forced specializations are guards the engine checks too
            # instance attributes shadowing the DimConstraints methods export calls (names pinned in the door)
            dim_constraints = self.dim_constraints
            _, _, forced_specializations = FORCED_SPECIALIZATIONS     # (module, function, method)
            setattr(dim_constraints, forced_specializations, dict)
            for step in (SOLVE_CONSTRAINTS, PRETTIFY_RESULTS):
                setattr(dim_constraints, step, _best_effort(getattr(dim_constraints, step)))
        return produced

    def _data_dependent(self, exc: GuardOnDataDependentSymNode) -> Exception:
        """torch's data-dependent error, explained by the engine: a condition it cannot decide, or an integer
        expression (``int(t.item())``) that code wants as a Python int."""
        expr = getattr(exc, "cond", None)
        if expr is None:
            return exc
        if not isinstance(expr, sympy.Expr):       # a condition (a sympy Symbol is a Boolean too)
            cond = self._convert(expr)
            if cond is None:
                return exc
            try:
                self.engine.evaluate(cond, where=provenance())
                return exc
            except DataDependentError as engine_error:
                error = engine_error
        else:
            try:
                error = self.engine.concrete_value_error(self.conversions().term(expr), provenance())
            except UnsupportedExpression:
                return exc
        unbound: dict[sympy.Symbol, str] = self.size_tracker.unbound if self.size_tracker is not None else {}
        return TorchDataDependentError(expr, annotated(error, expr.free_symbols, unbound, self.bool_symbols))


def _asking_frame() -> FrameType | None:
    """The frame that asked for a truth value, when the question came straight from ``bool(symbool)``
    (``BOOL_GUARD_PATH``) rather than from inside torch."""
    frame: FrameType | None = sys._getframe(3)     # past _asking_frame, _merged_branch and evaluate_expr
    for _ in range(4):                              # and any wrapper of evaluate_expr
        if frame is None or frame.f_code.co_name == BOOL_GUARD_PATH[0]:
            break
        frame = frame.f_back
    for name in BOOL_GUARD_PATH:
        if frame is None or frame.f_code.co_name != name:
            return None
        frame = frame.f_back
    if frame is not None and frame.f_code is _INT_TRUTH:      # ``if size % 2:``: bool(size != 0)
        frame = frame.f_back
    return frame


_INT_TRUTH = torch.SymInt.__bool__.__code__


def _best_effort(step):
    """torch's fix suggestions only build a message: its constraint solver (``solve``, whose sympy
    inequalities raise NotImplementedError on some floor divisions: MobileViTV2 under Dim.AUTO) and the
    message itself (``prettify_results``, which crashes on some derived dims, ``math.ceil`` of a symbolic
    bound).  The engine explains failures itself, so a crash there must not fail the export."""
    def safe(*args, **kwargs):
        try:
            return step(*args, **kwargs)
        except Exception:  # the message is best-effort; see docstring
            return ""
    return safe


def _warn_only(context):
    sizes = getattr(context, "constraint_sizes", None)
    if not sizes:
        return context
    relaxed = [None if c is None else dataclasses.replace(c, warn_only=True) for c in sizes]
    return dataclasses.replace(context, constraint_sizes=relaxed)


def engine_tracing(engine: ShapeEnv, dim_specs: dict[str, DimSpec] | None = None,
                   buffers: dict[int, torch.Tensor] | None = None, prefer_deferred_asserts: bool = False,
                   unmerged: frozenset = frozenset(), cond_branches: bool = True,
                   lowest: dict[str, int] | None = None):
    """Context in which ``torch.export.export(strict=False)`` traces with ``engine`` deciding shapes.

    Uses export's documented reuse of an ambient TracingContext's fake mode
    (``_export/non_strict_utils.make_fake_inputs``); ``tracked_fakes=[]`` is
    required there.  The fake mode follows sizes through small tensors
    (``size_tracking``), including the model's ``buffers`` (by ``id``; see
    ``small_buffers``).  ``prefer_deferred_asserts`` is export's
    ``prefer_deferred_runtime_asserts_over_guards``, which export would have
    given the ShapeEnv it builds itself.  ``unmerged``: ``if`` statements (file, line) whose body
    an earlier attempt found not to be an identity on the side that skips it (``branch_merge``), and
    loops (``("loop", file, line, why)``) it found not to roll (``loops``).  ``cond_branches``: run an
    ``if`` whose sides differ as one ``torch.cond`` (``branch_cond``) rather than leave it a guard.
    ``lowest``: input dims (by torch's source name) whose example of 0 or 1 was moved off, with that
    size, which the trace must take into account (``export/search/zero_one.py``).
    Returns ``(context manager, EngineShapeEnv)``.
    """
    torch_env = EngineShapeEnv(engine=engine, dim_specs=dim_specs, tracked_fakes=[], trace_asserts=True,
                               prefer_deferred_runtime_asserts_over_guards=prefer_deferred_asserts)
    fake_mode = EngineFakeTensorMode(shape_env=torch_env, allow_non_fake_inputs=True, export=True,
                                     constants=buffers)
    torch_env.size_tracker = fake_mode.size_tracker
    torch_env.lowest = dict(lowest or {})
    torch_env.branch_merging = BranchMerging(torch_env, unmerged)
    torch_env.loop_rolling = LoopRolling(torch_env, unmerged)
    torch_env.branch_conds = BranchConds(torch_env, unmerged, enabled=cond_branches)
    return _traced(TracingContext(fake_mode), torch_env.branch_merging, torch_env.loop_rolling,
                   torch_env.branch_conds, fake_mode.size_tracker), torch_env


@contextmanager
def _traced(context: TracingContext, merging: BranchMerging, rolling: LoopRolling, conds: BranchConds,
            tracker: SizeTracker):
    with tracing_turn(), tracing(context), engine_patches(), swapped(conds.rewrites), IntArguments():
        try:
            yield
        finally:
            merging.abandon()
            rolling.abandon()
            tracker.close()


@contextmanager
def engine_patches():
    """Within: this thread runs engine code with everything it changes outside itself in place (``patching``):
    an engine trace, or torch tracing a program's graphs again (a ``torch.cond``'s sides, ``cond.py``)."""
    with engine_thread(), exact_cancellation(), symbolic_rnns(), loop_bodies_unfollowed():
        with sizes_checked_against_inputs(), cached_sym_exprs(), symbolic_user_names(), hintless_views():
            with conds_under_their_conditions():
                yield
