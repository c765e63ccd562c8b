"""A Python loop over a size becomes one ``scan`` in the program, when every iteration is the same function.

While an engine trace runs, ``range()`` over a size whose length the
declared ranges do not fix (``symbolic_range``) asks ``LoopRolling.roll``
before falling back to Python's ``range`` (which fixes the length to the
example's).  When the loop's source qualifies (``loop_sites``), the loop
is rolled:

1. what changes nothing is checked first (a failure here leaves the loop to
   Python, in the same trace): the step is 1; the solver proves that every
   read ``x[..., t, ...]`` and write ``out[..., t, ...]`` stays inside its
   dim for every size the declared ranges accept (0 and 1 included, which
   torch's 0/1 convention traces as 2: an index out of its dim there would
   be the rolling's doing); carried values are tensors, appended lists are
   empty, a written tensor shares no memory with anything the body reads.
   A scan runs at least one step: where the loop may run none inside the
   traced ranges, the scan steps once on a slice of zeros there and drops
   the results; where it runs none only at a size 0 or 1 (traced as 2, and
   so simplified away), the export warns that the program raises there;
2. the body, compiled from the user's statements as a function of
   (carried values, the reads at ``t``), runs under torch's ``scan`` with
   the reads sliced along their dim as its inputs: the trip count is the
   symbolic size.  torch traces it once, with dynamo in ``fullgraph`` mode,
   which refuses a body that changes Python state (an attribute, a global,
   an outer list) or mutates a tensor it does not own.  dynamo traces in a
   ShapeEnv of its own and checks its guards on the trace's sizes, so a
   guard the body asks (an ``if`` on a size) is a guard of the trace;
3. the solver proves each carried value's shape after an iteration equal to
   its shape before (torch checks dtype and device): the carried values are
   a fixpoint, so by induction every iteration runs the traced graph on
   values of the same shapes, and the index reaches the body only through
   the sliced inputs;
4. the frame is left as the loop would leave it: carried names are bound to
   the scan's final values, each appended list holds one marker that
   ``torch.stack``/``torch.cat`` turn into the stacked outputs (``_Stacked``),
   each written tensor receives the stacked outputs along its dim, and a
   comprehension's stack/cat call returns its stacked outputs (``_Window``).
   The ``for`` statement then iterates over nothing.

``torch.tensor(list(range(n)))`` (and the like, ``loop_sites.ArangeSite``)
becomes ``torch.arange`` the same way: the call at its place in the source
returns the ``arange`` instead of a tensor of nothing.

A failure in steps 2-4 raises ``LoopNotRolled`` into the trace, which export
then makes again without rolling that loop (``refused_after``); so does any
failure of a trace that rolled a loop.  A loop left to Python adds an engine
note naming its line and why, shown with the specialization it causes.
"""
from __future__ import annotations

import ast
import re
import sys
import types
from dataclasses import dataclass
from types import FrameType
from typing import Any, NoReturn

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw
from torch.overrides import TorchFunctionMode

from shapeproof import solver as S

from .branch_merge import no_new_frames
from .branch_sites import Refusal, SiteAbandoned
from .effects import Unseen, lookup, plain_attribute
from ..user_source import instructions
from .frame_locals import set_locals
from .loop_sites import CONSUMERS, INDEX, REST, TENSOR_CALLS, WHOLE, ArangeSite, Indexed, LoopSite, loop_site
from ..sympy_bridge import UnsupportedExpression
from ..torch_internals import pytree, reset_dynamo_code, scan, scan_compiled_code, zero_one_unspecialized
from ..sizes.user_globals import python_names

__all__ = ["LoopNotRolled", "LoopRolling", "RolledLoop"]

# the functions that read a rolled list, by the names a consumer's source may call (``loop_sites``)
_CONSUMING = {getattr(torch, name) for name in CONSUMERS}
_STACKS = {torch.stack}
_TENSOR_CALLS = {getattr(torch, name) for name in TENSOR_CALLS}


class LoopNotRolled(SiteAbandoned):
    """A loop rolled into a scan turned out not to be one: trace again with Python's ``range`` there."""


