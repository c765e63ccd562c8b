"""Sizes that pass through small tensors stay symbolic: the value is followed, and bound at ``.item()``.

Audio codecs compute a pad amount with tensor arithmetic on a size
(``torch.ceil((L - k + p) / s).to(torch.int64)``): a function of ``L`` alone,
but torch turns the tensor into a fresh unbacked symbol wherever it becomes
an integer, and every later question about it is data-dependent.

The fake mode of an engine trace (``fake_mode``) hands every op it
dispatches to the ``SizeTracker``, which records the value of the output's
elements (``size_values``) when the op is elementwise arithmetic, a rounding,
a conversion, a comparison, ``where``, or a small view/creation op on inputs
whose values are known: sizes (SymInt/SymFloat operands, ``torch.tensor``
of a size), Python numbers, small constant tensors (``torch.tensor(3)``,
module attributes) and the model's small buffers (read when export
fakifies them, those ``regions.trace`` chooses).  Anything else, any
tensor written in place, and anything inside a loop's body (``loop_bodies``)
is not followed.

Where a followed integer tensor becomes an integer (``_local_scalar_dense``,
which ``.item()``, ``int()``, pad amounts, slice bounds and ``tolist()``
all reach), torch still creates its unbacked symbol ``u``, and the tracker
asserts ``u == value`` through ``guard_or_defer_runtime_assert``, exactly
what ``torch._check(u == value)`` in the user's code would do: torch
replaces ``u`` by the size expression in every later question, and keeps
``Eq(u, value)`` as a runtime assert of the program, which still computes
the tensor at run time.  A wrong value therefore makes the program raise,
never return a wrong result.  A followed boolean (``length <= max_pad``)
is a branch on sizes: it is decided like one (proven, or a guard on the
example) and ``u`` is bound to that side.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import sympy
import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils.weak import WeakIdKeyDictionary

from shapeproof.shapes import Provenance, capture

from .size_ops import (
    HANDLERS, ITEM_OPS, MAX_ELEMENTS, PyFloat, SymFloat, Tracked, named_arguments, read_values, writes,
)
from .size_values import FLOAT64, Algebra, BoolValue, FloatValue, IntValue, NotTracked, Value
from ..sympy_bridge import UnsupportedExpression
from ..torch_internals import (
    LOCAL_SCALAR_DENSE, FakeTensor, FloatTrueDiv, IntTrueDiv, ToFloat, ValueRanges, op_schema, pytree,
)

__all__ = ["SizeTracker", "Binding", "small_buffers"]


@dataclass(frozen=True)
class Binding:
    """An unbacked symbol torch created at ``where`` and the size expression it was asserted equal to."""

    symbol: sympy.Symbol
    expr: sympy.Expr
    where: Provenance


def small_buffers(model) -> dict[int, torch.Tensor]:
    """The model's buffers small enough to follow, by identity (export fakifies these objects)."""
    if model is None:
        return {}
    return {id(b): b for b in model.buffers() if b.numel() <= MAX_ELEMENTS and b.device.type == "cpu"}


def _unbacked_symbol(out) -> sympy.Symbol | None:
    """The fresh symbol of ``_local_scalar_dense``'s result: ``u`` of a SymInt, of a SymBool ``Eq(u, 1)``."""
    if isinstance(out, torch.SymInt):
        expr = out.node._expr
    elif isinstance(out, torch.SymBool):
        expr = out.node._expr
        expr = expr.lhs if isinstance(expr, sympy.Eq) and expr.rhs == 1 else None
    else:
        return None
    return expr if isinstance(expr, sympy.Symbol) else None


