"""A two-model registry in bench's format, small enough to run the bench's executors in a test.

``pad_to_multiple`` is rejected by torch.export 2.13 and exported by
shapeproof; ``even_batch`` has a guard that really fails (B = 3), so both
exporters fail on it.  Self-contained: bench loads it by path in subprocesses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim


@dataclass
class Case:
    name: str
    group: str
    pattern: str
    build: Callable[[], tuple]
    alt_dims: list | None = None


class PadToMultiple(nn.Module):
    def __init__(self, n=4, d=8):
        super().__init__()
        self.n = n
        self.proj = nn.Linear(n * d, d)

    def forward(self, x):                    # (B, T, D)
        x = F.pad(x, (0, 0, 0, (-x.shape[1]) % self.n))
        b, t, d = x.shape
        return self.proj(x.reshape(b, t // self.n, self.n * d))


class EvenBatch(nn.Module):
    def forward(self, x):
        return x.view(x.shape[0] // 2, 2 * x.shape[1])


def _pad():
    torch.manual_seed(0)
    spec = ({0: Dim("B", min=1, max=8), 1: Dim("T", min=5, max=1024)},)
    return PadToMultiple().eval(), (torch.randn(2, 50, 8),), spec


def _even():
    return EvenBatch(), (torch.randn(4, 3),), ({0: Dim("B", min=2, max=9)},)


CASES = {"pad_to_multiple": Case("pad_to_multiple", "hand", "pad to a multiple of 4, reshape", _pad),
         "even_batch": Case("even_batch", "hand", "view(B // 2, ...) with odd B in range", _even)}
