"""Which elements of a tensor from before a merged body each of its views holds, where the body is skipped.

A merged body (``branch_merge``) runs for every input, and where its
condition is false it must leave the values the skipped code would have
given.  Single ops that are identities there (a pad by 0, a resize to the
size a tensor has) are one case; chains of views are another: TimeSformer's
table resize takes ``table[0, 1:, :]``, transposes it, reshapes it into a
grid, resizes it to the size it has, flattens and transposes it back and
concatenates the class row in front again, which is ``table`` itself.

Each step is an index map onto one tensor from before the body, read in
its logical (row-major) order, not its memory::

    t[i_0, ..., i_k] == source.reshape(-1)[offset + i_0 * stride_0 + ... + i_k * stride_k]

Views move the map (an index adds to the offset, a transpose swaps
strides, a reshape regroups them by torch's own rule for views), identities
and copies keep it, and a ``cat`` of maps that tile one source joins them.
A map whose offset is 0 and whose strides are the row-major ones of
``source``'s shape is ``source`` itself: equal values, bit for bit (layout
is checked apart, by the caller).  Sizes are engine terms; every comparison
is decided by a proof where the body is skipped (``Where``), and one that is
not decided ends the map (``None``: the tensor is then just a new value).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import sympy
import torch

from shapeproof import solver as S

__all__ = ["IndexMap", "Where", "identity", "is_source", "index", "permuted", "reshaped", "joined",
           "unsqueezed", "squeezed", "resized"]


class Where(Protocol):
    """Terms of sizes, and proofs where the body is skipped."""

    def term(self, value) -> sympy.Expr: ...

    def holds(self, goal: S.Formula) -> bool: ...


@dataclass(frozen=True)
class IndexMap:
    source: torch.Tensor
    sizes: tuple
    strides: tuple
    offset: sympy.Expr

    @property
    def dim(self) -> int:
        return len(self.sizes)


class _Undecided(Exception):
    pass


def _decide(where: Where, goal: S.Formula) -> bool:
    if where.holds(goal):
        return True
    if where.holds(S.neg(goal)):
        return False
    raise _Undecided


def _row_major(sizes) -> tuple:
    strides, step = [], sympy.Integer(1)
    for size in reversed(sizes):
        strides.append(step)
        step = step * size
    return tuple(reversed(strides))


def _sizes(t: torch.Tensor, where: Where) -> tuple:
    return tuple(where.term(s) for s in t.shape)


def identity(source: torch.Tensor, where: Where) -> IndexMap:
    sizes = _sizes(source, where)
    return IndexMap(source, sizes, _row_major(sizes), sympy.Integer(0))


def is_source(m: IndexMap, t: torch.Tensor, where: Where) -> bool:
    """``m`` reads all of ``t``, in order: its values are ``t``'s where the body is skipped."""
    if m.source is not t or m.dim != t.dim():
        return False
    sizes = _sizes(t, where)
    parts = [S.eq(m.offset, 0)]
    parts += [S.eq(a, b) for a, b in zip(m.sizes, sizes)]
    parts += [S.disj(S.le(size, 1), S.eq(stride, expected))
              for size, stride, expected in zip(sizes, m.strides, _row_major(sizes))]
    return where.holds(S.conj(*parts))


def resized(m: IndexMap, result: torch.Tensor, where: Where) -> IndexMap:
    """``m`` for an identity's result: the same elements, with the result's size terms (proven equal to
    the input's where the body is skipped, by the identity rule that called this)."""
    return IndexMap(m.source, _sizes(result, where), m.strides, m.offset)


def index(m: IndexMap, parts: list, result: torch.Tensor, where: Where) -> IndexMap | None:
    """``t[parts]`` for basic indexing: integers, slices with a positive step, ``None`` and ``...``."""
    if any(p is Ellipsis for p in parts):
        at = parts.index(Ellipsis)
        taken = sum(1 for p in parts if p is not None and p is not Ellipsis)
        parts = parts[:at] + [slice(None)] * (m.dim - taken) + parts[at + 1:]
    strides, offset, d = [], m.offset, 0
    try:
        for part in parts:
            if part is None:
                strides.append(sympy.Integer(0))
                continue
            if d >= m.dim:
                return None
            size, stride = m.sizes[d], m.strides[d]
            if isinstance(part, slice):
                step = 1 if part.step is None else part.step
                if not isinstance(step, int) or isinstance(step, bool) or step < 1:
                    return None
                start = 0 if part.start is None else _position(part.start, size, where)
                if start is None:
                    return None
                offset = offset + start * stride
                strides.append(stride * step)
            elif isinstance(part, (int, torch.SymInt)) and not isinstance(part, bool):
                at = _position(part, size, where)
                if at is None:
                    return None
                offset = offset + at * stride
            else:
                return None
            d += 1
    except _Undecided:
        return None
    strides += list(m.strides[d:])
    if len(strides) != result.dim():
        return None
    return IndexMap(m.source, _sizes(result, where), tuple(strides), offset)


