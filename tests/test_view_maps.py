"""Index maps of view chains (tracer/control/view_maps.py) against eager PyTorch.

Random chains of indexing, transposes, permutes, unsqueezes, squeezes,
reshapes and cats of pieces are run on a tensor of distinct values; wherever
a map is claimed, reading the source through it must give the tensor's
values exactly, and a map that claims to be the source must be the source.
Sizes are concrete here, so every proof is an evaluation.
"""
from __future__ import annotations

import sympy
import torch
from hypothesis import given
from hypothesis import strategies as st

from shapeproof import solver as S
from shapeproof.tracer.control import view_maps as VM


class Concrete:
    """``view_maps.Where`` at one point: sizes are numbers, a goal holds when it evaluates true."""

    def term(self, value):
        return sympy.Integer(int(value))

    def holds(self, goal):
        return S.truth(goal, {}) is True


WHERE = Concrete()


def _read(m: VM.IndexMap, shape) -> torch.Tensor:
    """The source's elements ``m`` says a tensor of ``shape`` holds."""
    flat = m.source.reshape(-1)
    positions = torch.full(tuple(shape), int(m.offset), dtype=torch.long)
    for d, stride in enumerate(m.strides):
        index = torch.arange(shape[d]).view([-1 if i == d else 1 for i in range(len(shape))])
        positions = positions + index * int(stride)
    return flat[positions] if positions.numel() else torch.empty(tuple(shape))


def _step(draw, t: torch.Tensor, m):
    """One random view op on ``t`` (map ``m``): the new tensor and its map (None when it has none)."""
    kind = draw(st.sampled_from(["index", "transpose", "permute", "unsqueeze", "squeeze", "reshape",
                                 "flatten", "cat"]))
    if t.dim() == 0:
        kind = "unsqueeze"
    if kind == "index":
        parts = []
        for size in t.shape[:draw(st.integers(1, t.dim()))]:
            if draw(st.booleans()):
                parts.append(None)                # a new dim, before this one
            choice = draw(st.sampled_from(["int", "slice", "all"]))
            if choice == "int" and size > 0:
                parts.append(draw(st.integers(-size, size - 1)))
            elif choice == "slice":
                start = draw(st.integers(-size - 1, size + 1))
                stop = draw(st.one_of(st.none(), st.integers(-size - 1, size + 1)))
                parts.append(slice(start, stop, draw(st.integers(1, 3))))
            else:
                parts.append(slice(None))
        if draw(st.booleans()):                   # the rest of the dims; in front when there is no rest
            parts = parts + [Ellipsis] if len(parts) - parts.count(None) < t.dim() else [Ellipsis] + parts
        new = t[tuple(parts)]
        return new, VM.index(m, parts, new, WHERE)
    if kind == "transpose":
        a, b = draw(st.integers(0, t.dim() - 1)), draw(st.integers(0, t.dim() - 1))
        order = list(range(t.dim()))
        order[a], order[b] = order[b], order[a]
        return t.transpose(a, b), VM.permuted(m, order)
    if kind == "permute":
        order = draw(st.permutations(list(range(t.dim()))))
        return t.permute(order), VM.permuted(m, list(order))
    if kind == "unsqueeze":
        d = draw(st.integers(0, t.dim()))
        return t.unsqueeze(d), VM.unsqueezed(m, d)
    if kind == "squeeze":
        new = t.squeeze()
        return new, VM.squeezed(m, new, WHERE)
    if kind == "flatten":
        a = draw(st.integers(0, t.dim() - 1))
        new = t.flatten(a, draw(st.integers(a, t.dim() - 1)))
        return new, VM.reshaped(m, new, WHERE)
    if kind == "reshape":
        n = t.numel()
        divisors = [k for k in range(1, n + 1) if n % k == 0] or [1]
        first = draw(st.sampled_from(divisors))
        shape = [first, n // first] if n else [0]
        if draw(st.booleans()):
            shape = shape[::-1] + [1]
        new = t.reshape(shape)
        return new, VM.reshaped(m, new, WHERE)
    # cat of consecutive pieces of one dim (the pieces' maps joined), or of pieces out of order
    d = draw(st.integers(0, t.dim() - 1))
    size = t.shape[d]
    cut = draw(st.integers(0, size))
    first, second = t.narrow(d, 0, cut), t.narrow(d, cut, size - cut)
    pieces = [first, second] if draw(st.booleans()) else [second, first]
    maps = [VM.index(m, [slice(None)] * d + [slice(0, cut)], first, WHERE),
            VM.index(m, [slice(None)] * d + [slice(cut, size)], second, WHERE)]
    if pieces[0] is second:
        maps = maps[::-1]
    new = torch.cat(pieces, d)
    return new, VM.joined(maps, [WHERE.term(p.shape[d]) for p in pieces], d, new, WHERE)


@given(st.data())
def test_a_claimed_map_reads_exactly_the_values_of_the_view(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    source = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.float64).reshape(shape)
    t, m = source, VM.identity(source, WHERE)
    for _ in range(data.draw(st.integers(1, 6))):
        if m is None:
            break
        t, m = _step(data.draw, t, m)
        if m is not None:
            assert tuple(int(s) for s in m.sizes) == tuple(t.shape)
            assert torch.equal(_read(m, t.shape), t)
            if VM.is_source(m, source, WHERE):
                assert torch.equal(t, source)


def test_timesformer_table_chain_is_the_table_itself():
    """Class row plus the grid, transposed, regrouped, flattened and transposed back, then joined."""
    table = torch.randn(1, 5, 6)
    m = VM.identity(table, WHERE)
    cls = table[0, 0, :].unsqueeze(0).unsqueeze(1)
    m_cls = VM.unsqueezed(VM.unsqueezed(VM.index(m, [0, 0, slice(None)], table[0, 0, :], WHERE), 0), 1)
    grid = table[0, 1:, :]
    m_grid = VM.index(m, [0, slice(1, None), slice(None)], grid, WHERE)
    g = grid.unsqueeze(0).transpose(1, 2)
    m_g = VM.permuted(VM.unsqueezed(m_grid, 0), [0, 2, 1])
    g4 = g.reshape(1, 6, 2, 2)
    m_g4 = VM.reshaped(m_g, g4, WHERE)
    back = g4.flatten(2).transpose(1, 2)
    m_back = VM.permuted(VM.reshaped(m_g4, g4.flatten(2), WHERE), [0, 2, 1])
    whole = torch.cat((cls, back), 1)
    m_whole = VM.joined([m_cls, m_back], [sympy.Integer(1), sympy.Integer(4)], 1, whole, WHERE)
    assert m_whole is not None and VM.is_source(m_whole, table, WHERE)
    swapped = torch.cat((back, cls), 1)          # the rows out of order: not the table
    assert VM.joined([m_back, m_cls], [sympy.Integer(4), sympy.Integer(1)], 1, swapped, WHERE) is None


def test_a_reshape_torch_would_copy_has_no_map():
    x = torch.arange(6.0).reshape(2, 3)
    t = x.t()                                    # (3, 2), not viewable as (6,)
    m = VM.permuted(VM.identity(x, WHERE), [1, 0])
    assert VM.reshaped(m, t.reshape(6), WHERE) is None
