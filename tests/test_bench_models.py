"""bench/models.py, the project's benchmark set of real models: every entry builds and runs eagerly.

Only build + one eager forward at the example input per case (the exports
themselves are what ``python -m bench.case_runner --registry bench/models.py``
measures).
"""
import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.export import Dim  # noqa: E402  (after the importorskip)

REGISTRY = Path(__file__).resolve().parents[1] / "bench" / "models.py"
GROUPS = {"speech", "vision", "llm"}


def _load():
    name = "shapeproof_bench_models"
    if name not in sys.modules:     # the dataclass in the registry needs its module in sys.modules
        spec = importlib.util.spec_from_file_location(name, REGISTRY)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].CASES


CASES = _load()


def test_registry_covers_every_group():
    assert {case.group for case in CASES.values()} == GROUPS
    assert len(CASES) >= 12


@pytest.mark.parametrize("name", sorted(CASES))
def test_builds_and_runs_at_its_example(name):
    case = CASES[name]
    assert case.name == name and case.group in GROUPS and case.note and case.pattern
    model, args, spec = case.build()
    assert not model.training
    assert isinstance(args, tuple) and isinstance(spec, tuple) and len(spec) == len(args)

    # every dynamic dim is a Dim with a range, and the example lies strictly inside the 0/1 sizes
    dims = 0
    for arg, per_arg in zip(args, spec):
        for axis, dim in (per_arg or {}).items():
            assert isinstance(dim, Dim), (name, axis, dim)
            assert 2 <= arg.shape[axis] and dim.min <= arg.shape[axis] <= dim.max, (name, axis, dim)
            dims += 1
    assert dims >= 2, name

    with torch.no_grad():
        out = model(*args)
    assert isinstance(out, torch.Tensor) and out.shape[0] == args[0].shape[0]
    assert torch.isfinite(out).all()


def test_the_llama_depth_registry_builds_every_depth_from_its_config():
    path = REGISTRY.parent / "llama_depth.py"
    spec = importlib.util.spec_from_file_location("shapeproof_llama_depth", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert sorted(module.CASES) == sorted(f"llama_{n}_layers" for n in (1, 4, 16, 32))
    model, args, dims = module.CASES["llama_1_layers"].build()
    assert len(model.model.layers) == 1 and len(dims) == len(args) == 2
    with torch.no_grad():
        assert model(*args).shape == (2, 24, 64)
