"""The ops a ``SizeTracker`` follows, and the element values of their operands and results.

Each handler takes ``(tracker, named, outputs)`` of one op torch dispatched
(``named``: its arguments by schema name) and returns one tuple of element values per output, None when
an operand's value is not known, or raises ``NotTracked`` when the values
are known but the result cannot be followed exactly.  The result's dtype is
the one the arithmetic ran in (torch's type promotion already happened), so
operands are converted to it (``SizeTracker.as_kind``) before the exact
operation of ``size_values``.  Tensors are followed up to ``MAX_ELEMENTS``
elements, with static shapes; broadcasting is only of single elements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import sympy
import torch

from .size_values import (
    FLOAT32, FLOAT64, Algebra, BoolValue, FloatValue, IntValue, NotTracked, Value, float_constant,
)
from ..torch_internals import LOCAL_SCALAR_DENSE, TO_COPY, UNSAFE_VIEW, OpOverload, op_schema



class SizeTracker(Protocol):
    """What the handlers ask of the tracker that calls them (``size_tracking.SizeTracker``)."""

    algebra: Algebra

    def decide(self, cond) -> bool | None: ...
    def operand(self, x): ...
    def as_kind(self, v, kind) -> Value: ...
    def as_int(self, v) -> IntValue: ...
    def as_float(self, v, bits: int) -> FloatValue: ...

__all__ = ["Tracked", "PyFloat", "SymFloat", "MAX_ELEMENTS", "HANDLERS", "ITEM_OPS", "kind_of",
           "named_arguments", "read_values", "writes"]

MAX_ELEMENTS = 16            # tensors with more elements are not followed
BITS = {torch.float32: FLOAT32, torch.float64: FLOAT64}
aten = torch.ops.aten


@dataclass(frozen=True)
class Tracked:
    """The element values of a small tensor (row-major), or of a scalar operand (shape ``()``)."""

    shape: tuple[int, ...]
    values: tuple
    storage: object = None     # StorageWeakRef of the fake tensor, to forget it when written in place


class PyFloat(float):
    """A Python float operand: its value depends on the dtype it is converted to."""


@dataclass(frozen=True)
class SymFloat:
    """A SymFloat operand (a float computed from sizes in Python), by its torch sympy expression."""

    expr: sympy.Expr


def kind_of(dtype: torch.dtype):
    if dtype is torch.bool:
        return ("bool",)
    if dtype in BITS:
        return ("float", BITS[dtype])
    if dtype.is_floating_point or dtype.is_complex:
        raise NotTracked(f"{dtype} arithmetic is not followed")
    info = torch.iinfo(dtype)
    return ("int", info.min, info.max)


def read_values(t: torch.Tensor) -> Tracked | None:
    """Values of a real (not fake) small CPU tensor."""
    if t.device.type != "cpu" or t.numel() > MAX_ELEMENTS or t.layout != torch.strided or t.requires_grad:
        return None
    try:
        kind = kind_of(t.dtype)
    except NotTracked:
        return None
    data = t.numpy().reshape(-1).tolist()          # numpy() reads the storage without dispatching
    values: tuple[Value, ...]
    if kind[0] == "int":
        values = tuple(IntValue(sympy.Integer(int(v))) for v in data)
    elif kind[0] == "bool":
        values = tuple(BoolValue(sympy.true if v else sympy.false) for v in data)
    else:
        values = tuple(float_constant(v, kind[1]) for v in data)
    return Tracked(tuple(t.shape), values)


def static_shape(t: torch.Tensor) -> tuple[int, ...] | None:
    shape = tuple(t.shape)
    if any(not isinstance(d, int) for d in shape) or math.prod(shape) > MAX_ELEMENTS:
        return None
    return shape


def _operands(tr: SizeTracker, xs, out) -> list[Tracked] | None:
    found = [tr.operand(x) for x in xs]
    if any(f is None for f in found):
        return None
    shape = static_shape(out)
    if shape is None:
        raise NotTracked("an output whose shape is not small and static")
    for f in found:
        if f.shape not in ((), shape) and math.prod(f.shape) != 1:
            raise NotTracked("broadcasting between shapes")
    return found


def _columns(found: list[Tracked], n: int):
    return zip(*[f.values * n if len(f.values) == 1 and n != 1 else f.values for f in found])


def named_arguments(func, args, kwargs) -> dict:
    """``func``'s arguments by their schema names (``alpha`` of ``add.Scalar`` may come positionally)."""
    named = dict(zip((a.name for a in op_schema(func).arguments), args))
    named.update(kwargs)
    return named