@dataclass(frozen=True)
class RolledLoop:
    """A loop a trace rolled into one ``scan`` (or a range made a tensor into one ``arange``)."""

    key: tuple[str, int]
    text: str
    trips: sympy.Expr                    # its trip count, an engine term
    carried: tuple[str, ...]
    outputs: int                         # stacked outputs (appended lists, writes, a comprehension's values)
    op: str = "scan"                     # or "arange": a range made a tensor
    # an input of size 0 or 1 the declared ranges allow, where the loop runs no iteration and the scan,
    # traced as at 2 (torch.export's 0/1 convention), raises
    empty_at: dict | None = None


class _Static(Exception):
    """The loop is left to Python, in this very trace (nothing was traced for it)."""


@dataclass
class _Plan:
    """What step 1 found: the values the rolled loop starts from."""

    start: int | torch.SymInt
    trips: int | torch.SymInt            # the trip count
    free: list                           # values of ``site.free``, in order
    init: list[torch.Tensor]             # carried values
    reads: list[tuple[torch.Tensor, int, int, tuple]]   # (base, its dim at t, the dim in the read, parts)
    lists: list[list]
    outs: list[tuple[torch.Tensor, int, tuple]]        # (written tensor, its dim at t, parts)
    may_be_empty: bool                   # some input of the tracing ranges runs no iteration
    empty_at: dict | None                # else, an input of size 0 or 1 allowed by the declared ranges that
                                         # runs none (torch.export's 0/1 convention traces it as 2)


