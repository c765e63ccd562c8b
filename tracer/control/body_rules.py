"""What a body taken for every input may call (``branch_merge``): identity rules, per call.

Each rule runs the call and, where the engine proves the result has its
input's values wherever the body is skipped (a pad of 0, a slice of the whole
dim, a resize to the size the tensor has, a copy, a view or ``cat`` with
nothing), records it as an identity on the body (``_Body.identity`` /
``copied``); views between identities are followed as index maps
(``view_maps``).  ``BodyMode`` sends each tensor call of the body here:
questions about a tensor and calls that make new values pass, anything else
refuses the merge (``Refused``).
"""
from __future__ import annotations

import ast
import inspect

import torch
import torch.nn.functional as F_nn
from torch.overrides import TorchFunctionMode

from shapeproof import solver as S

from . import view_maps as VM

__all__ = ["BodyMode", "Refused", "follow", "inexact_resize"]


class Refused(Exception):
    """The body cannot be taken for every input (the reason is the message)."""


# torch functions a body may call, besides the identity rules below: questions about a tensor, and calls
# whose results are new values (or views) with no effect
QUERIES = {*(getattr(torch.Tensor, name) for name in ("size", "dim", "numel", "stride", "__len__",
                                                         "element_size", "nelement")),
            *(inspect.getattr_static(torch.Tensor, name).__get__
              for name in ("shape", "ndim", "dtype", "device", "T", "mT"))}
FRESH = {*(getattr(torch, name) for name in ("zeros", "ones", "full", "empty", "zeros_like", "ones_like",
                                               "full_like", "empty_like")),
          *(getattr(torch.Tensor, name) for name in (
              "new_zeros", "new_ones", "new_full", "new_empty", "permute", "transpose", "flatten",
              "unsqueeze", "squeeze", "narrow", "expand", "expand_as", "to", "type_as", "float", "__add__",
              "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__neg__"))}


def _bind(func, args, kwargs) -> dict:
    return dict(inspect.signature(func).bind(*args, **kwargs).arguments)


def _pad(body, func, args, kwargs):
    a = _bind(F_nn.pad, args, kwargs)
    x, mode = a["input"], a.get("mode", "constant")
    if mode != "constant":
        raise Refused(f"a pad in mode {mode!r}")
    amounts = [body.neutral(p, 0) for p in a["pad"]]
    return body.copied(func(x, amounts, mode, a.get("value")), x)


# resizes that are exact at the same size for every input (tests/test_branch_merge.py checks them on eager):
# nearest modes copy; linear and cubic ones do too with ``antialias`` (without it, 0 * inf is nan)
_EXACT_RESIZE = ("nearest", "nearest-exact")


