"""bench/branch_idioms.py: the branches it names still exist in the installed libraries, its specs are
the declared ranges, and one real model's row is computed (export, traces, sweep accepted / matched)."""
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # bench/ is a folder of scripts, not installed

from torch.export import Dim  # noqa: E402  (after the importorskip)

from bench import branch_idioms  # noqa: E402
from bench.branch_models import all_models, branch_sites  # noqa: E402

MODELS = {m.name: m for m in all_models()}


def test_every_idiom_of_the_issue_has_a_model():
    idioms = {m.idiom.split()[0] for m in MODELS.values()}
    assert {"1", "2", "3", "4", "corner"} <= idioms
    assert any("4 stages" in m.idiom or "3 stages" in m.idiom for m in MODELS.values())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_branches_are_found_in_the_installed_library(name):
    sites = branch_sites(MODELS[name])
    assert len(sites) == len(MODELS[name].branches)
    for path, line, body in sites:
        assert path.endswith(".py") and line > 0 and body, (path, line)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sweep_holds_both_ends_and_lies_in_the_declared_ranges(name):
    m = MODELS[name]
    assert 8 <= len(m.sweep) <= 12 and m.sweep[0] == m.example
    for root, (lo, hi) in m.ranges.items():
        values = [p[root] for p in m.sweep]
        assert min(values) == lo and max(values) == hi, root


def test_specs_are_named_dims_over_the_ranges_or_auto():
    m = MODELS["vit_mim"]                  # H = W = 8g: two derived dims of one root
    (named,) = m.spec("named")
    assert set(named) == {2, 3} and str(named[2]) == str(named[3])
    root = named[2].root
    assert (root.__name__, root.min, root.max) == ("g", 2, 16)
    (auto,) = m.spec("auto")
    assert auto == {2: Dim.AUTO, 3: Dim.AUTO}


def test_counting_traces_counts_export_calls_and_puts_torch_back():
    original = torch.export.export
    model = torch.nn.Linear(3, 2)
    with branch_idioms.counting_traces() as calls:
        torch.export.export(model, (torch.randn(2, 3),))
        torch.export.export(model, (torch.randn(4, 3),))
    assert calls[0] == 2 and torch.export.export is original


@pytest.mark.slow
def test_one_model_through_the_harness():
    rows = branch_idioms.run_model(MODELS["vit"], specs=("named",))
    assert [(r.exporter, r.spec) for r in rows] == [("torch", "named"), ("shapeproof", "named")]
    for r in rows:
        assert r.sweep == len(MODELS["vit"].sweep)            # eager runs at every size of the sweep
        assert r.traces >= 1 and r.seconds > 0
        if r.status == "exported":
            assert 0 <= r.matched <= r.accepted <= r.sweep
            # every size the program missed is listed, rejected (x) or not matching eager (!=)
            assert len(r.missed.split()) == r.sweep - r.matched
        else:
            assert r.accepted is None and r.note
    torch_row = rows[0]
    assert torch_row.status == "exported" and torch_row.traces == 1
    # torch keeps ViT's `num_patches == num_positions and height == width` as an input check: its program
    # rejects the table's own grid (32 x 32), where eager returns the cached table
    assert "x32,32" in torch_row.missed
    lines = branch_idioms.markdown(rows)
    assert len(lines) == 4 and lines[2].startswith("| vit | 2 resize | named | torch | yes |")


@pytest.mark.slow
def test_the_trace_pool_table_has_a_row_per_workers_count(tmp_path, capsys):
    from bench import trace_pool

    assert trace_pool.main(["--models", "w2v_bert_rotary", "--split", "no", "--workers", "1,2",
                            "--out", str(tmp_path)]) == 0
    rows = (tmp_path / "trace_pool.md").read_text().splitlines()[2:]
    assert [r.split(" | ")[3] for r in rows] == ["1", "2"]
    for row in rows:
        cells = row.strip("| ").split(" | ")
        assert cells[4] == "yes" and int(cells[6]) >= 1               # exported, and some trace was made
        assert int(cells[10]) == int(cells[9]) > 0                    # every accepted size matches eager
    assert capsys.readouterr().out.count("| w2v_bert_rotary |") == 2