class LoopRolling:
    """The loops one trace rolls (``EngineShapeEnv.loop_rolling``).

    ``unrolled`` holds the loops (``("loop", file, line, reason)``) an earlier
    attempt found not to roll; ``rolled`` lists the loops rolled,
    ``refusals`` why loops over sizes were left to Python.
    """

    def __init__(self, env, unrolled: frozenset = frozenset()):
        self.env = env
        self.unrolled = {(key[1], key[2]): key[3] for key in unrolled
                         if isinstance(key, tuple) and len(key) == 4 and key[0] == "loop"}
        self.rolled: list[RolledLoop] = []
        self.refusals: dict[tuple[str, int], str] = {}
        self.failed: dict[tuple[str, int], str] = {}      # refused mid-trace: the trace is made again
        self._busy = False
        self._windows: list[_Window] = []

    # -- the hook -------------------------------------------------------------
    def roll(self, frame: FrameType, start, stop, step, trips):
        """An empty tuple (what the loop then iterates over, or the consumer of the range receives) after
        rolling the loop ``frame`` is starting with ``range(start, stop, step)`` (``trips`` iterations, a
        SymInt); None to leave it to Python."""
        if self._busy:                       # a loop inside a body being traced: Python's, there
            return None
        site = loop_site(frame)
        if site is None:
            return None
        if isinstance(site, Refusal):
            return self._leave(site.key, site.reason)
        if site.key in self.unrolled:
            return self._leave(site.key, self.unrolled[site.key])
        if isinstance(site, ArangeSite):
            return self._arange(site, frame, start, stop, step, trips)
        try:
            plan = self._plan(site, frame, start, step, trips)
        except _Static as exc:
            return self._leave(site.key, str(exc))
        self._busy = True
        try:
            carried, ys = self._scan(site, frame, plan)
        except LoopNotRolled:
            raise
        except Exception as exc:  # any failure to trace the body as one scan: trace again without rolling
            self.fail(site.key, _reason(exc, site.carried))
        finally:
            self._busy = False
        self._leave_frame(site, frame, plan, carried, ys)
        self.rolled.append(RolledLoop(site.key, site.text, self._term(trips), site.carried, site.outputs,
                                      empty_at=plan.empty_at))
        return ()

    def _arange(self, site: ArangeSite, frame: FrameType, start, stop, step, trips):
        """``torch.tensor`` of the range's values (or of ``e(i)`` for each) as an ``arange``, when the call
        takes no option but ``dtype`` and ``device``: exact, for the values are integers that int64
        computes as Python does (``loop_sites``).  Of no value at all the call makes a float32 tensor,
        hence a trip count of at least 1."""
        try:
            _torch_function(frame, site.consumer.func, _TENSOR_CALLS)
            self._require(S.ge(self._term(trips), 1),
                          "it may have no element for sizes in the declared ranges")
        except _Static as exc:
            return self._leave(site.key, str(exc))
        element = None if site.element is None else types.FunctionType(site.element, frame.f_globals)

        def arange(func, args, kwargs):
            options = dict(kwargs)
            if len(args) > 1:
                if func is not torch.as_tensor or len(args) > 3:
                    return None
                options.update(zip(("dtype", "device"), args[1:]))
            if set(options) - {"dtype", "device", "requires_grad", "pin_memory"} \
                    or options.get("requires_grad") or options.get("pin_memory"):
                return None
            values = torch.arange(start, stop, step, device=options.get("device"))
            if element is not None:
                values = element(values)
                if not isinstance(values, torch.Tensor):               # an element that is a constant
                    values = torch.full((trips,), values, device=options.get("device"))
            dtype = options.get("dtype")
            return values if dtype is None else values.to(dtype)

        self._open_window(site.key, frame, site.consumer, _TENSOR_CALLS, arange)
        self.rolled.append(RolledLoop(site.key, site.text, self._term(trips), (), 1, "arange"))
        return ()

    def _leave(self, key: tuple[str, int], reason: str) -> None:
        if key not in self.refusals:
            self.refusals[key] = reason
            text = _line(key)
            self.env.engine.notes.append(
                f"the loop at {key[0]}:{key[1]} (`{text}`) runs a number of times the declared ranges do not "
                f"fix; it was not rolled into one scan ({reason}), so tracing unrolls it at the example's "
                "length")
        return None

    def fail(self, key: tuple[str, int], reason: str) -> NoReturn:
        """Give up a loop already being rolled: the trace is made again without rolling it."""
        self.failed.setdefault(key, reason)
        raise LoopNotRolled(key, reason)

    def refused_after(self, suspect: bool) -> frozenset:
        """The loops the next attempt must leave to Python: those refused mid-trace and, when ``suspect``
        (the trace failed, and not because a site refused), every loop it rolled (it may be what broke it)."""
        failed = dict(self.failed)
        if suspect:
            for loop in self.rolled:
                failed.setdefault(loop.key, "the trace failed after the loop was rolled")
        return frozenset(("loop", *key, reason) for key, reason in failed.items())

    def abandon(self) -> None:
        """Close the comprehension windows a trace that failed left open."""
        for window in list(self._windows):
            window.close()

    # -- step 1: what changes nothing -------------------------------------------
    def _plan(self, site: LoopSite, frame: FrameType, start, step, trips) -> _Plan:
        if not (type(step) is int and step == 1):
            raise _Static(f"its step is {step}, not 1")
        for func in site.stackers:
            _torch_function(frame, func, _CONSUMING)
        runs = S.ge(self._term(trips), 1)
        may_be_empty = not self.env.engine.proven(runs)
        if may_be_empty and guarding_hint_or_throw(trips) < 1:
            raise _Static("it runs no iteration at the example's sizes (the scan is traced on one)")
        empty_at = None if may_be_empty else self.env.engine.counterexample_over_declared(runs)
        if site.reads or site.writes:
            self._require(S.ge(self._term(start), 0), "its start may be negative")
        values = frame.f_locals
        free = []
        for name in site.free:
            if name not in values:
                raise _Static(f"the body reads `{name}`, which has no value before the loop")
            free.append(values[name])
        init = []
        for name in site.carried:
            value = values.get(name, _MISSING)
            if not isinstance(value, torch.Tensor):
                kind = "no value" if value is _MISSING else f"a {type(value).__name__}"
                raise _Static(f"`{name}`, carried from one iteration to the next, has {kind} before the loop "
                              "(the first iteration differs from the others)")
            init.append(value)
        lists = []
        for name in site.appended:
            value = values.get(name)
            if type(value) is not list or value:
                raise _Static(f"`{name}` is not an empty list when the loop starts")
            lists.append(value)
        reads = [self._placed(item, self._base(item, frame), start, trips) for item in site.reads]
        outs = []
        for name, item in site.writes:
            out = values.get(name)
            if not isinstance(out, torch.Tensor):
                raise _Static(f"`{name}`, written at the index, is not a tensor")
            _, dim, position, parts = self._placed(item, out, start, trips)
            outs.append((out, position, parts))
        if outs:
            read = [t for value in free + init for t in _tensors(value)] + [r[0] for r in reads]
            for out, _, _ in outs:       # the body reads a written tensor's metadata only (``loop_sites``)
                if any(_shares_memory(out, t) for t in read if t is not out):
                    raise _Static("a tensor it writes at the index shares memory with one the body reads")
        return _Plan(start, trips, free, init, reads, lists, outs, may_be_empty, empty_at)

    def _base(self, item: Indexed, frame: FrameType) -> torch.Tensor:
        """The tensor ``item`` reads from, evaluated without running code (a local and plain attributes)."""
        chain, node = [], item.base
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        name = node.id if isinstance(node, ast.Name) else None
        if name not in frame.f_locals:
            raise _Static(f"`{item.text}` reads from something other than a local")
        value = frame.f_locals[name]
        try:
            for attr in reversed(chain):
                value = plain_attribute(value, attr, lambda o: isinstance(o, torch.nn.Module))
        except Unseen as exc:
            raise _Static(f"`{item.text}`: {exc}") from None
        if not isinstance(value, torch.Tensor):
            raise _Static(f"`{item.text}` indexes a {type(value).__name__}, not a tensor")
        return value

    def _placed(self, item: Indexed, base: torch.Tensor, start, trips) -> tuple:
        """``(base, its dim at t, that dim's position in base[parts], parts)``, after proving that every
        index the loop takes is inside the dim."""
        parts = list(item.parts)
        if REST in parts:
            at = parts.index(REST)
            parts[at:at + 1] = [WHOLE] * (base.dim() - len(parts) + 1)
        if len(parts) > base.dim() or REST in parts:
            raise _Static(f"`{item.text}` has more indices than its tensor has dims")
        dim = parts.index(INDEX)
        position = sum(1 for p in parts[:dim] if p == WHOLE)
        inside = S.le(self._term(start) + self._term(trips), self._term(base.shape[dim]))
        self._require(inside, f"`{item.text}` may index past its dim for sizes in the declared ranges")
        return base, dim, position, tuple(parts)

    # -- step 2 and 3: the scan ------------------------------------------------
    def _scan(self, site: LoopSite, frame: FrameType, plan: _Plan) -> tuple:
        xs = [self._sliced(base, dim, position, parts, plan) for base, dim, position, parts in plan.reads]
        steps = plan.trips
        if plan.may_be_empty:
            # torch's scan runs at least one step: where the loop runs none, it runs one on a slice of zeros
            # and its results are dropped (the carried values stay their initial ones, nothing is stacked)
            steps = torch.sym_max(plan.trips, 1)
            xs = [torch.cat([x, x.new_zeros((1, *x.shape[1:]))]).narrow(0, 0, steps) for x in xs]
        if not xs:
            xs = [torch.empty((steps, 0))]                      # scan needs an input to count the steps
        # the carried values as contiguous copies (equal values; a view's symbolic strides trip dynamo), and a
        # value to carry when the loop carries none (scan needs one)
        init = [torch.clone(c, memory_format=torch.contiguous_format) for c in plan.init] or [torch.zeros(())]
        body = types.FunctionType(site.factory, frame.f_globals)(*plan.free, _fresh)
        compiled = scan_compiled_code()
        reset_dynamo_code(compiled)
        try:
            with python_names(), zero_one_unspecialized():
                carried, ys = scan(body, tuple(init), tuple(xs))
        finally:
            reset_dynamo_code(compiled)
        for name, before, after in zip(site.carried, plan.init, carried):
            if not self._same_shape(before.shape, after.shape):
                self.fail(site.key, f"`{name}` does not keep its shape from one iteration to the next: "
                                    f"{_shape(before)} before, {_shape(after)} after")
        if plan.may_be_empty:            # the step on zeros is dropped: the loop ran none
            trips: Any = plan.trips
            carried = [torch.where(torch.full((), trips, device=after.device) > 0, after, before)
                       for before, after in zip(init, carried)]
            ys = [y.narrow(0, 0, plan.trips) for y in ys]
        return carried, ys

    def _sliced(self, base: torch.Tensor, dim: int, position: int, parts: tuple, plan: _Plan) -> torch.Tensor:
        """``base[parts]`` for every index of the loop, the loop's dim first."""
        view = base if all(p in (WHOLE, INDEX) for p in parts) else base[_index(parts, slice(None))]
        view = view.movedim(position, 0) if position else view
        whole = self._proven(S.conj(S.eq(self._term(plan.start), 0),
                                    S.eq(self._term(plan.trips), self._term(view.shape[0]))))
        return view if whole else view.narrow(0, plan.start, plan.trips)

    # -- step 4: the frame as the loop would leave it ---------------------------
    def _leave_frame(self, site: LoopSite, frame: FrameType, plan: _Plan, carried, ys) -> None:
        if site.carried:
            set_locals(frame, dict(zip(site.carried, carried)))
        outputs = list(ys)
        for values in plan.lists:
            values.append(_Stacked(self, site.key, outputs.pop(0)))
        for out, position, parts in plan.outs:
            self._write(site, plan, out, position, parts, outputs.pop(0))
        if site.consumer is not None:
            values = outputs.pop(0)

            def stacked(func, args, kwargs):
                dim = _dim_of(func, args, kwargs)
                return None if dim is None or "out" in kwargs else _stacked(func, values, dim)
            self._open_window(site.key, frame, site.consumer, _CONSUMING, stacked)

    def _open_window(self, key, frame, consumer, funcs, replace) -> None:
        window = _Window(self, key, frame, consumer, frozenset(funcs), replace)
        self._windows.append(window)
        window.open()

    def _write(self, site: LoopSite, plan: _Plan, out: torch.Tensor, position: int, parts: tuple,
               stacked: torch.Tensor) -> None:
        """``out[parts at t] = value`` for every iteration's value (``stacked``, the loop's dim first).

        The values go into a copy of the place (``out[parts]`` over every index), which is then copied
        into the place whole: a copy into the place narrowed to the loop's indices would have torch check
        that view for internal overlap, asking whether the trip count is 1, a guard the loop never asked
        (each of its writes is one index).  For the same reason the values are broadcast only where their
        shape differs from the place's (an expand asks of every dim whether it is 1)."""
        place_dims = out.dim() - sum(1 for p in parts if isinstance(p, int))   # the index's dim included
        if stacked.dim() > place_dims:
            self.fail(site.key, "a value written at the index has more dims than its place")
        stacked = stacked[(slice(None),) + (None,) * (place_dims - stacked.dim())]   # leading dims of 1
        place = out[_index(parts, slice(None))]
        values = stacked.movedim(0, position)
        shape = place.narrow(position, plan.start, plan.trips).shape
        if not self._same_shape(values.shape, shape):
            values = values.expand(shape)
        place.copy_(place.slice_scatter(values, position, plan.start, plan.start + plan.trips))

    # -- proofs -------------------------------------------------------------------
    def _same_shape(self, a: torch.Size, b: torch.Size) -> bool:
        return len(a) == len(b) and self._proven(S.conj(*(S.eq(self._term(p), self._term(q))
                                                          for p, q in zip(a, b))))

    def _term(self, value) -> sympy.Expr:
        if isinstance(value, bool):
            raise _Static("a boolean where a size was expected")
        if isinstance(value, int):
            return sympy.Integer(value)
        if isinstance(value, torch.SymInt):
            try:
                return self.env.conversions().term(value.node.expr)
            except UnsupportedExpression as exc:
                raise _Static(f"a size the engine cannot read ({exc})") from None
        raise _Static(f"a {type(value).__name__} where a size was expected")

    def _proven(self, goal: S.Formula) -> bool:
        """A claim of a rolled loop (its indices are inside their dims, its carried shapes are a fixpoint)
        holds for every input the program accepts: sizes 0 and 1 included, which torch's convention
        elsewhere reasons about as if they were 2."""
        return self.env.engine.counterexample_over_declared(goal) is None

    def _require(self, goal: S.Formula, reason: str) -> None:
        """Leave the loop to Python unless ``goal`` is proven (as ``_proven``), saying where it may fail."""
        point = self.env.engine.counterexample_over_declared(goal)
        if point is not None:
            at = ", ".join(f"{k} = {v}" for k, v in point.items())
            raise _Static(f"{reason}: {at}" if at else reason)


