"""What a body's calls may do, decided against the running frame's values: tensor methods and pure functions.

A body the trace takes for every input (``branch_merge``) or rolls into one
scan (``loops``) is accepted only when every call in it is a tensor method or
a function from a table of pure ones, never the user's own code (which could
do anything).  Attribute reads are evaluated on the frame's values only
where the attribute is plain data of the object: a property could run code.
"""
from __future__ import annotations

import ast
import inspect
import math
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F_nn

from ..sizes.symbolic_casts import SymbolicInt, sqrt_of_sizes
from ..user_source import names_bound

__all__ = ["Kind", "Known", "Effects", "Unseen", "lookup", "plain_attribute", "PURE_PYTHON", "EFFECTS"]


class Kind:
    """What the effect check knows of a value: a tensor, a plain value, or a known object."""

    TENSOR = "tensor"
    PLAIN = "plain"          # numbers, SymInts, strings, tuples of those: Python arithmetic has no effect


@dataclass(frozen=True)
class Known:
    value: object


class Effects:
    """Decides that every call of a body is a tensor method or a pure function (``check``).

    ``is_tensor(value)`` tells tensors; ``pure`` maps pure functions (by
    identity) to the kind they return; ``methods`` are the tensor methods a
    body may call, by the kind they return.  Attribute reads are evaluated on
    the frame's values only where the attribute is plain data of the object
    (or a module's parameter, buffer or submodule): a property could run code.
    """

    def __init__(self, is_tensor: Callable[[object], bool], pure: dict, methods: dict,
                 tensor_attributes: frozenset[str], is_module: Callable[[object], bool]):
        self.is_tensor, self.pure, self.methods = is_tensor, pure, methods
        self.tensor_attributes, self.is_module = tensor_attributes, is_module

    def check(self, statements: Iterable[ast.stmt], frame: FrameType) -> str | None:
        """Why a call in ``statements`` could have an effect the trace does not see; None when none could."""
        kinds: dict[str, object] = {}
        for stmt in statements:
            value = getattr(stmt, "value", None)
            if value is None or isinstance(stmt, ast.Expr):
                continue
            try:
                kind = self._kind(value, kinds, frame)
            except Unseen as exc:
                return f"line {stmt.lineno}: {exc}"
            for name in names_bound(stmt):  # an unpacked tensor is tensors; anything else unpacks to plain
                kinds[name] = kind if _single(stmt) or kind is Kind.TENSOR else Kind.PLAIN
        return None

    def _kind(self, node: ast.expr, kinds: dict, frame: FrameType):
        if isinstance(node, ast.Constant):
            return Kind.PLAIN
        if isinstance(node, ast.Name):
            if node.id in kinds:
                return kinds[node.id]
            return self._of(lookup(frame, node.id))
        if isinstance(node, ast.Attribute):
            base = self._kind(node.value, kinds, frame)
            if base is Kind.TENSOR:
                if node.attr in self.tensor_attributes:
                    return Kind.PLAIN
                raise Unseen(f"the tensor attribute `{node.attr}`")
            if isinstance(base, Known):
                return self._of(plain_attribute(base.value, node.attr, self.is_module))
            raise Unseen(f"an attribute `{node.attr}` of a computed value")
        if isinstance(node, ast.Subscript):
            base = self._kind(node.value, kinds, frame)
            self._kind(node.slice, kinds, frame)
            if base is Kind.TENSOR:
                return Kind.TENSOR
            if isinstance(base, Known) and isinstance(base.value, (tuple, list)):
                return Kind.PLAIN
            if base is Kind.PLAIN:
                return Kind.PLAIN
            raise Unseen("an item of an object")
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self._kind(part, kinds, frame)
            return Kind.PLAIN
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                if self._kind(element, kinds, frame) is Kind.TENSOR:
                    return Kind.PLAIN       # a tuple holding tensors: read only through calls below
            return Kind.PLAIN
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.operand]
            kinds_of = [self._kind(o, kinds, frame) for o in operands]
            if any(isinstance(k, Known) and not _is_plain(k.value) for k in kinds_of):
                raise Unseen("arithmetic on an object")
            return Kind.TENSOR if Kind.TENSOR in kinds_of else Kind.PLAIN
        if isinstance(node, ast.Call):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                self._kind(argument, kinds, frame)
            return self._call(node, kinds, frame)
        raise Unseen(f"`{type(node).__name__}`")

    def _call(self, node: ast.Call, kinds: dict, frame: FrameType):
        func = node.func
        if isinstance(func, ast.Attribute):
            base = self._kind(func.value, kinds, frame)
            if base is Kind.TENSOR:
                if func.attr not in self.methods:
                    raise Unseen(f"the tensor method `{func.attr}`")
                return self.methods[func.attr]
            if not isinstance(base, Known):
                raise Unseen(f"a method `{func.attr}` of a computed value")
            target = plain_attribute(base.value, func.attr, self.is_module, functions=True)
        else:
            assert isinstance(func, ast.Name)
            if func.id in kinds:
                raise Unseen(f"a call of the local `{func.id}`")
            target = lookup(frame, func.id)
        kind = _pure_kind(self.pure, target)
        if kind is None:
            raise Unseen(f"a call of `{ast.unparse(func)}`, whose effects are not known")
        return kind

    def _of(self, value) -> object:
        if self.is_tensor(value):
            return Kind.TENSOR
        if _is_plain(value):
            return Kind.PLAIN
        return Known(value)