def inexact_resize(body) -> str | None:
    """A resize of the body written with a literal mode that is not exact at the same size (ViT's
    ``mode="bicubic", align_corners=False``), which ``_interpolate`` would refuse once traced to it."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if not isinstance(node, ast.Call) or getattr(node.func, "attr", getattr(node.func, "id", None)) \
                != "interpolate":
            continue
        given = {k.arg: k.value for k in node.keywords}
        mode, antialias = given.get("mode"), given.get("antialias")
        if isinstance(mode, ast.Constant) and mode.value not in _EXACT_RESIZE and not (
                isinstance(antialias, ast.Constant) and antialias.value is True):
            return f"line {node.lineno}: a resize in mode {mode.value!r}, not exact at the same size"
    return None


def _interpolate(body, func, args, kwargs):
    a = _bind(F_nn.interpolate, args, kwargs)
    x, size = a["input"], a.get("size")
    exact = a.get("mode", "nearest") in _EXACT_RESIZE or a.get("antialias", False)
    if size is None or a.get("scale_factor") is not None or not exact:
        raise Refused("a resize that is not exact at the same size")
    spatial = list(x.shape[2:])
    sizes = [size] * len(spatial) if isinstance(size, (int, torch.SymInt)) else list(size)
    if len(sizes) != len(spatial):
        raise Refused("a resize to another rank")
    same = S.conj(*(S.eq(body.term(s), body.term(d)) for s, d in zip(sizes, spatial)))
    result = func(*args, **kwargs)
    return body.copied(result, x) if body.proven(same, body.skipped) else result


def _getitem(body, func, args, kwargs):
    x, index = args[0], args[1]
    parts = list(index) if isinstance(index, tuple) else [index]
    if any(p is Ellipsis for p in parts):
        at = parts.index(Ellipsis)
        parts[at:at + 1] = [slice(None)] * (x.dim() - len(parts) + 1)
    if len(parts) > x.dim() or not all(isinstance(p, slice) for p in parts):
        return func(*args, **kwargs)
    parts = [_from_the_start(body, part, size) for part, size in zip(parts, x.shape)] + parts[len(x.shape):]
    result = func(x, tuple(parts))
    whole = []
    for part, size in zip(parts, x.shape):
        if part.step not in (None, 1) or part.start not in (None, 0):
            return result
        if part.stop is not None:
            whole.append(S.ge(body.term(part.stop), body.term(size)))
    return body.identity(result, x) if body.proven(S.conj(*whole), body.skipped) else result


def _from_the_start(body, part: slice, size):
    """``part`` with a stop counted from the end where the body runs (``out[:, :-p]``, ``p > 0`` there)
    made the same stop counted from the start, ``size - p``: at ``p == 0``, where the body is skipped,
    ``-p`` would be an empty slice and ``size - p`` is the whole dim, the identity the merge needs
    (proven, not assumed)."""
    stop = part.stop
    if not isinstance(stop, torch.SymInt) or part.step not in (None, 1):
        return part
    term, length = body.term(stop), body.term(size)
    if not body.proven(S.conj(S.lt(term, 0), S.ge(term, -length)), body.condition):
        return part
    body.rewrites.append((term, length + term))
    return slice(part.start, size + stop, part.step)


def _copy(body, func, args, kwargs):
    """``clone`` and ``contiguous``.  ``contiguous`` copies only a tensor not laid out contiguously, which
    over merged sizes is a question of their values (a guard); a copy has its values either way."""
    x = args[0]
    if func is torch.Tensor.contiguous:
        memory_format = kwargs.get("memory_format", args[1] if len(args) > 1 else torch.contiguous_format)
        if memory_format is not torch.contiguous_format:
            raise Refused(f"contiguous({memory_format})")
        result = torch.Tensor.clone(x, memory_format=torch.contiguous_format)
    else:
        result = func(*args, **kwargs)
    return body.copied(result, x)


def _view(body, func, args, kwargs):
    x = args[0]
    shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
    result = func(*args, **kwargs)
    if kwargs or len(shape) != x.dim() or any(isinstance(s, int) and s == -1 for s in shape):
        return result
    same = S.conj(*(S.eq(body.term(s), body.term(d)) for s, d in zip(shape, x.shape)))
    return body.identity(result, x) if body.proven(same, body.skipped) else result


def _cat(body, func, args, kwargs):
    tensors = list(args[0] if args else kwargs["tensors"])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    result = func(*args, **kwargs)
    if len(tensors) < 2 or any(t.dtype != result.dtype for t in tensors):
        return result
    for keep in tensors:
        others = [t for t in tensors if t is not keep]
        empty = S.conj(*(S.eq(body.term(t.shape[dim]), 0) for t in others if t.dim() == result.dim()))
        if all(t.dim() == result.dim() for t in others) and body.proven(empty, body.skipped):
            return body.copied(result, keep)
    return result


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _dims(args, start: int = 1) -> list[int]:
    rest = args[start:]
    return list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)) else list(rest)


def follow(body, func, args, kwargs, result: torch.Tensor) -> VM.IndexMap | None:
    """The index map of ``result = func(*args, **kwargs)`` (``view_maps``); None when it has none."""
    T = torch.Tensor
    x = args[0] if args else None
    if func in (torch.cat, torch.concat, torch.concatenate):
        tensors = list(args[0] if args else kwargs["tensors"])
        if any(t.dim() != result.dim() or t.dtype != result.dtype for t in tensors):
            return None
        dim = _dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), result.dim())
        return VM.joined([body.map_of(t) for t in tensors], [body.term(t.shape[dim]) for t in tensors], dim,
                         result, body)
    if not isinstance(x, torch.Tensor) or result.dtype != x.dtype:
        return None
    source = body.map_of(x)
    if source is None:
        return None
    if func is T.__getitem__:
        parts = list(args[1]) if isinstance(args[1], tuple) else [args[1]]
        return VM.index(source, parts, result, body)
    if func is T.narrow and not kwargs:
        dim, start, length = _dim(args[1], x.dim()), args[2], args[3]
        return VM.index(source, [slice(None)] * dim + [slice(start, start + length)], result, body)
    if kwargs:
        return None
    if func is T.transpose:
        order = list(range(x.dim()))
        a, b = _dim(args[1], x.dim()), _dim(args[2], x.dim())
        order[a], order[b] = order[b], order[a]
        return VM.permuted(source, order)
    if func is T.permute:
        return VM.permuted(source, [_dim(d, x.dim()) for d in _dims(args)])
    if func is T.unsqueeze:
        return VM.unsqueezed(source, _dim(args[1], x.dim() + 1))
    if func is T.squeeze:
        return VM.squeezed(source, result, body)
    if func in (T.view, T.reshape, T.flatten, T.view_as, T.reshape_as):
        return VM.reshaped(source, result, body)
    if func in (T.to, T.float, T.type_as):
        return VM.resized(source, result, body)      # the same dtype: the same values
    return None


_RULES = {F_nn.pad: _pad, F_nn.interpolate: _interpolate, torch.Tensor.__getitem__: _getitem,
          torch.Tensor.contiguous: _copy, torch.Tensor.clone: _copy, torch.Tensor.view: _view,
          torch.Tensor.reshape: _view, torch.cat: _cat, torch.concat: _cat, torch.concatenate: _cat}


class BodyMode(TorchFunctionMode):
    """Every tensor call of a body taken for every input: identities checked, pure calls passed, the rest
    refused."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = _RULES.get(func)
        if rule is not None:
            try:
                result = rule(self.body, func, args, kwargs)
            except Refused as exc:
                self.body.merging.fail(self.body, str(exc))
            self.body.follow(func, args, kwargs, result)
            return result
        if func in QUERIES:
            return func(*args, **kwargs)
        if func in FRESH:
            result = func(*args, **kwargs)
            self.body.follow(func, args, kwargs, result)
            return result
        name = getattr(func, "__qualname__", func)
        self.body.merging.fail(self.body, f"it calls {name}, which is not known to be free of effects")