def _elementwise(fn: Callable, arg_names: tuple[str, ...] = ("self", "other")):
    """A handler applying ``fn(tracker, kind, *element_values)`` element by element."""
    def handler(tr: SizeTracker, named, outputs):
        out = outputs[0]
        found = _operands(tr, [named[name] for name in arg_names], out)
        if found is None:
            return None
        kind = kind_of(out.dtype)
        extra = {k: named[k] for k in ("alpha", "rounding_mode") if k in named}
        return [tuple(fn(tr, kind, *vals, **extra) for vals in _columns(found, math.prod(out.shape)))]
    return handler


def _arith(op: str, swap: bool = False):
    def fn(tr: SizeTracker, kind, a, b, alpha=1, rounding_mode=None):
        if swap:
            a, b = b, a
        if kind[0] == "int":
            x, y = tr.as_int(a), tr.as_int(b)
            if alpha != 1:
                y = tr.algebra.int_op("mul", y, IntValue(sympy.Integer(alpha)), kind[1], kind[2])
            if op == "div":
                if rounding_mode is None:
                    raise NotTracked("true division with an integer result")
                op2 = "floordiv" if rounding_mode == "floor" else "truncdiv"
                return tr.algebra.int_op(op2, x, y, kind[1], kind[2])
            return tr.algebra.int_op(op, x, y, kind[1], kind[2])
        if kind[0] != "float" or alpha != 1:
            raise NotTracked(f"{op} on {kind[0]} values" + (" with alpha" if alpha != 1 else ""))
        fx, fy = tr.as_float(a, kind[1]), tr.as_float(b, kind[1])
        if op == "floordiv":
            return tr.algebra.rounded(tr.algebra.float_op("div", fx, fy), "floor")
        result = tr.algebra.float_op(op, fx, fy)
        if op == "div" and rounding_mode is not None:
            result = tr.algebra.rounded(result, rounding_mode)
        return result
    return fn


def _unary(op: str):
    def fn(tr: SizeTracker, kind, a):
        if kind[0] == "int":
            x = tr.as_int(a)
            if op in ("ceil", "floor", "round", "trunc"):
                return x
            return tr.algebra.int_op(op, x, None, kind[1], kind[2])
        if kind[0] != "float":
            raise NotTracked(f"{op} on {kind[0]} values")
        fx = tr.as_float(a, kind[1])
        if op in ("ceil", "floor", "round", "trunc"):
            return tr.algebra.rounded(fx, op)
        return tr.algebra.float_op(op, fx, None)
    return fn


def _compare(op: str):
    def fn(tr: SizeTracker, kind, a, b):
        floats = [v.bits for v in (a, b) if isinstance(v, FloatValue)]
        if any(isinstance(v, BoolValue) for v in (a, b)):
            bits = None
        elif floats:
            bits = max(floats)
        elif any(isinstance(v, (PyFloat, SymFloat)) for v in (a, b)):
            bits = BITS.get(torch.get_default_dtype(), FLOAT32)
        else:
            bits = None
        if bits is not None:
            a, b = tr.as_float(a, bits), tr.as_float(b, bits)
        return tr.algebra.compare(op, a, b, bits)
    return fn


def _logical(op: str):
    def fn(tr: SizeTracker, kind, a, b=None):
        if kind[0] != "bool":           # bitwise_* of integers
            raise NotTracked(f"bitwise {op} of {kind[0]} values")
        x = tr.algebra.to_bool(a)
        return tr.algebra.bool_op(op, x, None if b is None else tr.algebra.to_bool(b))
    return fn