def _single(stmt: ast.stmt) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return len(targets) == 1 and isinstance(targets[0], ast.Name)


class Unseen(Exception):
    """A part of the body whose effects cannot be seen."""


_MISSING = object()


def lookup(frame: FrameType, name: str):
    for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
        if name in scope:
            return scope[name]
    raise Unseen(f"the unbound name `{name}`")


def _is_plain(value) -> bool:
    if isinstance(value, (int, float, str, bytes, bool, type(None))):
        return True
    if isinstance(value, (tuple, list)):
        return all(_is_plain(v) for v in value)
    return type(value).__name__ in ("SymInt", "SymFloat", "SymBool", "Size", "dtype", "device")


def plain_attribute(obj, name: str, is_module: Callable[[object], bool], functions: bool = False):
    """``getattr(obj, name)`` where reading it runs no code of the user's: instance data, a module's
    parameters, buffers and submodules, class constants, attributes of Python modules."""
    if inspect.ismodule(obj):
        value = getattr(obj, name, _MISSING)
    else:
        static = inspect.getattr_static(obj, name, _MISSING)
        if static is _MISSING and is_module(obj):
            static = next((table[name] for table in (obj.__dict__.get(t, {}) for t in
                           ("_parameters", "_buffers", "_modules")) if name in table), _MISSING)
            value = static
        elif isinstance(static, (property, staticmethod, classmethod)) or (
                hasattr(type(static), "__get__") and not callable(static) and not inspect.isroutine(static)):
            raise Unseen(f"the attribute `{name}`, computed by a descriptor")
        elif inspect.isroutine(static) and not functions:
            raise Unseen(f"the method `{name}` read as a value")
        else:
            value = getattr(obj, name, _MISSING)
    if value is _MISSING:
        raise Unseen(f"the missing attribute `{name}`")
    return value


def _pure_kind(pure: dict, target) -> object | None:
    """The kind ``target`` returns if it is pure: by identity, or for a library's function by its
    (module, qualified name), so that the library need not be imported to name it."""
    try:
        found = pure.get(target)
    except TypeError:            # unhashable
        return None
    if found is None and inspect.isfunction(target):
        found = pure.get((target.__module__, target.__qualname__))
    return found


# builtins and math functions that compute on numbers and sizes without effects
PURE_PYTHON = {f: Kind.PLAIN for f in (int, float, abs, max, min, len, round, tuple, list, divmod, pow,
                                         math.ceil, math.floor, math.sqrt, math.prod, math.gcd)}


# ---------------------------------------------------------------------------- in a trace

def _tensor_methods() -> dict:
    plain = ("size", "dim", "numel", "stride", "element_size", "nelement")
    tensors = ("contiguous", "clone", "view", "reshape", "permute", "transpose", "flatten", "unsqueeze",
               "squeeze", "new_zeros", "new_ones", "new_full", "new_empty", "narrow", "to", "type_as",
               "float", "view_as", "reshape_as", "expand", "expand_as")
    return {**{m: Kind.PLAIN for m in plain}, **{m: Kind.TENSOR for m in tensors}}


_TORCH: dict[Any, str] = {f: Kind.TENSOR for f in (
    F_nn.pad, F_nn.interpolate, torch.cat, torch.concat, torch.concatenate, torch.zeros, torch.ones,
    torch.full, torch.empty, torch.zeros_like, torch.ones_like, torch.full_like, torch.empty_like)}
# (``SymbolicInt``, ``sqrt_of_sizes``: ``int`` and ``math.sqrt`` as the user's code sees them in a trace)
_TORCH.update({f: Kind.PLAIN for f in (torch.sym_int, torch.sym_max, torch.sym_min, torch.sym_float,
                                            SymbolicInt, sqrt_of_sizes)})
# transformers' casts of sizes (``int(x)``/``float(x)``, or ``x.to(...)`` of a tensor while jit-tracing)
_TORCH.update({("transformers.utils.generic", name): Kind.PLAIN
                    for name in ("torch_int", "torch_float")})
# what a body in a trace may call: tensor methods, pure functions of Python and torch
EFFECTS = Effects(lambda v: isinstance(v, torch.Tensor), {**PURE_PYTHON, **_TORCH}, _tensor_methods(),
                  frozenset({"shape", "ndim", "dtype", "device", "T", "mT"}),
                  lambda v: isinstance(v, torch.nn.Module))