_MISSING = object()


def _torch_function(frame: FrameType, func: ast.expr, allowed: set) -> None:
    """Check, without running code, that ``func`` (``torch.stack`` as written in the frame's code) is one of
    the ``allowed`` torch functions: another ``stack`` would receive what the rolled loop left in place of
    its values (a marker, an empty list)."""
    try:
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            raise Unseen("a computed function")
        value = plain_attribute(lookup(frame, func.value.id), func.attr,
                                lambda o: isinstance(o, torch.nn.Module), functions=True)
        if any(value is f for f in allowed):
            return
    except Unseen:
        pass
    raise _Static(f"`{ast.unparse(func)}` is not torch's {'/'.join(sorted(f.__name__ for f in allowed))}")


def _fresh(carried, ys, carried_in, xs_in):
    """One iteration's results with no output that is an input or another output (torch's scan refuses
    aliasing): a value returned as it came, or twice, is cloned; stacked outputs always are."""
    inputs = list(carried_in) + list(xs_in)
    out: list = []
    for value in carried:
        for other in inputs + out:
            if value is other:
                value = value.clone()
                break
        out.append(value)
    return tuple(out), tuple(y.clone() for y in ys)


def _index(parts: tuple, at) -> tuple:
    return tuple(at if p == INDEX else slice(None) if p == WHOLE else p for p in parts)


