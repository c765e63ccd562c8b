"""Explain every guard in torch's own error messages and check each verdict independently.

    python -m bench.explain_torch_errors [--errors bench/corpus/torch_errors.jsonl]

For each message (JSONL with a ``message`` field) the guards are found and
explained by ``shapeproof.shapes.apps.torch_messages``.  Each verdict is then
checked without the solver: a counterexample must lie in range and make the
guard false (or undefined) in plain Python arithmetic; a proof is checked by
enumerating the range (each symbol clipped to its first ``--scan`` values)
when that box is small enough.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from shapeproof.shapes.apps import explain_torch_error
from shapeproof.solver.language.evaluate import truth
from shapeproof.solver.language.parse import parse_condition
from shapeproof.solver.language.terms import symbol

from . import CORPUS

DEFAULT_ERRORS = CORPUS / "torch_errors.jsonl"


def check(found, explanation, scan: int, max_points: int = 2_000_000) -> str:
    """'ok', 'ok (unchecked: box too large)' or why the verdict is wrong."""
    cond = parse_condition(found.guard)
    syms = sorted(cond.free_symbols, key=lambda s: s.name)
    if explanation.status == "refuted":
        point = {symbol(k): v for k, v in (explanation.counterexample or {}).items()}
        for s in syms:
            lo, hi = found.ranges.get(s.name, (None, None))
            v = point.get(s)
            if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
                return f"counterexample {explanation.counterexample} outside the ranges"
        return "ok" if truth(cond, point) is not True else f"guard holds at {explanation.counterexample}"
    if explanation.status == "proven":
        axes = []
        for s in syms:
            lo, hi = found.ranges.get(s.name, (None, None))
            if lo is None:
                return "ok (unchecked: unbounded below)"
            top = lo + scan - 1 if hi is None else min(hi, lo + scan - 1)
            axes.append(range(lo, top + 1))
        total = 1
        for a in axes:
            total *= len(a)
        if total > max_points:
            return "ok (unchecked: box too large)"
        for values in itertools.product(*axes):
            if truth(cond, dict(zip(syms, values))) is not True:
                return f"proven, but false at {dict(zip((s.name for s in syms), values))}"
        return "ok"
    return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", type=Path, default=DEFAULT_ERRORS)
    parser.add_argument("--scan", type=int, default=4096)
    args = parser.parse_args(argv)
    rows, wrong = [], 0
    print("| case | mode | guards | proven | refuted | unknown | counterexample valid | proofs brute-forced "
          "| wrong |")
    print("|---|---|---|---|---|---|---|---|---|")
    for line in args.errors.read_text().splitlines():
        entry = json.loads(line)
        results = explain_torch_error(entry["message"])
        checks = [check(found, ex, args.scan) for found, ex in results]
        bad = [c for c in checks if not c.startswith("ok") and c != "unknown"]
        wrong += len(bad)
        rows.append((entry, results, checks))
        refuted = [c for (_, ex), c in zip(results, checks) if ex.status == "refuted"]
        proven = [c for (_, ex), c in zip(results, checks) if ex.status == "proven"]
        print(f"| {entry.get('case', '?')} | {entry.get('mode', '')} | {len(results)} | {len(proven)} | "
              f"{len(refuted)} | {len(results) - len(proven) - len(refuted)} | "
              f"{refuted.count('ok')}/{len(refuted)} | {proven.count('ok')}/{len(proven)} | "
              f"{'; '.join(bad) or 0} |")
    guards = sum(len(r) for _, r, _ in rows)
    no_guard = [e.get("case") for e, r, _ in rows if not r]
    undecided = sum(1 for _, r, _ in rows for _, ex in r if ex.status not in ("proven", "refuted"))
    print(f"\n{len(rows)} messages, {guards} guards, {undecided} not decided, {wrong} wrong verdicts; "
          f"messages without a guard to explain: {no_guard or 'none'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