def _where(tr: SizeTracker, kind, cond, a, b):
    alg = tr.algebra
    return alg.choose(alg.to_bool(cond), tr.as_kind(a, kind), tr.as_kind(b, kind), tr.decide)


def _clamp(tr: SizeTracker, kind, a, lo=None, hi=None):
    if kind[0] not in ("int", "float"):     # fake tensors clamp booleans (CPU kernels do not)
        raise NotTracked(f"clamp on {kind[0]} values")
    bounds = [(bound, op) for bound, op in ((lo, "max"), (hi, "min")) if bound is not None]
    if kind[0] == "int":
        value = tr.as_int(a)
        for bound, op in bounds:
            value = tr.algebra.int_op(op, value, tr.as_int(bound), kind[1], kind[2])
        return value
    x = tr.as_float(a, kind[1])
    for bound, op in bounds:
        x = tr.algebra.float_op(op, x, tr.as_float(bound, kind[1]))
    return x


def _clamp_handler(names):
    def handler(tr, named, outputs):
        xs = [named.get(name) for name in names]
        present = [x for x in xs if x is not None]
        found = _operands(tr, present, outputs[0])
        if found is None:
            return None
        kind = kind_of(outputs[0].dtype)
        slots = [i for i, x in enumerate(xs) if x is not None]
        results = []
        for vals in _columns(found, math.prod(outputs[0].shape)):
            full = [None] * len(xs)
            for i, v in zip(slots, vals):
                full[i] = v
            results.append(_clamp(tr, kind, *full))
        return [tuple(results)]
    return handler


def _convert(tr: SizeTracker, named, outputs):
    """``_to_copy``: a dtype conversion (floats to integers truncate, as C's cast does)."""
    out = outputs[0]
    found = _operands(tr, [named["self"]], out)
    if found is None:
        return None
    kind = kind_of(out.dtype)
    if kind[0] != "int":
        return [tuple(tr.as_kind(v, kind) for v in found[0].values)]
    # to an integer dtype: floats truncate, integers must fit
    to_int = tr.algebra.to_int
    return [tuple(tr.as_kind(v, kind) if isinstance(v, BoolValue) else to_int(v, kind[1], kind[2])
                  for v in found[0].values)]


def _same_values(tr: SizeTracker, named, outputs):
    """Views and copies that keep the elements in order (reshape, squeeze, clone, ...)."""
    src = tr.operand(named["self"])
    if src is None:
        return None
    out = outputs[0]
    shape = static_shape(out)
    if shape is None or out.dtype != named["self"].dtype:
        raise NotTracked("a view whose shape is not small and static")
    n = math.prod(shape)
    if n == len(src.values):
        return [src.values]
    if len(src.values) == 1:          # expand of a single element
        return [src.values * n]
    raise NotTracked("a view that reorders elements")


def _select(tr: SizeTracker, named, outputs):
    src = tr.operand(named["self"])
    if src is None:
        return None
    dim, index = named["dim"], named["index"]
    if len(src.shape) != 1 or dim not in (0, -1) or not isinstance(index, int):
        raise NotTracked("select from a tensor that is not 1-d")
    return [(src.values[index],)]


def _unbind(tr: SizeTracker, named, outputs):
    src = tr.operand(named["self"])
    if src is None:
        return None
    dim = named.get("dim", 0)
    if len(src.shape) != 1 or dim not in (0, -1):
        raise NotTracked("unbind of a tensor that is not 1-d")
    return [(v,) for v in src.values]


def _mixed_dtypes(tensors, out) -> bool:
    return any(t.dtype != out.dtype for t in tensors)


def _stack(tr: SizeTracker, named, outputs):
    tensors, dim = named["tensors"], named.get("dim", 0)
    found = [tr.operand(t) for t in tensors]
    if any(f is None for f in found):
        return None
    if any(f.shape != () for f in found) or dim not in (0, -1) or _mixed_dtypes(tensors, outputs[0]):
        raise NotTracked("stack of tensors that are not 0-d of one dtype")
    return [tuple(f.values[0] for f in found)]


