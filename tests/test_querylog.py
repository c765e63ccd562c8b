"""The query log: one export replayed under another strategy answers like a fresh export with it."""
from __future__ import annotations

import pytest
import shapeproof
from export_cases import CASES
from shapeproof.shapes.querylog import read_log, replay, to_log, write_log
from shapeproof.solver.language.parse import parse_condition
from shapeproof.tracer import strategy_named

_BY_NAME = {c.name: c for c in CASES}


def _export(case_name: str, strategy: str):
    model, args, spec = _BY_NAME[case_name].build()
    return shapeproof.export_with_report(model, args, dynamic_shapes=spec, strategy=strategy)


@pytest.mark.parametrize("case_name", ["chunk_view", "half_batch_derived"])
@pytest.mark.parametrize("other", ["z3", "interval", "torch"])
def test_replay_matches_a_fresh_export_with_the_other_strategy(case_name, other, tmp_path):
    """Replay answers each logged question as a fresh export with ``other`` answers it.

    The two exports ask the same questions in the same order until the first
    answer that differs (a different answer changes what torch asks next); up
    to and including it, the replayed verdicts equal the fresh export's.  And
    every question of the fresh export, replayed, gets the verdict it got
    there: verdicts are a function of the question alone.
    """
    logged = read_log(write_log(_export(case_name, "cascade").engine.queries, tmp_path / "log.jsonl"))
    assert logged, "the export asked the engine nothing"
    chosen = strategy_named(other)
    replayed = [v.status.value for v in replay(logged, strategy=chosen)]
    fresh = to_log(_export(case_name, other).engine.queries)
    diverge = next((i for i, (q, r) in enumerate(zip(logged, replayed)) if q.status != r), len(logged))
    shared = min(diverge + 1, len(logged))
    assert [q.key for q in fresh[:shared]] == [q.key for q in logged[:shared]]
    assert [q.status for q in fresh[:shared]] == replayed[:shared]
    if diverge == len(logged):
        assert len(fresh) == len(logged)
    assert [v.status.value for v in replay(fresh, strategy=chosen)] == [q.status for q in fresh]


def test_log_round_trips_through_the_safe_parser(tmp_path):
    result = _export("pad_to_multiple", "cascade")
    path = write_log(result.engine.queries, tmp_path / "log.jsonl")
    entries = read_log(path)
    assert len(entries) == len(result.engine.queries)
    for entry, query in zip(entries, result.engine.queries):
        assert parse_condition(entry.goal) == query.goal
        assert entry.status == query.status
    assert [v.status.value for v in replay(entries, "cascade")] == [e.status for e in entries]


@pytest.mark.parametrize("line", [
    b"{not json", b'{"goal": "T > 0"}', b"[1, 2]", b'{"goal": 3, "facts": [], "ranges": {}, "strategy": "x", '
    b'"status": "proven", "seconds": 0.1}',
    b'{"goal": "T > 0", "facts": [], "ranges": {"T": [10, 2]}, "strategy": "x", "status": "proven", '
    b'"seconds": 0.1}',                                   # an empty range proves every goal vacuously
    b"[" * 100_000, b"\xff\xfe binary",
])
def test_a_line_that_is_no_logged_question_is_a_parse_error(tmp_path, line):
    from shapeproof.shapes.querylog import read_log
    from shapeproof.solver import ParseError

    path = tmp_path / "log.jsonl"
    path.write_bytes(line + b"\n")
    with pytest.raises(ParseError, match="log.jsonl:1"):
        read_log(path)