def _position(value, size, where: Where):
    """Where an index or slice start lands, as torch normalises it (a negative one counts from the end);
    ``None`` when that is not decided or lands outside the dim."""
    term = where.term(value)
    at = term if _decide(where, S.ge(term, 0)) else term + size
    return at if where.holds(S.conj(S.ge(at, 0), S.le(at, size))) else None


def permuted(m: IndexMap, order: list[int]) -> IndexMap | None:
    if sorted(order) != list(range(m.dim)):
        return None
    return IndexMap(m.source, tuple(m.sizes[d] for d in order), tuple(m.strides[d] for d in order), m.offset)


def unsqueezed(m: IndexMap, dim: int) -> IndexMap:
    return IndexMap(m.source, m.sizes[:dim] + (sympy.Integer(1),) + m.sizes[dim:],
                    m.strides[:dim] + (sympy.Integer(0),) + m.strides[dim:], m.offset)


def squeezed(m: IndexMap, result: torch.Tensor, where: Where) -> IndexMap | None:
    """Dims dropped by ``squeeze``: those of size 1 where the body is skipped, matched against the
    result's rank (a squeeze that drops a dim on one side only has no map)."""
    try:
        kept = [d for d in range(m.dim) if not _decide(where, S.eq(m.sizes[d], 1))]
    except _Undecided:
        return None
    if len(kept) != result.dim():
        return None
    return IndexMap(m.source, _sizes(result, where), tuple(m.strides[d] for d in kept), m.offset)


def reshaped(m: IndexMap, result: torch.Tensor, where: Where) -> IndexMap | None:
    """A ``view``/``reshape``/``flatten`` of ``m`` to the result's sizes, by torch's rule for the strides
    of a view (``computeStride``): dims regroup where their strides chain.  Where they do not, torch
    copies, and a strided map cannot say which elements the copy holds."""
    new = _sizes(result, where)
    old, old_strides = m.sizes, m.strides
    if not old:
        return IndexMap(m.source, new, tuple(sympy.Integer(1) for _ in new), m.offset)
    try:
        if _decide(where, S.eq(sympy.Mul(*old), 0)):
            return None
        strides: list = [None] * len(new)
        view_d = len(new) - 1
        base = old_strides[-1]
        tensor_numel, view_numel = sympy.Integer(1), sympy.Integer(1)
        for tensor_d in range(len(old) - 1, -1, -1):
            tensor_numel = tensor_numel * old[tensor_d]
            if tensor_d == 0 or (_decide(where, S.ne(old[tensor_d - 1], 1)) and _decide(
                    where, S.ne(old_strides[tensor_d - 1], tensor_numel * base))):
                while view_d >= 0 and (_decide(where, S.lt(view_numel, tensor_numel))
                                       or _decide(where, S.eq(new[view_d], 1))):
                    strides[view_d] = view_numel * base
                    view_numel = view_numel * new[view_d]
                    view_d -= 1
                if not _decide(where, S.eq(view_numel, tensor_numel)):
                    return None
                if tensor_d > 0:
                    base = old_strides[tensor_d - 1]
                    tensor_numel, view_numel = sympy.Integer(1), sympy.Integer(1)
    except _Undecided:
        return None
    if view_d != -1:
        return None
    return IndexMap(m.source, new, tuple(strides), m.offset)


def joined(parts: list[IndexMap | None], sizes: list, dim: int, result: torch.Tensor,
           where: Where) -> IndexMap | None:
    """``cat(parts, dim)`` where the parts that are not empty read consecutive runs of one source along
    ``dim`` with the same strides: the result reads the union.  ``sizes``: each part's size along
    ``dim`` (a part proven empty there may have no map)."""
    try:
        kept = [(m, size) for m, size in zip(parts, sizes) if not _decide(where, S.eq(size, 0))]
    except _Undecided:
        return None
    if not kept or any(m is None for m, _ in kept):
        return None
    maps = [m for m, _ in kept if m is not None]
    first = maps[0]
    if any(m.source is not first.source or m.dim != first.dim for m in maps):
        return None
    goals, strides = [], list(first.strides)
    for d in range(first.dim):
        if d == dim:
            continue
        goals += [S.eq(m.sizes[d], first.sizes[d]) for m in maps[1:]]
        wide = [m for m in maps if not where.holds(S.le(m.sizes[d], 1))]
        if wide:
            strides[d] = wide[0].strides[d]
            goals += [S.eq(m.strides[d], strides[d]) for m in wide[1:]]
    wide = [m for m in maps if not where.holds(S.le(m.sizes[dim], 1))]
    step = wide[0].strides[dim] if wide else (maps[1].offset - maps[0].offset if len(maps) > 1
                                              else first.strides[dim])
    goals += [S.disj(S.le(m.sizes[dim], 1), S.eq(m.strides[dim], step)) for m in maps]
    goals += [S.eq(b.offset, a.offset + a.sizes[dim] * step) for a, b in zip(maps, maps[1:])]
    if not where.holds(S.conj(*goals)):
        return None
    strides[dim] = step
    return IndexMap(first.source, _sizes(result, where), tuple(strides), first.offset)
