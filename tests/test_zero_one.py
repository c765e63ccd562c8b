"""An example of size 0 or 1 does not decide the program (issue 54; export/search/zero_one.py).

torch.export makes a dim declared dynamic a constant where its example is 0 or 1: a named ``Dim`` is an
error ("specialized it to be a constant (1)"), ``Dim.AUTO`` a program for that size only.  shapeproof
traces at another size of the declared range and checks the program at the example: these models run at
every batch, and their programs match eager at 1, 2 and the maximum.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.export import Dim

import shapeproof


class Gated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.value, self.gate = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.value(x) * torch.sigmoid(self.gate(x)))


class Pair(torch.nn.Module):
    """Two inputs sharing the batch dim."""

    def forward(self, x, y):
        return torch.cat([x, y], dim=1).softmax(-1)


class OneIsSpecial(torch.nn.Module):
    """Code that does differ at a batch of 1: a branch, run as a cond on both sides."""

    def forward(self, x):
        if x.shape[0] == 1:
            return x * 2
        return x - x.mean(0, keepdim=True)


class Squeezed(torch.nn.Module):
    """``squeeze(0)`` drops the batch at 1 only: the program's op does so at run time, as eager's."""

    def forward(self, x):
        return x.squeeze(0) + 1


class LoopsAtOne(torch.nn.Module):
    """A branch at 1 whose side loops (no cond): a program traced at 2 does not serve the example."""

    def forward(self, x):
        scale = 2.0
        if x.shape[0] == 1:
            for _ in range(2):
                scale = scale + 1
        return x * scale


def _resnet():
    transformers = pytest.importorskip("transformers")
    config = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_channels=3)
    model = transformers.ResNetModel(config).eval()

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.resnet = model

        def forward(self, x):
            return self.resnet(pixel_values=x).pooler_output

    return Pooled()


def _exported(model, args, spec):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = shapeproof.export(model, args, dynamic_shapes=spec)
    return program, [str(w.message) for w in caught]


def _agrees(program, model, args) -> bool:
    with torch.no_grad():
        got, expected = program.module()(*args), model(*args)
    return got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-4, atol=1e-5)


BATCH = Dim("batch", min=1, max=8)


@pytest.mark.parametrize("spec", [({0: BATCH},), ({0: Dim.AUTO},), ({0: Dim.DYNAMIC},)],
                         ids=["named", "auto", "dynamic"])
def test_a_batch_of_one_example_exports_over_the_whole_range(spec):
    torch.manual_seed(0)
    model = Gated().eval()
    program, said = _exported(model, (torch.randn(1, 8),), spec)
    assert any("traced at batch = 2, not at the example's batch = 1" in s
               or "traced at x.size(0) = 2, not at the example's x.size(0) = 1" in s for s in said)
    for batch in (1, 2, 3, 8):
        x = torch.randn(batch, 8)
        assert _agrees(program, model, (x,)), batch
    assert program.example_inputs[0][0].shape == (1, 8)       # the user's example, as torch keeps it


def test_torch_export_specializes_the_same_example():
    with pytest.raises(Exception, match="specialized it to be a constant"):
        torch.export.export(Gated(), (torch.randn(1, 8),), dynamic_shapes=({0: BATCH},))
    auto = torch.export.export(Gated(), (torch.randn(1, 8),), dynamic_shapes=({0: Dim.AUTO},))
    with pytest.raises(AssertionError):
        auto.module()(torch.randn(2, 8))


def test_a_small_resnet_with_a_batch_of_one():
    torch.manual_seed(0)
    model = _resnet()
    program, _ = _exported(model, (torch.randn(1, 3, 32, 32),), ({0: BATCH},))
    for batch in (1, 2, 8):
        assert _agrees(program, model, (torch.randn(batch, 3, 32, 32),)), batch


def test_an_empty_example_is_moved_off_too():
    for spec in (({0: Dim("n", min=0, max=8)},), ({0: Dim.AUTO},)):
        model = Gated().eval()
        program, _ = _exported(model, (torch.randn(0, 8),), spec)
        for batch in (0, 1, 2, 8):
            assert _agrees(program, model, (torch.randn(batch, 8),)), (spec, batch)


def test_two_inputs_sharing_a_dim_whose_examples_are_one():
    spec = ({0: BATCH, 1: Dim("n", min=1, max=16)}, {0: BATCH})
    program, _ = _exported(Pair(), (torch.randn(1, 1), torch.randn(1, 3)), spec)
    for batch, n in [(1, 1), (2, 5), (8, 16), (3, 1)]:
        assert _agrees(program, Pair(), (torch.randn(batch, n), torch.randn(batch, 3))), (batch, n)



@pytest.mark.parametrize("spec", [({0: BATCH},), ({0: Dim.AUTO},), ({0: Dim.DYNAMIC},)],
                         ids=["named", "auto", "dynamic"])
def test_code_that_branches_at_one_is_a_cond_taken_on_both_sides(spec):
    """The trace elsewhere takes the example's 1 into account (torch's range there would start at 2, and
    decide the test without asking): the branch is a cond."""
    program, _ = _exported(OneIsSpecial(), (torch.randn(1, 4),), spec)
    assert any(n.target is torch.ops.higher_order.cond for n in program.graph.nodes)
    for batch in (1, 2, 8):
        assert _agrees(program, OneIsSpecial(), (torch.randn(batch, 4),)), batch


def test_a_squeeze_of_the_batch_runs_as_eager_on_both_sides():
    program, _ = _exported(Squeezed(), (torch.randn(1, 4),), ({0: BATCH},))
    for batch in (1, 2, 8):
        assert _agrees(program, Squeezed(), (torch.randn(batch, 4),)), batch


def test_a_program_that_does_not_serve_the_example_is_not_taken():
    """The program traced at 2 multiplies by 2 where eager multiplies a batch of 1 by 4: the export is made
    at the example as torch makes it, an error for a named Dim saying why, a program for 1 under AUTO."""
    with pytest.raises(shapeproof.ExportError) as caught:
        shapeproof.export(LoopsAtOne(), (torch.randn(1, 4),), dynamic_shapes=({0: BATCH},))
    assert "batch" in str(caught.value)
    program = shapeproof.export(LoopsAtOne(), (torch.randn(1, 4),), dynamic_shapes=({0: Dim.AUTO},))
    assert _agrees(program, LoopsAtOne(), (torch.randn(1, 4),))