def _tensors(value) -> list[torch.Tensor]:
    """The tensors ``value`` holds: itself, the leaves of a container, a module's parameters and buffers."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, torch.nn.Module):
        return [*value.parameters(), *value.buffers()]
    if isinstance(value, (list, tuple, dict)):
        return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]
    return []


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def _line(key: tuple[str, int]) -> str:
    import linecache
    return linecache.getline(key[0], key[1]).strip()


def _reason(exc: BaseException, carried: tuple[str, ...]) -> str:
    """A failure of torch's scan, in one line: which carried value changed what (torch's own message names
    the sizes by dynamo's symbols, so only the kind of change is kept, with dtypes and devices as they
    are), else dynamo's explanation or the graph break it reports."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        found = re.match(r"pair\[(\d+)\] differ in (.*?), where lhs", line)
        if found is not None:
            which = int(found.group(1))
            name = f"`{carried[which]}`" if which < len(carried) else "a carried value"
            changes = [(kind, what) for kind, what in re.findall(r"'(\w+): (.*?)'", found.group(2))
                       if kind != "stride" or "shape" not in found.group(2)]      # a new shape, new strides
            kinds = " and ".join(kind for kind, _ in changes) or "metadata"
            details = "; ".join(what.replace(" vs ", " before, ") + " after" for kind, what in changes
                                if kind not in ("shape", "stride"))
            return f"{name} does not keep its {kinds} from one iteration to the next" + (
                f" ({details})" if details else "")
    for marker in ("Explanation:", "Got graph break/error:"):
        for at, line in enumerate(lines):
            if line.startswith(marker):
                text = line[len(marker):].strip() or next(iter(lines[at + 1:at + 2]), "")
                return f"torch's scan: {text[:300]}"
    return f"torch's scan: {type(exc).__name__}: {lines[0][:300] if lines else ''}"


