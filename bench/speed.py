"""Export time and peak memory, shapeproof.export against torch.export, side by side per case.

    python -m bench.speed [--registry bench/corpus/cases.py] [--cases a,b] [--group hand|hf]
                          [--rounds 2] [--timeout 600] [--no-memory] [--auto] [--out DIR]

Time: one fresh interpreter per case runs ``torch.export.export(strict=False)``
then ``shapeproof.export``, ``--rounds`` times, and each exporter's best time
counts.  Each one's first call warms caches the later calls find warm: torch's
(dispatch, fake-tensor and sympy caches, which shapeproof's first call then
also finds warm) and shapeproof's own (its first Z3 context, its sympy node
classes); the best time is what each costs once warm, and both get as many
calls, alternating, so neither is favoured by going second.  Each timed
export starts after ``gc.collect()``: a generation-2 collection pending from
the imports otherwise falls into the next export (measured: 0.2 s of a
0.4 s export, doubling the ratio of a small model).  Both libraries
are imported before the clock starts.  Memory: one more interpreter per
(case, exporter) does that export alone and reports its peak RSS
(``ru_maxrss``), imports included in both.

``--auto`` gives both exporters ``Dim.AUTO`` for every dim the case's spec
names (torch's program may then be narrower than shapeproof's: the table
says how each exported, not which accepts more).

Per case: both times and their ratio, the traces the region search made,
the questions the engine asked and the solver's total time in them, both
peak RSS and their ratio.  Writes ``speed.csv`` and ``speed.md``.
"""
from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .case_runner import DEFAULT_REGISTRY, REPO, load_registry, select

FIELDS = ["case", "torch_s", "shapeproof_s", "ratio", "torch_status", "shapeproof_status", "traces",
          "queries", "solver_ms", "torch_mb", "shapeproof_mb", "memory_ratio"]


def _export(exporter: str, model, args, spec):
    """One export; returns (status, seconds, shapeproof's ExportResult or ExportError, else None)."""
    import torch

    import shapeproof

    gc.collect()       # a full collection pending from earlier work would land in whichever export runs next
    start = time.perf_counter()
    try:
        if exporter == "torch":
            torch.export.export(model, args, dynamic_shapes=spec, strict=False)
            return "exported", time.perf_counter() - start, None
        result = shapeproof.export_with_report(model, args, dynamic_shapes=spec)
        return "exported", time.perf_counter() - start, result
    except Exception as exc:  # a failing export is a row too: failing fast is measured
        return f"failed: {type(exc).__name__}", time.perf_counter() - start, exc


