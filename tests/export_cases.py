"""The project's own export cases: small modules with the difficult shape patterns.

Each case builds ``(model, args, dynamic_shapes)`` and lists the dim values to
check the exported program against eager at (range ends included).  Shared
by the export tests; self-contained (no corpus files).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim


@dataclass
class Case:
    name: str
    builder: Callable[[], tuple]
    make_inputs: Callable[[dict], tuple]      # dim values -> args
    sweep: list[dict] = field(default_factory=list)

    def build(self) -> tuple:
        """(model in eval mode, example args, dynamic_shapes); same weights on every call."""
        torch.manual_seed(0)
        model, args, spec = self.builder()
        return model.eval(), args, spec


class StridedConvReshape(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, stride=2)
        self.proj = nn.Linear(8, 16)

    def forward(self, x):                    # (B, 4, L)
        y = self.conv(x)
        b, c, t = y.shape
        return self.proj(y.transpose(1, 2).reshape(b, t, -1))


class PadToMultiple(nn.Module):
    def __init__(self, n=4, d=8):
        super().__init__()
        self.n = n
        self.proj = nn.Linear(n * d, d)

    def forward(self, x):                    # (B, T, D)
        pad = (-x.shape[1]) % self.n
        x = F.pad(x, (0, 0, 0, pad))
        b, t, d = x.shape
        return self.proj(x.reshape(b, t // self.n, self.n * d))


class ChunkView(nn.Module):
    def __init__(self, chunk=16, d=8):
        super().__init__()
        self.chunk = chunk
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        B, T, D = x.shape
        pad = (self.chunk - T % self.chunk) % self.chunk
        x = F.pad(x, (0, 0, 0, pad))
        q, k, v = self.qkv(x).view(B, -1, self.chunk, 3, D).unbind(3)
        return F.scaled_dot_product_attention(q, k, v).reshape(B, -1, D)   # padded length: ceil(T/16)*16


class RelShift(nn.Module):
    def forward(self, x):                    # (B, H, T, 2T-1)
        b, h, t, p = x.shape
        x = F.pad(x, (1, 0)).view(b, h, -1, t)
        return x[:, :, 1:].view(b, h, t, p)[..., :t]


class HalfBatch(nn.Module):
    def forward(self, x):                    # (B, D), B even
        z = x.view(x.shape[0] // 2, 2, -1)
        return (z[:, 0] * z[:, 1]).sum(-1)


class EvenBatch(nn.Module):
    def forward(self, x):                    # (B, D): needs an even B, a guard that really fails at B = 3
        return x.view(x.shape[0] // 2, 2 * x.shape[1])


def even_batch() -> tuple:
    """(model, args, dynamic_shapes) of ``EvenBatch`` over B in [2, 9]: every exporter fails on it."""
    return EvenBatch().eval(), (torch.randn(4, 3),), ({0: Dim("B", min=2, max=9)},)


class MaxPoolCeil(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)

    def forward(self, x):
        return self.pool(self.pool(x))


class NonzeroSelect(nn.Module):
    def forward(self, x):                    # (T, D)
        keep = torch.nonzero(x.sum(-1) > 0).squeeze(1)
        return x.index_select(0, keep).sum(0)


class ItemCheck(nn.Module):
    def forward(self, x, n):                 # n: 0-d int tensor
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= x.shape[0])
        return x[:k].sum(0)


class BufferCount(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(x.shape[0])
        return x * 2


class CondOnShape(nn.Module):
    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda x: x * 2, lambda x: x + 1, (x,))


class BranchOnRemainder(nn.Module):
    """``if T % 4 != 0: pad``: where the branch is not taken its body would pad by ``4 - T % 4 % 4 == 0``,
    so one trace serves both sides (``tracer/branch_merge``)."""

    def forward(self, x):
        if x.shape[1] % 4 != 0:
            x = F.pad(x, (0, 0, 0, 4 - x.shape[1] % 4))
        return x.reshape(x.shape[0], -1, 4 * x.shape[2])


class ScaleOnRemainder(nn.Module):
    """``if T % 4 != 0: pad and halve`` -- a real range-dependent branch (the halving is no identity where
    the branch is not taken): left a guard (``cond_branches=False``, torch's way) export must fail and
    explain; by default the branch becomes a cond."""

    def forward(self, x):
        if x.shape[1] % 4 != 0:
            x = F.pad(x, (0, 0, 0, 4 - x.shape[1] % 4)) * 0.5
        return x.reshape(x.shape[0], -1, 4 * x.shape[2])


def _randn(*shape):
    return (torch.randn(*shape),)


CASES = [
    Case("strided_conv_reshape", lambda: (StridedConvReshape(), _randn(2, 4, 50),
                                          ({0: Dim("B", min=1, max=8), 2: Dim("L", min=8, max=1000)},)),
         lambda d: _randn(d["B"], 4, d["L"]),
         [{"B": 1, "L": 8}, {"B": 8, "L": 1000}, {"B": 3, "L": 9}, {"B": 2, "L": 333}, {"B": 5, "L": 64}]),
    Case("pad_to_multiple", lambda: (PadToMultiple(), _randn(2, 50, 8),
                                     ({0: Dim("B", min=1, max=8), 1: Dim("T", min=5, max=1024)},)),
         lambda d: _randn(d["B"], d["T"], 8),
         [{"B": 1, "T": 5}, {"B": 8, "T": 1024}, {"B": 2, "T": 6}, {"B": 3, "T": 8}, {"B": 2, "T": 1023}]),
    Case("chunk_view", lambda: (ChunkView(), _randn(2, 50, 8),
                                ({0: Dim("B", min=1, max=4), 1: Dim("T", min=17, max=512)},)),
         lambda d: _randn(d["B"], d["T"], 8),
         [{"B": 1, "T": 17}, {"B": 4, "T": 512}, {"B": 2, "T": 32}, {"B": 2, "T": 33}, {"B": 3, "T": 255}]),
    Case("rel_shift", lambda: (RelShift(), _randn(2, 2, 20, 39),
                               ({0: Dim("B", min=1, max=4), 2: Dim("T", min=2, max=256),
                                 3: 2 * Dim("T", min=2, max=256) - 1},)),
         lambda d: _randn(d["B"], 2, d["T"], 2 * d["T"] - 1),
         [{"B": 1, "T": 2}, {"B": 4, "T": 256}, {"B": 2, "T": 3}, {"B": 2, "T": 100}, {"B": 3, "T": 7}]),
    Case("half_batch_derived", lambda: (HalfBatch(), _randn(8, 6), ({0: 2 * Dim("P", min=1, max=32)},)),
         lambda d: _randn(2 * d["P"], 6),
         [{"P": 1}, {"P": 32}, {"P": 2}, {"P": 7}, {"P": 16}]),
    Case("maxpool_ceil", lambda: (MaxPoolCeil(), _randn(1, 2, 40, 33),
                                  ({2: Dim("H", min=16, max=128), 3: Dim("W", min=16, max=128)},)),
         lambda d: _randn(1, 2, d["H"], d["W"]),
         [{"H": 16, "W": 16}, {"H": 128, "W": 128}, {"H": 17, "W": 99}, {"H": 64, "W": 31},
          {"H": 101, "W": 18}]),
    Case("nonzero_select", lambda: (NonzeroSelect(), _randn(20, 4), ({0: Dim("T", min=2, max=256)},)),
         lambda d: _randn(d["T"], 4),
         [{"T": 2}, {"T": 256}, {"T": 3}, {"T": 77}, {"T": 128}]),
    Case("item_check",
         lambda: (ItemCheck(), (torch.randn(10, 3), torch.tensor(4)), ({0: Dim("N", min=2, max=64)}, None)),
         lambda d: (torch.randn(d["N"], 3), torch.tensor(min(d["N"], 3))),
         [{"N": 2}, {"N": 64}, {"N": 5}, {"N": 17}, {"N": 3}]),
    Case("buffer_mutation", lambda: (BufferCount(), _randn(3, 4), ({0: Dim("B", min=2, max=16)},)),
         lambda d: _randn(d["B"], 4),
         [{"B": 2}, {"B": 16}, {"B": 5}, {"B": 9}, {"B": 12}]),
    Case("cond_on_shape", lambda: (CondOnShape(), _randn(6, 3), ({0: Dim("B", min=2, max=16)},)),
         lambda d: _randn(d["B"], 3),
         [{"B": 2}, {"B": 16}, {"B": 4}, {"B": 5}, {"B": 11}]),
    Case("branch_on_remainder", lambda: (BranchOnRemainder(), _randn(2, 50, 8),
                                         ({0: Dim("B", min=1, max=8), 1: Dim("T", min=2, max=1024)},)),
         lambda d: _randn(d["B"], d["T"], 8),
         [{"B": 1, "T": 2}, {"B": 8, "T": 1024}, {"B": 2, "T": 4}, {"B": 3, "T": 5}, {"B": 2, "T": 1023}]),
]

class Unshuffle(nn.Module):
    def forward(self, x):                    # needs H and W even
        return F.pixel_unshuffle(x, 2)


FAILING = {
    "unshuffle_plain_dims": Case("unshuffle_plain_dims", lambda: (Unshuffle(), _randn(2, 3, 8, 6),
                                 ({0: Dim("B", min=1, max=4), 2: Dim("H", min=4, max=64),
                                   3: Dim("W", min=4, max=64)},)),
                                 lambda d: _randn(d["B"], 3, d["H"], d["W"])),
    "scale_on_remainder": Case("scale_on_remainder", lambda: (ScaleOnRemainder(), _randn(2, 50, 8),
                               ({0: Dim("B", min=1, max=8), 1: Dim("T", min=2, max=1024)},)),
                               lambda d: _randn(d["B"], d["T"], 8)),
}