def _dim_of(func, args: tuple, kwargs: dict):
    dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
    return dim if type(dim) is int else None


def _stacked(func, values: torch.Tensor, dim: int) -> torch.Tensor:
    """What ``func`` (stack or cat) gives for the iterations' values ``values`` (stacked along dim 0)."""
    if func in _STACKS:
        dim = dim + values.dim() if dim < 0 else dim
        return values.movedim(0, dim).contiguous()
    dim = dim + values.dim() - 1 if dim < 0 else dim
    return values.movedim(0, dim).flatten(dim, dim + 1).contiguous()


class _Stacked:
    """What a rolled list holds after the loop: the iterations' values, stacked; ``torch.stack``/``cat`` of
    the list read them (any other use gives up the rolling)."""

    def __init__(self, rolling: LoopRolling, key: tuple[str, int], values: torch.Tensor):
        self.rolling, self.key, self.values = rolling, key, values

    @classmethod
    def __torch_function__(cls, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = args[0] if args else kwargs.get("tensors", ())
        markers = [leaf for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, _Stacked)]
        marker = markers[0]
        dim = _dim_of(func, args, kwargs)
        alone = type(tensors) is list and len(tensors) == 1 and tensors[0] is marker
        if func not in _CONSUMING or not alone or dim is None or "out" in kwargs:
            name = getattr(func, "__name__", func)
            marker.rolling.fail(marker.key, f"the list the loop appends to is read by {name} other than as "
                                            "the one argument of stack/cat")
        return _stacked(func, marker.values, dim)


