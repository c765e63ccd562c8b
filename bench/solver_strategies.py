"""Every solver strategy on a guard corpus: correctness and time per guard.

    python -m bench.solver_strategies [--guards bench/corpus/guards.jsonl] [--out bench/out/solver]

Each line of the corpus has the guard as Python text (``python``), the declared
ranges and the ground truth from exhaustive enumeration (``holds``).  A verdict
is *wrong* when it says proven for a false guard, refuted for a true one, or
refuted with a counterexample that does not violate the guard.  Time is the
wall time of the whole ``prove`` call (parsing included), one call per guard,
with the cascade's cache cleared before each guard so no answer is reused.
Writes ``solver_strategies.csv`` (one row per strategy) and
``solver_verdicts.csv`` (one row per guard and strategy).
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

from shapeproof.solver import STRATEGIES, holds, prove
from shapeproof.solver.api import DEFAULT_TIMEOUT

from . import CORPUS

DEFAULT_GUARDS = CORPUS / "guards.jsonl"
ORDER = ["interval", "rewrite", "enumerate", "z3", "cascade"]


def load_guards(path: Path) -> tuple[list[dict], list[str]]:
    """Decidable guards as {text, ranges, holds}; also the reasons others were skipped."""
    guards, skipped = [], []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("holds") is None or not row.get("ranges"):
            skipped.append(f"{row.get('guard')}: {row.get('kind')} (no ground truth)")
            continue
        text = row.get("python")
        if text is None and isinstance(row.get("guard"), dict):        # a specialization: name == value
            text = f"{row['guard']['name']} == {row['guard']['value']}"
        guards.append({"text": text, "ranges": {k: tuple(v) for k, v in row["ranges"].items()},
                       "holds": row["holds"], "kind": row.get("kind")})
    return guards, skipped


def judge(guard: dict, verdict) -> str:
    status = verdict.status.value
    if status == "proven":
        return "ok" if guard["holds"] else "wrong"
    if status == "refuted":
        if guard["holds"] or holds(_parsed(guard["text"]), verdict.counterexample):
            return "wrong"
        return "ok"
    return "unknown"


def _parsed(text: str):
    from shapeproof.solver import parse_condition
    return parse_condition(text)


def run(guards: list[dict], strategy: str, timeout: float) -> list[dict]:
    rows = []
    for i, guard in enumerate(guards):
        if strategy == "cascade":
            STRATEGIES["cascade"].clear_cache()
        start = time.perf_counter()
        verdict = prove(guard["text"], ranges=guard["ranges"], strategy=strategy, timeout=timeout)
        wall = time.perf_counter() - start
        rows.append({"guard": i, "strategy": strategy, "status": verdict.status.value,
                     "judged": judge(guard, verdict), "by": verdict.strategy, "ms": wall * 1000,
                     "truth": guard["holds"]})
    return rows


def summarize(rows: list[dict], total: int) -> dict:
    times = sorted(r["ms"] for r in rows)
    count = {s: sum(r["status"] == s for r in rows) for s in ("proven", "refuted", "unknown")}
    correct = sum(r["judged"] == "ok" for r in rows)
    return {
        "strategy": rows[0]["strategy"], **count, "wrong": sum(r["judged"] == "wrong" for r in rows),
        "correct %": 100.0 * correct / total, "median ms": statistics.median(times),
        "p95 ms": times[min(len(times) - 1, int(0.95 * len(times)))], "max ms": times[-1],
    }


def markdown(summaries: list[dict]) -> str:
    cols = ["strategy", "proven", "refuted", "unknown", "wrong", "correct %", "median ms", "p95 ms", "max ms"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for s in summaries:
        cells = [f"{s[c]:.1f}" if isinstance(s[c], float) else str(s[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guards", type=Path, default=DEFAULT_GUARDS)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "solver")
    parser.add_argument("--strategies", default=",".join(ORDER))
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    args = parser.parse_args(argv)

    guards, skipped = load_guards(args.guards)
    print(f"{len(guards)} guards with ground truth from {args.guards} ({len(skipped)} skipped)")
    for reason in skipped:
        print(f"  skipped: {reason}")
    prove("x > 0", ranges={"x": (1, 2)}, strategy="z3")   # load Z3 once, outside the measurements
    all_rows, summaries = [], []
    for name in args.strategies.split(","):
        rows = run(guards, name, args.timeout)
        all_rows += rows
        summaries.append(summarize(rows, len(guards)))
        print(f"  {name}: done", flush=True)
    table = markdown(summaries)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "solver_strategies.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(summaries[0]))
        writer.writeheader()
        writer.writerows(summaries)
    with open(args.out / "solver_verdicts.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(all_rows[0]))
        writer.writeheader()
        writer.writerows(all_rows)
    (args.out / "solver_strategies.md").write_text(table + "\n")
    over = [r for r in all_rows if r["ms"] > args.timeout * 1000 * 1.5]
    print(f"queries past 1.5x their timeout: {len(over)}; results in {args.out}")
    return 1 if any(s["wrong"] for s in summaries) or over else 0


if __name__ == "__main__":
    raise SystemExit(main())
