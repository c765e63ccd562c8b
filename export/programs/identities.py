"""Exact identities of ATen ops: when an op returns its input's values unchanged.

A rule looks at one op node of a traced program and answers with a
``Rewrite``: under ``condition`` (a formula over the canonical input
variables) the node computes the same values as ``source`` (one of its
inputs), or as the same op with fewer inputs (``cat`` without an empty
tensor).  ``None`` means the rule never applies to these arguments.  The
conditions are proven over a region by ``merge.py``; every rule is an
identity of eager PyTorch semantics, values and dtype alike, for every input
where its condition holds (tests/test_identities.py checks each one against
eager, and checks that a condition one step looser does not merge).

``copies``: the op returns a new tensor (or, ``contiguous``, maybe its input).
Such an identity is exact in values but not in aliasing, so it is only used
where no in-place op of the graph writes to memory the copy or its input may
share, and only where the input is contiguous (a copy of a contiguous tensor
has its layout, so ops after it see the same strides either way and a
``view`` cannot fail on one side only).

Rules (``RULES``), each an identity exactly when:

- pad (``pad``, ``constant_pad_nd``, ``reflection_pad*``, ``replication_pad*``): every amount is 0;
- slice (``slice.Tensor``, ``narrow``): start 0, step 1, end >= the dim's size (narrow: length == size);
- view (``view``, ``_unsafe_view``, ``reshape``, ``expand``): the target shape is the input's shape (a
  ``-1`` only where no other dim is 0);
- cat: every other input is a ``zeros``/``ones``/``empty``/``full`` (``new_*`` too) of size 0 along the
  dim, all of one dtype;
- roll: every shift is a multiple of its dim's size;
- interpolate (``upsample_nearest*``, ``_upsample_nearest_exact*``, ``.vec``): output size == input
  size, or every scale factor exactly 1.0 (not 1.1, even where it keeps the size: the source index is
  ``floor(dst / scale)``); linear and cubic modes are never exact (a weight of 0 times ``inf``);
- copy (``contiguous``, ``clone``): always, in values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from shapeproof import solver as F      # the solver's facade: conditions and terms
from shapeproof.solver import Mod
from shapeproof.solver import floats as FL
from shapeproof.tracer.torch_internals import UNSAFE_VIEW, UPSAMPLE_NEAREST_EXACT, op_schema

from .program_terms import Unreadable

__all__ = ["Rewrite", "Rule", "RULES", "OpView", "arguments"]

aten = torch.ops.aten


@dataclass(frozen=True)
class Rewrite:
    condition: F.Formula
    source: torch.fx.Node | None = None     # the input whose values the node returns
    inputs: dict | None = None              # or: the same op with these arguments (``cat`` without empties)


def arguments(node: torch.fx.Node) -> dict:
    """An op node's arguments by schema name, defaults filled in (positional and keyword alike)."""
    schema = op_schema(node.target).arguments
    values = {a.name: a.default_value if a.has_default_value() else None for a in schema}
    values.update(zip((a.name for a in schema), node.args))
    values.update(node.kwargs)
    return values


class OpView:
    """What a rule may read of one op node: its arguments, exact integer values, shapes and dtypes."""

    def __init__(self, node: torch.fx.Node, terms, at_point: Callable[[F.Formula], bool]):
        self.node = node
        self.terms = terms
        self.at_point = at_point          # the condition's truth at the reference trace's example
        self.args = arguments(node)

    def int(self, value):
        term = self.terms.value(value)
        if FL.is_float(term):
            raise Unreadable(f"expected an integer, got the float {term}")
        return term

    def shape(self, node) -> tuple:
        return self.terms.shape(node)

    def dtype(self, node):
        return node.meta["val"].dtype


def _all_zero(op: OpView, amounts) -> F.Formula:
    return F.conj(*(F.eq(op.int(a), 0) for a in amounts))


def _pad(name: str):
    def rule(op: OpView) -> Rewrite:
        return Rewrite(_all_zero(op, op.args[name]), op.args["self"])
    return rule


def _slice(op: OpView) -> Rewrite | None:
    x, step = op.args["self"], op.args["step"]
    if not isinstance(step, int) or step != 1:
        return None
    shape = op.shape(x)
    size = shape[op.args["dim"] % len(shape)]
    start, end = op.args["start"], op.args["end"]
    parts = [] if start is None else [F.eq(op.int(start), 0)]
    if end is not None:
        parts.append(F.ge(op.int(end), size))
    return Rewrite(F.conj(*parts), x)


def _narrow(op: OpView) -> Rewrite:
    x = op.args["self"]
    shape = op.shape(x)
    size = shape[op.args["dim"] % len(shape)]
    return Rewrite(F.conj(F.eq(op.int(op.args["start"]), 0), F.eq(op.int(op.args["length"]), size)), x)


