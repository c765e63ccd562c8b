"""Tiny models for the command-line tests (``tests/cli_models.py:<factory>``)."""
import torch
from torch.export import Dim


class Halve(torch.nn.Module):
    def forward(self, x):
        b, t = x.shape
        return x.reshape(b, t // 2, 2).sum(-1)


def exports():
    return Halve(), (torch.randn(2, 8),), ({1: 2 * Dim("h", min=1, max=32)},)


def fails():
    return Halve(), (torch.randn(2, 8),), ({1: Dim("T", min=2, max=64)},)