class _Window(TorchFunctionMode):
    """From a rolled range to the call that consumes what the range became (a comprehension's values,
    an empty list, no values at all): that call, at its place in the source and made with the empty
    sequence, returns ``replace(func, args, kwargs)`` instead (a stack of the scan's outputs, an ``arange``).
    The mode is pushed when the loop is rolled and popped at the frame's first line event past the call
    (``sys.settrace``, armed for that frame only); a window closed unconsumed gives up the rolling."""

    def __init__(self, rolling: LoopRolling, key: tuple[str, int], frame: FrameType, consumer: ast.Call,
                 funcs: frozenset, replace):
        super().__init__()
        self.rolling, self.key, self.frame, self.consumer = rolling, key, frame, consumer
        self.funcs, self.replace = funcs, replace
        self.consumed = False
        self._previous: tuple = (None, None)

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.consumed and func in self.funcs and args and type(args[0]) in (list, tuple) \
                and not args[0] and self._at_consumer():
            result = self.replace(func, args, kwargs)
            if result is not None:
                self.consumed = True
                return result
        return func(*args, **kwargs)

    def _at_consumer(self) -> bool:
        found = instructions(self.frame.f_code).get(self.frame.f_lasti)
        if found is None or found[1] is None or found[1].lineno is None:
            return False
        return (found[1].lineno, found[1].col_offset) == (self.consumer.lineno, self.consumer.col_offset)

    def open(self) -> None:
        self.__enter__()
        frame, consumer = self.frame, self.consumer
        first, last = consumer.lineno, consumer.end_lineno or consumer.lineno
        chained = frame.f_trace
        self._previous = (sys.gettrace(), chained)

        def watch(f, event, arg):
            if chained is not None:
                chained(f, event, arg)
            if event == "line" and first <= f.f_lineno <= last and not self.consumed:
                return watch
            self.close()
            return chained
        sys.settrace(self._previous[0] if self._previous[0] is not None else no_new_frames)
        frame.f_trace = watch
        frame.f_trace_lines = True

    def close(self) -> None:
        if self not in self.rolling._windows:
            return
        self.rolling._windows.remove(self)
        self.__exit__(None, None, None)
        previous_global, previous_local = self._previous
        self.frame.f_trace = previous_local
        sys.settrace(previous_global)
        if not self.consumed:
            self.rolling.failed.setdefault(self.key, "the call that consumes it did not read it as written")