def _same_shape(name: str, keep: str):
    """``view``/``reshape`` (``-1`` infers a size) and ``expand`` (``-1`` keeps it) to the input's shape."""
    def rule(op: OpView) -> Rewrite | None:
        x = op.args["self"]
        shape, target = op.shape(x), list(op.args[name])
        if len(target) != len(shape):
            return None
        parts, inferred = [], False
        for want, have in zip(target, shape):
            if isinstance(want, int) and want == -1:
                inferred = True
                continue
            parts.append(F.eq(op.int(want), have))
        if inferred and keep == "infer":      # -1 is ambiguous (and an error) when another dim is 0
            parts += [F.ge(have, 1) for want, have in zip(target, shape) if not (isinstance(want, int)
                                                                               and want == -1)]
        return Rewrite(F.conj(*parts), x)
    return rule


# Ops whose shape is their ``size`` argument.  A dropped input of ``cat`` is not compared with
# the other program, so its emptiness is read from what the program computes, not from metadata.
_FACTORIES = (aten.new_zeros.default, aten.new_ones.default, aten.new_empty.default, aten.new_full.default,
              aten.zeros.default, aten.ones.default, aten.empty.memory_format, aten.full.default)


def _cat(op: OpView) -> Rewrite | None:
    tensors, out = list(op.args["tensors"]), op.node
    dim = op.args["dim"]
    rank = len(op.shape(out))

    def empty(t) -> F.Formula:
        if not (isinstance(t, torch.fx.Node) and t.op == "call_function" and t.target in _FACTORIES):
            return F.FALSE
        size = list(arguments(t)["size"])
        if len(size) == 1 and rank != 1:        # legacy: cat skips 1-d empty tensors whatever the dim
            return F.eq(op.int(size[0]), 0)
        return F.eq(op.int(size[dim % rank]), 0) if len(size) == rank else F.FALSE

    # an input may go only if it is empty and dropping it cannot change the promoted dtype
    dropped = [t for t in tensors if op.at_point(empty(t))] if len(tensors) > 1 else []
    kept = [t for t in tensors if t not in dropped]
    if not kept or any(op.dtype(t) != op.dtype(out) for t in tensors):
        return None
    condition = F.conj(*(empty(t) for t in dropped))
    if len(kept) == 1:
        return Rewrite(condition, kept[0])
    return Rewrite(condition, inputs={"tensors": kept}) if dropped else None


def _roll(op: OpView) -> Rewrite | None:
    x = op.args["self"]
    shape, shifts, dims = op.shape(x), list(op.args["shifts"]), list(op.args["dims"])
    if not dims:                                 # roll of the flattened tensor
        if len(shifts) != 1:
            return None
        numel = 1
        for s in shape:
            numel = numel * s
        return Rewrite(F.conj(F.ge(numel, 1), F.eq(Mod(op.int(shifts[0]), numel), 0)), x)
    if len(shifts) != len(dims):
        return None
    parts = []
    for shift, dim in zip(shifts, dims):
        size = shape[dim % len(shape)]
        parts += [F.ge(size, 1), F.eq(Mod(op.int(shift), size), 0)]
    return Rewrite(F.conj(*parts), x)


def _nearest(op: OpView) -> Rewrite | None:
    x, size, scales = op.args["input"], op.args["output_size"], op.args["scale_factors"]
    if scales is not None:          # the source index is floor(dst / scale): the identity only for 1.0
        return Rewrite(F.TRUE, x) if size is None and all(s == 1.0 for s in scales) else None
    spatial = op.shape(x)[2:]
    if size is None or len(size) != len(spatial):
        return None
    return Rewrite(F.conj(*(F.eq(op.int(s), have) for s, have in zip(size, spatial))), x)


def _always(op: OpView) -> Rewrite:
    return Rewrite(F.TRUE, op.args["self"])


@dataclass(frozen=True)
class Rule:
    name: str
    copies: bool
    apply: Callable[[OpView], Rewrite | None]


_PAD = Rule("pad", True, _pad("pad"))
_NEAREST = Rule("interpolate", True, _nearest)
RULES: dict = {
    aten.pad.default: _PAD,
    aten.constant_pad_nd.default: _PAD,
    **{getattr(aten, f"{kind}_pad{n}d").default: Rule("pad", True, _pad("padding"))
       for kind in ("reflection", "replication") for n in (1, 2, 3)},
    aten.slice.Tensor: Rule("slice", False, _slice),
    aten.narrow.default: Rule("slice", False, _narrow),
    aten.view.default: Rule("view", False, _same_shape("size", "infer")),
    UNSAFE_VIEW: Rule("view", False, _same_shape("size", "infer")),
    aten.reshape.default: Rule("view", False, _same_shape("shape", "infer")),
    aten.expand.default: Rule("view", False, _same_shape("size", "keep")),
    aten.cat.default: Rule("cat", True, _cat),
    aten.roll.default: Rule("roll", True, _roll),
    **{getattr(aten, f"upsample_nearest{n}d").vec: _NEAREST for n in (1, 2, 3)},
    **{op: _NEAREST for op in UPSAMPLE_NEAREST_EXACT},
    aten.contiguous.default: Rule("copy", True, _always),
    aten.clone.default: Rule("copy", True, _always),
}
