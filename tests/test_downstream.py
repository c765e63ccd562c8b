"""Downstream of export: a program of a model torch.export rejects, through ONNX and AOTInductor.

The bundled audio encoder (``shapeproof.export.examples``: torch.export 2.13
fails on it) is exported once with shapeproof; its program goes through
``torch.onnx.export(ep, dynamo=True)`` into onnxruntime and is compared with
eager PyTorch at shapes across the declared ranges (B in [1, 8], T in [16,
3000]), both ends included.  ``torch.onnx.export(model, dynamo=True)`` inside
``shapeproof.engine()`` is the path for code that calls torch.export itself.
AOTInductor compiles C++ with the system compiler and simplifies every index
expression with sympy: on the encoder's nested ``//`` and ``%`` sizes that ran
for over 5 minutes, so it gets the smallest model torch.export rejects
(``pad_to_multiple``, about a minute), checked at its five sweep shapes.
``run_decompositions`` and save/load are covered in test_export.py.
"""
import numpy as np
import pytest
import torch

import shapeproof
from shapeproof.export.examples import example

from export_cases import CASES

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

# (B, T): both corners of the declared ranges, the smallest T with an odd subsampled length, and two between
SHAPES = [(1, 16), (8, 3000), (2, 17), (3, 555), (5, 1001)]
TOLERANCE = 1e-4        # fp32 through another runtime's kernels; measured differences are about 1e-6


@pytest.fixture(scope="module")
def encoder():
    model, args, spec = example()
    with pytest.raises(Exception) as torch_error:        # the point: torch.export alone rejects this model
        torch.export.export(model, args, dynamic_shapes=spec)
    assert not isinstance(torch_error.value, shapeproof.ExportError)
    return model, args, spec, shapeproof.export(model, args, dynamic_shapes=spec)


def _eager(model, x) -> np.ndarray:
    with torch.no_grad():
        return model(x).numpy()


def _onnx_matches_eager(onnx_program, model, tmp_path) -> list[float]:
    """Max abs difference from eager at every shape of SHAPES, run in onnxruntime from the saved file."""
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "model.onnx"
    onnx_program.save(str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (feed,) = session.get_inputs()
    diffs = []
    for b, t in SHAPES:
        x = torch.randn(b, t, 80, generator=torch.Generator().manual_seed(b * t))
        (got,) = session.run(None, {feed.name: x.numpy()})
        expected = _eager(model, x)
        assert got.shape == expected.shape, (b, t)
        diffs.append(float(np.abs(got - expected).max()))
    assert max(diffs) < TOLERANCE, dict(zip(SHAPES, diffs))
    print(f"onnxruntime vs eager, max abs difference at {SHAPES}: {diffs}")
    return diffs


def test_onnx_of_a_shapeproof_program_runs_in_onnxruntime(encoder, tmp_path):
    pytest.importorskip("onnxscript")
    model, args, spec, program = encoder
    onnx_program = torch.onnx.export(program, args, dynamic_shapes=spec, dynamo=True, verbose=False)
    _onnx_matches_eager(onnx_program, model, tmp_path)


def test_torch_onnx_export_of_the_model_under_the_switch(encoder, tmp_path):
    """torch.onnx calls torch.export.export itself; inside the block that is shapeproof's."""
    pytest.importorskip("onnxscript")
    model, args, spec, _ = encoder
    with shapeproof.engine():
        onnx_program = torch.onnx.export(model, args, dynamic_shapes=spec, dynamo=True, verbose=False)
    _onnx_matches_eager(onnx_program, model, tmp_path)


def test_aot_inductor_compiles_and_runs_the_program(tmp_path):
    case = next(c for c in CASES if c.name == "pad_to_multiple")
    model, args, spec = case.build()
    with pytest.raises(Exception) as torch_error:
        torch.export.export(model, args, dynamic_shapes=spec)
    assert not isinstance(torch_error.value, shapeproof.ExportError)
    program = shapeproof.export(model, args, dynamic_shapes=spec)
    path = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "pad.pt2"))
    compiled = torch._inductor.aoti_load_package(path)
    assert len(case.sweep) >= 3 and {"T": 5, "B": 1} in case.sweep and {"T": 1024, "B": 8} in case.sweep
    diffs = []
    for dims in case.sweep:
        inputs = case.make_inputs(dims)
        with torch.no_grad():
            got, expected = compiled(*inputs), model(*inputs)
        assert got.shape == expected.shape, dims
        diffs.append(float((got - expected).abs().max()))
    assert max(diffs) < TOLERANCE, list(zip(map(str, case.sweep), diffs))
    print(f"AOTInductor vs eager, max abs difference at {case.sweep}: {diffs}")


# ---------------------------------------------------------------------------- a loop rolled into a scan

LENGTHS = (1, 2, 24, 100, 512)


@pytest.fixture(scope="module")
def rolled():
    """The issue's loop (tracer/control/loops.py): torch.export fixes its length; shapeproof's is one scan."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # bench/ is a folder of scripts
    from bench.loop_models import Scan
    from torch.export import Dim

    torch.manual_seed(0)
    model, x = Scan().eval(), torch.randn(2, 24, 8)
    spec = ({1: Dim("S", min=1, max=512)},)
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    calls = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert sum("scan" in c for c in calls) == 1
    return model, x, spec, program


def test_onnx_of_a_rolled_loop_is_one_scan_that_runs_at_every_length(rolled, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    model, x, spec, program = rolled
    onnx_program = torch.onnx.export(program, (x,), dynamic_shapes=spec, dynamo=True, verbose=False)
    path = tmp_path / "scan.onnx"
    onnx_program.save(str(path))
    assert "Scan" in {n.op_type for n in onnx.load(str(path)).graph.node}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for s in LENGTHS:
        xs = torch.randn(2, s, 8)
        (got,) = session.run(None, {"x": xs.numpy()})
        assert got.shape == (2, s, 16) and np.abs(got - _eager(model, xs)).max() < TOLERANCE, s


def test_aot_inductor_runs_a_rolled_loop_at_every_length(rolled, tmp_path):
    """The program's fake tensors keep the trace's mode: its size tracker must follow nothing after the
    trace, or AOTInductor's loop counter is bound to its first value (``u0 == 0`` asserted at step 2)."""
    model, _, _, program = rolled
    path = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path / "scan.pt2"))
    compiled = torch._inductor.aoti_load_package(path)
    for s in LENGTHS:
        xs = torch.randn(2, s, 8)
        with torch.no_grad():
            assert (compiled(xs) - model(xs)).abs().max() < TOLERANCE, s
