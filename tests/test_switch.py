"""``shapeproof.engine()``: inside the block torch.export is shapeproof's; outside it is torch's, exactly."""
import pytest
import torch
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError

from export_cases import CASES, even_batch as _even_batch

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class Parity(torch.nn.Module):
    def forward(self, x):                    # two programs: n even, n odd
        if x.size(0) % 2 == 0:
            return x * 2
        return x + 1


def _torch_functions():
    return torch.export.export, torch.export.draft_export


def test_inside_the_block_torch_export_is_shapeproofs_and_raises_its_error():
    model, args, spec = _even_batch()
    with shapeproof.engine():
        with pytest.raises(ExportError) as info:
            torch.export.export(model, args, dynamic_shapes=spec)
    assert info.value.violations[0].counterexample == {"B": 3}


def test_the_blocks_options_reach_every_export_it_runs():
    """split, max_regions and time_budget are shapeproof.export's: with no time left no 2nd trace starts."""
    spec = {"x": {0: Dim("n")}}
    with shapeproof.engine(split=True, cond_branches=False):
        assert len(torch.export.export(Parity(), (torch.randn(4),), dynamic_shapes=spec).programs) == 2
    without_time = shapeproof.engine(split=True, time_budget=0.0, cond_branches=False)
    with without_time, pytest.raises(ExportError) as info:
        torch.export.export(Parity(), (torch.randn(4),), dynamic_shapes=spec)
    assert "time budget ran out after 1 traces" in str(info.value)


def test_leaving_the_block_restores_torch_exactly_even_after_an_error():
    before = _torch_functions()
    model, args, spec = _even_batch()
    with pytest.raises(ExportError):
        with shapeproof.engine():
            replaced = _torch_functions()
            torch.export.draft_export(model, args, dynamic_shapes=spec)
    assert all(a is not b for a, b in zip(replaced, before))
    assert all(a is b for a, b in zip(_torch_functions(), before))
    with pytest.raises(torch._dynamo.exc.UserError) as info:      # torch's own behaviour is back
        torch.export.export(model, args, dynamic_shapes=spec)
    assert not isinstance(info.value, ExportError)


def test_blocks_nest_and_each_restores_what_it_replaced():
    before = _torch_functions()
    with shapeproof.engine(strategy="cascade"):
        outer = _torch_functions()
        with shapeproof.engine(strategy="z3"):
            assert all(a is not b for a, b in zip(_torch_functions(), outer))
        assert all(a is b for a, b in zip(_torch_functions(), outer))
    assert all(a is b for a, b in zip(_torch_functions(), before))


def test_a_program_torch_export_rejects_exports_through_the_switch():
    """shapeproof's own trace calls torch.export.export inside the block: it must reach torch, not recurse."""
    case = next(c for c in CASES if c.name == "pad_to_multiple")
    model, args, spec = case.build()
    with pytest.raises(Exception) as torch_error:     # torch 2.13: "Cannot create Dim with inconsistent..."
        torch.export.export(model, args, dynamic_shapes=spec)
    assert not isinstance(torch_error.value, ExportError)
    with shapeproof.engine():
        program = torch.export.export(model, args, dynamic_shapes=spec)
        draft = torch.export.draft_export(model, args, dynamic_shapes=spec)
    assert isinstance(program, torch.export.ExportedProgram)
    assert draft._report.successful() and not draft._report.failures
    inputs = case.make_inputs(case.sweep[-1])
    with torch.no_grad():
        for ep in (program, draft):
            assert torch.allclose(ep.module()(*inputs), model(*inputs), rtol=1e-4, atol=1e-5)


class BranchOnBatch(torch.nn.Module):
    def forward(self, x):                    # one program for B > 4, another below
        if x.shape[0] > 4:
            return x * 2
        return x + 1


@pytest.mark.slow
def test_torch_onnx_refines_the_spec_from_shapeproofs_error_as_from_torchs():
    """torch.onnx exports with deferred runtime asserts (so an even batch is an assert, not an error); a
    branch on the named batch is an error in torch.export, and torch.onnx then re-exports with the spec
    ``refine_dynamic_shapes_from_suggested_fixes`` reads from the error's message: from shapeproof's as
    from torch's, the batch narrowed to B > 4 (without conds; with them, the whole range, below)."""
    pytest.importorskip("onnxscript")
    args, spec = (torch.randn(8, 3),), ({0: Dim("B", min=2, max=9)},)
    torchs = torch.onnx.export(BranchOnBatch(), args, dynamic_shapes=spec, dynamo=True, verbose=False)
    with shapeproof.engine(cond_branches=False):
        ours = torch.onnx.export(BranchOnBatch(), args, dynamic_shapes=spec, dynamo=True, verbose=False)
    ranges = [list(p.exported_program.range_constraints.values()) for p in (torchs, ours)]
    assert ranges[0] == ranges[1] and (ranges[1][0].lower, ranges[1][0].upper) == (5, 9)
    x = torch.randn(6, 3)
    assert torch.allclose(torch.as_tensor(ours(x)[0]), x * 2)
    with shapeproof.engine():
        whole = torch.onnx.export(BranchOnBatch(), args, dynamic_shapes=spec, dynamo=True, verbose=False)
    bounds = [(r.lower, r.upper) for r in whole.exported_program.range_constraints.values()]
    assert bounds == [(2, 9)]
    for n in (2, 4, 5, 9):
        x = torch.randn(n, 3)
        assert torch.allclose(torch.as_tensor(whole(x)[0]), BranchOnBatch()(x))
    model, args, spec = _even_batch()
    with shapeproof.engine():
        torch.onnx.export(model, args, dynamic_shapes=spec, dynamo=True, verbose=False)
