"""bench's strategy table counts an export only when the program serves the whole declared range."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # bench/ is a folder of scripts, not installed

from bench.strategy_exports import full_range, summary, table


def _row(case, strategy, status, results=()):
    return {"case": case, "exporter": "shapeproof", "strategy": strategy, "status": status, "seconds": 1.0,
            "checks": [{"dims": {}, "result": r} for r in results]}


def test_a_program_that_rejects_valid_shapes_is_not_counted_as_exported():
    narrowed = _row("m", "interval", "exported", ["match", "rejects_valid", "rejects_valid"])
    whole = _row("m", "cascade", "exported", ["match", "match", "eager_fails"])
    wrong = _row("m", "z3", "exported", ["match", "mismatch"])
    assert not full_range(narrowed) and full_range(whole) and not full_range(wrong)
    assert not full_range(_row("m", "rewrite", "failed"))

    text = table([narrowed, whole, wrong], ["interval", "cascade", "z3"])
    assert "| m | interval | narrower: rejects 2/3 valid shapes |" in text
    assert "| m | z3 | yes, MISMATCH |" in text
    assert "interval: 0/1 (+1 narrower)" in text and "cascade: 1/1" in text
    assert "z3: 0/1 (+1 narrower)" in text


def test_summary_counts_each_outcome_once():
    rows = [_row("a", "cascade", "exported", ["match"]), _row("b", "cascade", "exported", ["rejects_valid"]),
            _row("c", "cascade", "failed"), _row("d", "cascade", "timeout")]
    text = summary(rows, ["cascade"])
    for label in ("exported over the declared ranges", "exported, narrower", "failed", "timed out"):
        assert any(line.startswith(f"| {label}") and line.endswith("| 1 |") for line in text.splitlines())


def test_the_readme_results_table_counts_cases_per_group_and_mismatches():
    from bench.case_runner import results_table

    def row(case, group, exporter, status, results=()):
        return {**_row(case, "cascade", status, results), "group": group, "exporter": exporter}

    rows = [row("a", "hand", "torch", "exported", ["match"]),
            row("a", "hand", "shapeproof", "exported", ["match"]),
            row("b", "hf", "torch", "failed"),
            row("b", "hf", "shapeproof", "exported", ["match", "mismatch"]),
            row("c", "hf", "torch", "failed"),
            row("c", "hf", "shapeproof", "failed")]
    text = results_table(rows, ["torch", "shapeproof"], "2026-12-06", "a test machine")
    assert text.startswith("Runs of **2026-12-06**, on a test machine.")
    assert "| group | cases | torch.export | shapeproof | mismatches vs eager |" in text
    assert "| hand-written patterns | 1 | 1 | 1 | 0 |" in text
    assert "| transformers models | 2 | 0 | 1 | 1 |" in text
    assert "| **all** | **3** | **1** | **2** | **1** |" in text
