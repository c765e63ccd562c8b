"""Traces after the first start from the model as the user gave it, and the model ends as torch.export
leaves it (``tracer/module_state.py``)."""
from __future__ import annotations

import shapeproof
import torch
import torch.nn.functional as F_nn
from shapeproof.export.errors import ExportError
from shapeproof.tracer.module_state import ModuleState
from torch.export import Dim

__shapeproof_user_code__ = True


class ClampsItsWindow(torch.nn.Module):
    """Rebinds an attribute when the input is small, as Hugging Face Swin's ``set_shift_and_window_size``
    sets ``self.window_size = min(input_resolution)``."""

    def __init__(self):
        super().__init__()
        self.window = 8

    def forward(self, x):
        if x.shape[1] < self.window:
            self.window = x.shape[1]
        b, t, d = x.shape
        x = F_nn.pad(x, (0, 0, 0, (-t) % self.window))
        return x.view(b, -1, self.window, d).sum(2)


def _eager(x):
    return ClampsItsWindow()(x)            # a fresh model: what the user's model computes from its own state


def test_module_state_undoes_rebinding_and_additions():
    model = torch.nn.Sequential(ClampsItsWindow())
    kept = ModuleState(model)
    model[0].window, model[0].extra = 3, "added"
    kept.restore()
    assert model[0].window == 8 and not hasattr(model[0], "extra")
    assert isinstance(model[0], ClampsItsWindow) and len(model) == 1


def test_later_traces_start_from_the_users_model_and_leave_it_as_torch_export_does():
    model = ClampsItsWindow()
    spec = ({1: Dim("T", min=2, max=64)},)
    package = shapeproof.export(model, (torch.randn(2, 32, 4),), dynamic_shapes=spec, split=True)
    # the search traced at T < 8, where forward sets window to a size of that trace; torch.export's one run
    # at T = 32 leaves it at 8
    assert type(model.window) is int and model.window == 8
    module = package.module()
    for t in (2, 3, 7, 8, 9, 16, 31, 33, 63, 64):
        x = torch.randn(2, t, 4)
        assert torch.allclose(module(x), _eager(x)), t


def test_a_failing_search_leaves_the_model_as_torch_export_does():
    model = ClampsItsWindow()
    try:
        shapeproof.export(model, (torch.randn(2, 32, 4),), dynamic_shapes=({1: Dim("T", min=2, max=64)},))
    except ExportError:
        pass                                  # two code paths: without split, an error naming the regions
    assert type(model.window) is int and model.window == 8


class SwapsItsAttention(torch.nn.Module):
    """Replaces a submodule when the input is short, as Hugging Face BigBird's ``set_attention_type``
    swaps each layer's block-sparse attention for full attention."""

    def __init__(self):
        super().__init__()
        self.attend = torch.nn.Linear(4, 4)

    def forward(self, x):
        if x.shape[1] <= 8 and isinstance(self.attend, torch.nn.Linear):
            self.attend = torch.nn.Identity()
        return self.attend(x) * 2


def test_a_submodule_swapped_by_a_later_trace_is_put_back():
    """Under Dim.AUTO the search traces T <= 8 too (widening torch's input check), where forward swaps
    ``attend``; torch.export's one run at T = 16 keeps the Linear, and so must the user's model."""
    model = SwapsItsAttention()
    kept = ModuleState(model)
    model.attend = torch.nn.Identity()
    kept.restore()
    assert isinstance(model.attend, torch.nn.Linear) and len(list(model.parameters())) == 2
    x = torch.randn(2, 16, 4)
    before = model(x)
    result = shapeproof.export_with_report(model, (x,), dynamic_shapes=({1: Dim.AUTO},), split=True)
    assert any(t.point["x.size(1)"] <= 8 for t in result.regions.traces)
    assert isinstance(model.attend, torch.nn.Linear) and torch.equal(model(x), before)