def auto_spec(spec):
    """``spec`` with ``Dim.AUTO`` for every ``Dim`` it names (derived dims included), the rest kept."""
    from torch.export import Dim

    if isinstance(spec, dict):
        return {k: auto_spec(v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(auto_spec(v) for v in spec)
    return Dim.AUTO if hasattr(spec, "__name__") and hasattr(spec, "min") else spec


def _build(name: str, registry: Path, auto: bool):
    model, args, spec = load_registry(registry)[name].build()
    return model, args, auto_spec(spec) if auto else spec


def time_case(name: str, registry: Path, rounds: int = 2, auto: bool = False) -> dict:
    import shapeproof.export  # noqa: F401  (imported before the clock, like torch.export)

    model, args, spec = _build(name, registry, auto)
    theirs, mine = [], []
    for _ in range(rounds):
        theirs.append(_export("torch", model, args, spec))
        mine.append(_export("shapeproof", model, args, spec))
    first, ours = theirs[0], mine[-1]
    torch_s, ours_s = min(t[1] for t in theirs), min(m[1] for m in mine)
    found = ours[2]
    queries = getattr(getattr(found, "engine", None), "queries", None) or []
    regions = getattr(found, "regions", None)           # a RegionSearch, or an ExportError's list of Regions
    traces = (len(regions.traces) if hasattr(regions, "traces")
              else sum(len(r.traces) for r in regions) if regions else 1)
    return {"case": name, "torch_s": round(torch_s, 3), "shapeproof_s": round(ours_s, 3),
            "ratio": round(ours_s / torch_s, 2) if torch_s else None, "torch_status": first[0],
            "shapeproof_status": ours[0], "traces": traces,
            "queries": len(queries), "solver_ms": round(1000 * sum(q.seconds for q in queries), 1)}


def peak_memory(name: str, registry: Path, exporter: str, auto: bool = False) -> float:
    import resource

    import shapeproof.export  # noqa: F401

    model, args, spec = _build(name, registry, auto)
    _export(exporter, model, args, spec)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024      # KiB on Linux


def _child(args: list[str], timeout: float) -> dict | None:
    cmd = [sys.executable, "-m", "bench.speed", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-400:]}


def table(rows: list[dict]) -> str:
    lines = ["| case | torch s | shapeproof s | ratio | traces | queries | solver ms | torch MB | shapeproof "
             "MB | memory ratio | status (torch / shapeproof) |", "|---|" + "---|" * 10]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in (
            "case", "torch_s", "shapeproof_s", "ratio", "traces", "queries", "solver_ms", "torch_mb",
            "shapeproof_mb", "memory_ratio"))
            + f" | {r.get('torch_status')} / {r.get('shapeproof_status')} |")
    both = [r for r in rows if r.get("torch_status") == r.get("shapeproof_status") == "exported"]
    failed = [r for r in rows if str(r.get("torch_status", "")).startswith("failed")
              and str(r.get("shapeproof_status", "")).startswith("failed")]
    notes = []
    if both:
        ratios = [r["ratio"] for r in both]
        notes.append(f"both export ({len(both)} cases): median ratio {statistics.median(ratios):.2f}, "
                     f"max {max(ratios):.2f} ({max(both, key=lambda r: r['ratio'])['case']})")
        memory = [r["memory_ratio"] for r in both if r.get("memory_ratio")]
        if memory:
            notes.append(f"peak RSS ratio: median {statistics.median(memory):.2f}, max {max(memory):.2f}")
    if failed:
        notes.append("both fail: " + ", ".join(f"{r['case']} {r['ratio']}x" for r in failed))
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY)
    parser.add_argument("--cases", default="")
    parser.add_argument("--group", default="")
    parser.add_argument("--rounds", type=int, default=2, help="calls of each exporter per case (best counts)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--auto", action="store_true", help="Dim.AUTO for every dim the spec names")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "speed")
    parser.add_argument("--time-one", help=argparse.SUPPRESS)
    parser.add_argument("--memory-one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.time_one:
        print(json.dumps(time_case(args.time_one, args.registry, args.rounds, args.auto)))
        return 0
    if args.memory_one:
        print(json.dumps({"mb": peak_memory(args.memory_one[0], args.registry, args.memory_one[1],
                                            args.auto)}))
        return 0

    names = select(load_registry(args.registry), args.cases, args.group)
    rows = []
    for k, name in enumerate(names, 1):
        common = ["--registry", str(args.registry), *(["--auto"] if args.auto else [])]
        timed = _child(["--time-one", name, "--rounds", str(args.rounds), *common], args.timeout)
        row = timed or {"case": name, "torch_status": "timeout", "shapeproof_status": "timeout"}
        if not args.no_memory and "error" not in row:
            mb = {e: (_child(["--memory-one", name, e, *common], args.timeout) or {}).get("mb")
                  for e in ("torch", "shapeproof")}
            row.update(torch_mb=round(mb["torch"] or 0), shapeproof_mb=round(mb["shapeproof"] or 0),
                       memory_ratio=round(mb["shapeproof"] / mb["torch"], 2) if mb["torch"]
                       and mb["shapeproof"]
                       else None)
        rows.append({"case": name, **row})
        print(f"[{k}/{len(names)}] {name}: torch {row.get('torch_s')} s, shapeproof "
              f"{row.get('shapeproof_s')} s "
              f"({row.get('ratio')}x)", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "speed.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    text = table(rows)
    (args.out / "speed.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
