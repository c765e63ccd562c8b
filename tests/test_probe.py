"""The probe that orders the region search: does the model run at given shapes (fake tensors, no trace)?"""
from __future__ import annotations

import re

import pytest
import shapeproof
import torch
from shapeproof.export.search import regions
from shapeproof.tracer.probe import failure_at
from torch.export import Dim

__shapeproof_user_code__ = True


class Pairs(torch.nn.Module):
    """Contrastive pairs: ``view(B // 2, 2, -1)`` fails in eager at every odd ``B``."""

    def forward(self, x):
        return x.view(x.shape[0] // 2, 2, -1).sum(1)


class CountsBatches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        return self.norm(x)


class ReadsValues(torch.nn.Module):
    def forward(self, x):
        return x[: int(x.sum().item()) + 1]


def test_the_probe_answers_whether_the_model_runs_at_the_shapes():
    assert failure_at(Pairs(), (torch.zeros(8, 3),)) is None
    failure = failure_at(Pairs(), (torch.zeros(7, 3),))
    assert isinstance(failure, RuntimeError) and "invalid for input of size 21" in str(failure)


def test_the_probe_leaves_the_model_state_alone():
    model = CountsBatches().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert failure_at(model, (torch.randn(5, 4) + 3,)) is None
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_the_probe_does_not_claim_a_failure_it_cannot_see():
    """Data-dependent sizes need values, which fake tensors lack: the trace decides, so no failure."""
    assert failure_at(ReadsValues(), (torch.zeros(4),)) is None


class PlainTensorAttribute(torch.nn.Module):
    """A tensor kept as a plain attribute, not a buffer: fake mode refuses it (an AssertionError)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.tensor(2.0)

    def forward(self, x):
        return x.view(x.shape[0] // 2, 2, -1) * self.scale


class AssertsEven(torch.nn.Module):
    def forward(self, x):
        assert x.shape[0] % 2 == 0
        return x * 2


def test_the_probe_claims_only_what_a_shape_rule_raises():
    """Anything else (fake mode refusing a real tensor, the model's own assert) is left to the trace."""
    assert failure_at(PlainTensorAttribute(), (torch.zeros(8, 3),)) is None
    assert isinstance(failure_at(PlainTensorAttribute(), (torch.zeros(7, 3),)), RuntimeError)
    assert failure_at(AssertsEven(), (torch.zeros(7, 3),)) is None


class ExportPath(torch.nn.Module):
    """Takes another path under export: the probe must run the path a trace runs."""

    def forward(self, x):
        if torch.compiler.is_exporting():
            return x * 2
        return x.view(x.shape[0] // 2, 2, -1)


def test_the_probe_runs_the_path_a_trace_runs():
    assert failure_at(ExportPath(), (torch.zeros(7, 3),)) is None


def test_the_search_stops_without_another_trace_where_the_model_fails(monkeypatch):
    """The first trace (B=8) has four violated guards; only odd B fails in eager.  Without the probe the
    search traced even counterexamples first (all served by the first program), then the odd one."""
    traced = []
    real_trace = regions.trace

    def counting_trace(model, args, *rest, **kwargs):
        traced.append(args[0].shape[0])
        return real_trace(model, args, *rest, **kwargs)

    monkeypatch.setattr(regions, "trace", counting_trace)
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(Pairs(), (torch.randn(8, 32),), dynamic_shapes=({0: Dim("B", min=2, max=64)},))
    message = str(info.value)
    found = re.search(r"at B=(\d+) the model itself fails \(run at those shapes on fake tensors\)", message)
    odd = int(found.group(1))
    assert odd % 2 == 1
    assert "is invalid for input of size" in message
    assert odd not in traced           # the search's traces (the export's own, at B=8, is not counted)