def _cat(tr: SizeTracker, named, outputs):
    tensors = named["tensors"]
    found = [tr.operand(t) for t in tensors]
    if any(f is None for f in found):
        return None
    if any(len(f.shape) != 1 for f in found) or _mixed_dtypes(tensors, outputs[0]):
        raise NotTracked("cat of tensors that are not 1-d of one dtype")
    return [tuple(v for f in found for v in f.values)]


def _fill(value_of: Callable):
    """Creation ops (``scalar_tensor``, ``full``, ``zeros``, ``ones``): one value repeated."""
    def handler(tr: SizeTracker, named, outputs):
        out = outputs[0]
        shape = static_shape(out)
        if shape is None:
            raise NotTracked("a created tensor whose shape is not small and static")
        found = tr.operand(value_of(named))
        if found is None:
            return None
        return [(tr.as_kind(found.values[0], kind_of(out.dtype)),) * math.prod(shape)]
    return handler


def _items(ops: dict) -> dict:
    """Handlers by operator; a key is an operator (a private one, from the door) or names of ``aten``'s."""
    table = {}
    for names, handler in ops.items():
        if isinstance(names, OpOverload):
            table[names] = handler
            continue
        for name in names.split():
            packet, _, overload = name.partition(".")
            table[getattr(getattr(aten, packet), overload or "default")] = handler
    return table


HANDLERS = _items({
    **{f"{op}.Tensor {op}.Scalar": _elementwise(_arith(op)) for op in ("add", "sub", "mul")},
    "rsub.Tensor rsub.Scalar": _elementwise(_arith("sub", swap=True)),
    "div.Tensor div.Scalar div.Tensor_mode div.Scalar_mode": _elementwise(_arith("div")),
    "floor_divide floor_divide.Scalar": _elementwise(_arith("floordiv")),
    "remainder.Tensor remainder.Scalar": _elementwise(_arith("remainder")),
    "minimum": _elementwise(_arith("min")),
    "maximum": _elementwise(_arith("max")),
    **{op: _elementwise(_unary(op), ("self",)) for op in ("neg", "abs", "ceil", "floor", "round", "trunc")},
    **{f"{op}.Tensor {op}.Scalar": _elementwise(_compare(op)) for op in ("eq", "ne", "lt", "le", "gt", "ge")},
    "logical_and bitwise_and.Tensor": _elementwise(_logical("and")),
    "logical_or bitwise_or.Tensor": _elementwise(_logical("or")),
    "logical_xor bitwise_xor.Tensor": _elementwise(_logical("xor")),
    "logical_not bitwise_not": _elementwise(_logical("not"), ("self",)),
    "where.self where.ScalarSelf where.ScalarOther where.Scalar":
        _elementwise(_where, ("condition", "self", "other")),
    "clamp clamp.Tensor": _clamp_handler(("self", "min", "max")),
    "clamp_min clamp_min.Tensor": _clamp_handler(("self", "min")),
    "clamp_max clamp_max.Tensor": _clamp_handler(("self", "max")),
    TO_COPY: _convert,
    "clone alias detach lift_fresh lift_fresh_copy view": _same_values,
    UNSAFE_VIEW: _same_values,
    "reshape squeeze squeeze.dim squeeze.dims unsqueeze expand": _same_values,
    "select.int": _select,
    "unbind.int": _unbind,
    "stack": _stack,
    "cat": _cat,
    "scalar_tensor": _fill(lambda named: named["s"]),
    "full": _fill(lambda named: named["fill_value"]),
    "zeros": _fill(lambda named: 0),
    "ones": _fill(lambda named: 1),
})
ITEM_OPS = (LOCAL_SCALAR_DENSE, aten.item.default)
_WRITES: dict = {}


def writes(func) -> bool:
    """Does ``func`` write into one of its arguments (in-place or ``out=`` ops)?"""
    if func not in _WRITES:
        schema = op_schema(func)
        _WRITES[func] = schema is not None and any(
            a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return _WRITES[func]