class SizeTracker:
    """The followed values of one trace's fake tensors, and the unbacked symbols bound to them."""

    def __init__(self, shape_env, constants: dict[int, torch.Tensor] | None = None):
        self.env = shape_env
        self.algebra = Algebra(self._bound)
        self.tracked = WeakIdKeyDictionary()     # fake tensor -> Tracked
        self.reasons = WeakIdKeyDictionary()     # fake tensor -> why its value is not followed, if known
        self.constants = dict(constants or {})
        self.bindings: dict[sympy.Symbol, Binding] = {}
        self.unbound: dict[sympy.Symbol, str] = {}   # unbacked symbol -> why its tensor was not followed
        self._pending: list[Binding] = []
        self._loop_depth = 0
        self.closed = False

    # -- ranges ---------------------------------------------------------------------------
    def _bound(self, expr) -> tuple[int | None, int | None]:
        try:
            term = self.env.conversions().term(expr)
        except UnsupportedExpression:
            return None, None
        return self.env.engine.bound(term)

    def decide(self, cond) -> bool | None:
        """True/False when the ranges decide ``cond`` (no guard recorded), else None."""
        decided = self.env._maybe_evaluate_static(cond)
        return None if decided is None else bool(decided)

    def _backed(self, expr) -> bool:
        return expr.free_symbols <= set(self.env.backed_var_to_val)

    def render(self, expr) -> str:
        """``expr`` in the user's dim names (torch's symbol names if the engine cannot read it)."""
        try:
            return self.env.engine.render(self.env.conversions().term(expr))
        except UnsupportedExpression:
            return str(expr)

    # -- inputs -----------------------------------------------------------------------------
    def captured(self, real: torch.Tensor, fake) -> None:
        """A tensor export fakified: follow it if it is one of the model's small buffers."""
        if self.constants.get(id(real)) is real:
            tracked = read_values(real)
            if tracked is not None:
                self._set(fake, tracked.shape, tracked.values)

    @contextmanager
    def in_loop_body(self):
        """Within: nothing is followed or bound.  A loop's body (``while_loop``, ``scan``, ``map``) is
        traced once on its first step's operands, but runs on other values at every later step."""
        self._loop_depth += 1
        try:
            yield
        finally:
            self._loop_depth -= 1

    def close(self) -> None:
        """The trace ended: nothing is followed or bound from now on.  The program's fake tensors keep
        this mode, and what uses them later (``run_decompositions``, AOTInductor's compile) runs ops this
        trace never made: AOTInductor lowers a ``scan`` to a loop whose counter, a small tensor read with
        ``item()``, would be bound to its first value (an assert ``u0 == 0`` that fails at the second
        step)."""
        self.closed = True

    def operand(self, x):
        """``Tracked`` for a followed operand (tensor or scalar), None when its value is not known."""
        if isinstance(x, FakeTensor):
            found = self.tracked.get(x)
            if found is not None:
                return found
            return read_values(x.constant) if x.constant is not None else None
        if isinstance(x, torch.Tensor):
            return read_values(x)
        if isinstance(x, bool):
            return Tracked((), (BoolValue(sympy.true if x else sympy.false),))
        if isinstance(x, int):
            return Tracked((), (IntValue(sympy.Integer(x)),))
        if isinstance(x, float):
            return Tracked((), (PyFloat(x),))
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            # torch replaced the symbols bound to size expressions; those bound to constants keep a range
            expr = x.node.expr.xreplace({s: b.expr for s, b in self.bindings.items()})
            if not self._backed(expr):
                return None
            value = IntValue(expr) if isinstance(x, torch.SymInt) else (
                SymFloat(expr) if isinstance(x, torch.SymFloat) else BoolValue(expr))
            return Tracked((), (value,))
        return None

    def _reason_of(self, args, kwargs) -> str | None:
        if not len(self.reasons):              # the common case, on every op of big tensors
            return None
        for x in pytree.tree_leaves((args, kwargs)):
            if isinstance(x, torch.Tensor) and x in self.reasons:
                return self.reasons[x]
        return None

    def _set(self, fake, shape, values) -> None:
        self.tracked[fake] = Tracked(tuple(shape), tuple(values), StorageWeakRef(fake.untyped_storage()))

    # -- after every op ---------------------------------------------------------------------
    def after(self, func, args, kwargs, out) -> None:
        if self._loop_depth or self.closed:
            if writes(func):
                self._forget_written(func, args, kwargs)
            return
        if func in ITEM_OPS:
            self._bind(args[0], out)
            return
        handler = HANDLERS.get(func)
        if handler is None:
            if writes(func):
                self._forget_written(func, args, kwargs)
            return
        outputs = list(out) if isinstance(out, (list, tuple)) else [out]
        if not all(isinstance(o, FakeTensor) for o in outputs):
            return
        try:
            values = handler(self, named_arguments(func, args, kwargs), outputs)
        except NotTracked as exc:
            for o in outputs:
                self.reasons[o] = f"{exc.reason} ({capture(op=str(func))})"
            return
        if values is None:
            reason = self._reason_of(args, kwargs)
            if reason is not None:
                for o in outputs:
                    self.reasons[o] = reason
            return
        for o, vals in zip(outputs, values):
            self._set(o, o.shape, vals)

    def _forget_written(self, func, args, kwargs) -> None:
        written = set()
        for i, arg in enumerate(op_schema(func).arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                t = args[i] if i < len(args) else kwargs.get(arg.name)
                if isinstance(t, torch.Tensor):
                    written.add(StorageWeakRef(t.untyped_storage()))
        if written:
            for t in [t for t, tr in self.tracked.items() if tr.storage in written]:
                del self.tracked[t]

    # -- integers handed to torch --------------------------------------------------------------
    def _bind(self, tensor, out) -> None:
        sym = _unbacked_symbol(out)
        if sym is None or sym in self.bindings:
            return
        tracked = self.operand(tensor) if isinstance(tensor, torch.Tensor) else None
        if tracked is None or len(tracked.values) != 1:
            reason = self.reasons.get(tensor) if isinstance(tensor, torch.Tensor) else None
            if reason is not None:
                self.unbound[sym] = reason
            return
        value = tracked.values[0]
        if isinstance(out, torch.SymInt) and isinstance(value, IntValue):
            expr = value.expr
        elif isinstance(out, torch.SymBool) and isinstance(value, BoolValue):
            # a branch on sizes: proven, or a guard on the example like any other size condition
            expr = sympy.Integer(1 if self.env.evaluate_expr(value.expr) else 0)
        else:
            return
        binding = Binding(sym, expr, capture(op=str(LOCAL_SCALAR_DENSE)))
        self.bindings[sym] = binding
        if expr.is_number:
            # replaced by a constant now, the result would turn into a plain int on its way back through C++
            # and torch would lose track of the symbol: bind it when the next question or op comes
            self._pending.append(binding)
        else:
            self._assert(binding)

    def _assert(self, b: Binding) -> None:
        """``torch._check(u == expr)``, and the replacement torch only makes when ``expr`` has no ``//``."""
        message = f"size computed through a tensor at {b.where}"
        self.env.guard_or_defer_runtime_assert(sympy.Eq(b.symbol, b.expr), message)
        self.env._set_replacement(b.symbol, b.expr, "shapeproof: size computed through a tensor")
        # the range torch derived for u from the expression follows from Eq(u, expr), which the program
        # asserts; left in place it would become two more asserts (u >= lo, u <= hi) per value
        self.env.var_to_range[b.symbol] = ValueRanges.unknown_int()

    @contextmanager
    def unreplaced(self):
        """Within: torch reads every bound symbol as itself, not as its expression (see ``size_asserts``)."""
        env = self.env
        saved = {s: env.replacements.pop(s) for s in self.bindings if s in env.replacements}
        self._replacements_changed()
        try:
            yield
        finally:
            env.replacements.update(saved)
            self._replacements_changed()

    def _replacements_changed(self) -> None:
        self.env._replacements_version_counter += 1      # SymNode.expr caches replace() by this counter
        self.env._update_version_counter()               # and the ShapeEnv's own caches by this one

    def flush(self) -> None:
        """Bind the symbols whose value is a constant (see ``_bind``); called before every op and question."""
        while self._pending:
            self._assert(self._pending.pop(0))

    # -- element values -----------------------------------------------------------------------
    def as_kind(self, v, kind) -> Value:
        """An element value converted to the computation kind of an op (``_kind`` of its result)."""
        if kind[0] == "float":
            return self.as_float(v, kind[1])
        if kind[0] == "bool":
            if isinstance(v, (PyFloat, SymFloat)):
                raise NotTracked("a float used as bool")
            return self.algebra.to_bool(v)
        return self.as_int(v)

    def as_int(self, v) -> IntValue:
        """An element value converted for integer arithmetic (``as_kind`` of an integer kind)."""
        if isinstance(v, (PyFloat, SymFloat)):
            raise NotTracked("a float used as int")
        if isinstance(v, BoolValue):     # True/False as 1/0, when the ranges decide which
            decided = self.decide(v.expr)
            if decided is None:
                raise NotTracked("a size condition used as a number")
            return IntValue(sympy.Integer(int(decided)))
        if isinstance(v, FloatValue):
            raise NotTracked("a float used in integer arithmetic")
        return v

    def as_float(self, v, bits: int) -> FloatValue:
        if isinstance(v, PyFloat):
            return self.algebra.constant_float(float(v), bits)
        if isinstance(v, SymFloat):
            return self.algebra.to_float(self._symfloat(v.expr), bits)
        return self.algebra.to_float(v, bits)

    def _symfloat(self, e) -> FloatValue:
        """A SymFloat's value (Python float semantics: float64) for the forms sizes take."""
        alg = self.algebra
        if e.is_Number:
            return alg.constant_float(float(e), FLOAT64)
        if isinstance(e, ToFloat):
            return alg.to_float(IntValue(e.args[0]), FLOAT64)
        if isinstance(e, (IntTrueDiv, FloatTrueDiv)):
            a, b = e.args
            fa = self._symfloat(a) if isinstance(e, FloatTrueDiv) else alg.to_float(IntValue(a), FLOAT64)
            fb = self._symfloat(b) if isinstance(e, FloatTrueDiv) else alg.to_float(IntValue(b), FLOAT64)
            return alg.float_op("div", fa, fb)
        raise NotTracked(f"the float size expression {e}")
