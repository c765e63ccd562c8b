"""The reference corpus ships in the repository, every bench reads it by default, and the solver agrees
with its ground truth (bench/corpus/README.md)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # bench/ is a folder of scripts, not installed

import bench  # noqa: E402
from bench import case_runner, explain_torch_errors, solver_strategies, speed, strategy_exports  # noqa: E402


def test_every_bench_default_is_a_file_of_the_corpus_in_this_checkout():
    assert bench.CORPUS == ROOT / "bench" / "corpus"
    defaults = [case_runner.DEFAULT_REGISTRY, speed.DEFAULT_REGISTRY, strategy_exports.DEFAULT_REGISTRY,
                solver_strategies.DEFAULT_GUARDS, explain_torch_errors.DEFAULT_ERRORS]
    for path in defaults:
        assert path.parent == bench.CORPUS and path.is_file(), path


def test_no_file_of_the_repository_reads_data_from_outside_it():
    outside = "../" + "shared"     # spelled in two parts so that this file does not find itself
    hits = []
    for folder, subfolders, files in os.walk(ROOT):
        # .git, .venv, caches and bench outputs are not the repository's text
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s not in ("out", "__pycache__")
                         and not s.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in {".py", ".md", ".toml", ".yml", ".jsonl", ".json", ".j2", ""} and \
                    outside in path.read_text(errors="ignore"):
                hits.append(str(path.relative_to(ROOT)))
    assert hits == []


def test_the_solver_agrees_with_the_ground_truth_of_every_guard():
    guards, skipped = solver_strategies.load_guards(solver_strategies.DEFAULT_GUARDS)
    assert len(guards) == 183 and len(skipped) == 1          # the 184th is data-dependent: no truth
    assert sum(g["holds"] for g in guards) == 137
    rows = solver_strategies.run(guards, "cascade", timeout=5.0)
    assert [r for r in rows if r["judged"] != "ok"] == []


def test_a_wrong_verdict_is_judged_wrong():
    """The check above can fail: a proof of a false guard, a refutation of a true one."""
    from shapeproof.solver import prove

    false_guard = {"text": "(T % 4) != 0", "ranges": {"T": (2, 9)}, "holds": False}
    true_guard = {"text": "T >= 2", "ranges": {"T": (2, 9)}, "holds": True}
    assert solver_strategies.judge(true_guard, prove("(T % 4) != 0", ranges={"T": (2, 9)})) == "wrong"
    assert solver_strategies.judge(false_guard, prove("T >= 2", ranges={"T": (2, 9)})) == "wrong"


def test_every_guard_in_torchs_error_texts_is_decided_and_rechecked(capsys):
    assert explain_torch_errors.main(["--scan", "64"]) == 0
    closing = capsys.readouterr().out.strip().splitlines()[-1]
    assert closing.startswith("42 messages, 344 guards, 0 not decided, 0 wrong verdicts"), closing


def test_the_registry_has_its_52_cases_and_a_hand_case_builds():
    pytest.importorskip("transformers")       # the registry builds its hf cases from transformers configs
    cases = case_runner.load_registry(case_runner.DEFAULT_REGISTRY)
    groups = [c.group for c in cases.values()]
    assert (len(cases), groups.count("hand"), groups.count("hf")) == (52, 25, 27)
    model, args, spec = cases["conv1d_stride_linear"].build()
    assert model(*args).shape[0] == args[0].shape[0]
    recorded = {json.loads(line)["case"] for line in (bench.CORPUS / "torch_errors.jsonl").open()}
    assert recorded <= set(cases)


def test_a_case_or_group_the_registry_lacks_is_an_error_naming_what_it_has():
    pytest.importorskip("transformers")
    cases = case_runner.load_registry(case_runner.DEFAULT_REGISTRY)
    assert case_runner.select(cases, "", "hand")[:2] == ["conv1d_stride_linear", "conv2d_subsample_view"]
    with pytest.raises(SystemExit, match="no group 'speech'.*hand, hf"):
        case_runner.select(cases, "", "speech")
    with pytest.raises(SystemExit, match="no case nope in the registry"):
        case_runner.select(cases, "conv1d_stride_linear,nope", "")
