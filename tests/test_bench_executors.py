"""``python -m bench --executor ray`` runs the local pool's subprocess jobs, with the same results."""
import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # bench/ is a folder of scripts, not installed

from bench import strategy_exports
from bench.executors import run_jobs

REGISTRY = Path(__file__).resolve().parent / "bench_registry.py"
TIMING = {"seconds", "ms_median", "ms_p95"}        # the only columns that may differ between two runs


def _results(out: Path) -> list[dict]:
    with open(out / "results.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def _double(x):
    return {"x": 2 * x}


def test_rows_come_back_in_job_order():
    assert run_jobs(_double, [(3,), (1,), (2,)], workers=2) == [{"x": 6}, {"x": 2}, {"x": 4}]
    with pytest.raises(ValueError, match="unknown executor"):
        run_jobs(_double, [(1,)], executor="dask")


@pytest.mark.slow
def test_ray_gives_the_local_pools_results(tmp_path):
    ray = pytest.importorskip("ray")
    argv = ["--registry", str(REGISTRY), "--strategies", "cascade", "--jobs", "2", "--timeout", "300"]
    assert strategy_exports.main(argv + ["--out", str(tmp_path / "local")]) == 0
    try:
        assert strategy_exports.main(argv + ["--executor", "ray", "--out", str(tmp_path / "ray")]) == 0
        assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 2
    finally:
        ray.shutdown()
    local, on_ray = _results(tmp_path / "local"), _results(tmp_path / "ray")
    assert local == on_ray
    status = {(r["case"], r["strategy"]): r["status"] for r in local}
    assert status == {("pad_to_multiple", "torch.export"): "failed",
                      ("pad_to_multiple", "cascade"): "exported",
                      ("even_batch", "torch.export"): "failed", ("even_batch", "cascade"): "failed"}
    exported = next(r for r in local if r["strategy"] == "cascade" and r["status"] == "exported")
    assert exported["differential"].endswith("match")
