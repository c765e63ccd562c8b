"""Models whose ``assert`` statements must reach torch as Python compiles them.

pytest rewrites ``assert`` in test modules, and torch recognises an assert by
its bytecode (it turns one on data into a runtime assertion), so models that
rely on that live here, outside the rewritten files.
"""
import torch


class AssertWidth(torch.nn.Module):
    def forward(self, x, y):
        assert y.shape[1] == 4
        return x + y.sum()


class PositiveMax(torch.nn.Module):
    def forward(self, x, y):
        assert y.max().item() > 0
        return x + 1
