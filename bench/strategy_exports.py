"""Whole exports under every solver strategy, side by side with plain torch.export.

    python -m bench [--registry bench/corpus/cases.py] [--strategies interval,rewrite,z3,cascade,torch]
                    [--cases a,b] [--group g] [--jobs 2] [--timeout 60] [--out bench/out/strategies]
                    [--executor local|ray]

For every model of a registry (default: the reference corpus, ``bench/corpus/cases.py``;
``--registry bench/models.py`` runs the project's own set of real models) the runner exports once
with ``torch.export.export(strict=False)`` and once with ``shapeproof.export``
per strategy, each in its own subprocess with a timeout, ``--jobs`` at a time
(a process pool: exports hold the GIL and torch's global state), or as Ray
tasks with ``--executor ray`` (``bench/executors.py``).  Each
shapeproof export writes its query log (``logs/<model>__<strategy>.jsonl``),
which ``shapeproof.shapes.querylog.replay`` re-asks under any strategy
without re-tracing.

Writes ``table.md``, ``results.csv``, ``results.jsonl``, ``decided.png``
(questions decided per strategy) and ``time_ratio.png`` (export time over
torch.export's) to ``--out``.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

from .case_runner import DEFAULT_REGISTRY, REPO, _one, differential, load_registry, select
from .executors import EXECUTORS, run_jobs

STRATEGIES = ("interval", "rewrite", "z3", "cascade", "torch")
TORCH = "torch.export"


def _label(row: dict) -> str:
    return TORCH if row["exporter"] == "torch" else row["strategy"]


def table(rows: list[dict], columns: list[str]) -> str:
    header = ("| model | strategy | exported? | questions total / proven / refuted / unknown "
              "| solver ms median, p95 | export s |")
    lines = [header, "|---|---|---|---|---|---|"]
    by_case: dict[str, dict] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[_label(r)] = r
    for case in sorted(by_case):
        for column in columns:
            r = by_case[case].get(column)
            if r is None:
                continue
            ok = _exported_cell(r)
            q = r.get("queries")
            counts = f"{q['total']} / {q['proven']} / {q['refuted']} / {q['unknown']}" if q else "-"
            ms = f"{q['ms_median']:.1f}, {q['ms_p95']:.1f}" if q and q["total"] else "-"
            lines.append(f"| {case} | {column} | {ok} | {counts} | {ms} | {r.get('seconds', 0):.1f} |")
    totals = []
    for column in columns:
        full = sum(1 for per in by_case.values() if column in per and full_range(per[column]))
        narrow = sum(1 for per in by_case.values() if column in per and narrower(per[column]))
        totals.append(f"{column}: {full}/{len(by_case)}" + (f" (+{narrow} narrower)" if narrow else ""))
    return ("\n".join(lines) + "\n\nExported over the declared ranges (the program accepts every sampled "
            "valid shape and matches eager): " + ", ".join(totals) + "\n")


def summary(rows: list[dict], columns: list[str]) -> str:
    """One column per exporter/strategy: models exported, questions decided, solver and export time."""
    def cells(fn):
        return " | ".join(fn([r for r in rows if _label(r) == c], c) for c in columns)

    def decided(rs, c):
        q = [r["queries"] for r in rs if r.get("queries")]
        total = sum(x["total"] for x in q)
        done = sum(x["proven"] + x["refuted"] for x in q)
        return f"{done}/{total} ({100 * done / total:.0f}%)" if total else "-"

    def solver_ms(rs, c):
        medians = [r["queries"]["ms_median"] for r in rs if (r.get("queries") or {}).get("total")]
        return f"{statistics.median(medians):.1f}" if medians else "-"

    ratios = time_ratios(rows, columns)

    def ratio(rs, c):
        pairs = ratios.get(c)
        return "1.00" if c == TORCH else (f"{statistics.median(v for _, v in pairs):.2f}" if pairs else "-")

    def count(pred):
        return lambda rs, c: str(sum(1 for r in rs if pred(r)))

    lines = [f"| {len({r['case'] for r in rows})} models | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns),
             "| exported over the declared ranges | " + cells(count(full_range)) + " |",
             "| exported, narrower (rejects valid shapes) | "
             + cells(count(narrower)) + " |",
             "| failed (with a reason) | " + cells(count(lambda r: r["status"] == "failed")) + " |",
             "| timed out | " + cells(count(lambda r: r["status"] == "timeout")) + " |",
             "| shape questions decided | " + cells(decided) + " |",
             "| solver ms per question (median of models' medians) | " + cells(solver_ms) + " |",
             "| export time / torch.export's (median, models both export) | " + cells(ratio) + " |"]
    return "\n".join(lines) + "\n"


def full_range(row: dict) -> bool:
    """Exported, and the program ran and matched eager at every sampled shape where eager runs."""
    results = [c["result"] for c in row.get("checks") or []]
    return row["status"] == "exported" and not any(r in ("mismatch", "rejects_valid") for r in results)


def narrower(row: dict) -> bool:
    """Exported, but the program rejected (or disagreed with eager at) a valid sampled shape."""
    return row["status"] == "exported" and not full_range(row)


def _exported_cell(row: dict) -> str:
    if row["status"] != "exported":
        return row["status"]
    results = [c["result"] for c in row.get("checks") or []]
    if "mismatch" in results:
        return "yes, MISMATCH"
    rejected = results.count("rejects_valid")
    return f"narrower: rejects {rejected}/{len(results)} valid shapes" if rejected else "yes"


def time_ratios(rows: list[dict], columns: list[str]) -> dict[str, list[tuple[str, float]]]:
    """Per strategy: (model, export seconds / torch.export seconds) where both exported."""
    by_case: dict[str, dict] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[_label(r)] = r
    out: dict[str, list] = {c: [] for c in columns if c != TORCH}
    for case, per in sorted(by_case.items()):
        base = per.get(TORCH)
        if base is None or base["status"] != "exported":
            continue
        for column, pairs in out.items():
            r = per.get(column)
            if r is not None and r["status"] == "exported":
                pairs.append((case, r["seconds"] / base["seconds"]))
    return out


def plots(rows: list[dict], columns: list[str], out: Path) -> list[Path]:
    try:
        import matplotlib
    except ImportError:                      # the table and CSV do not need it
        print('matplotlib is not installed: no plots (pip install -e ".[bench]")', file=sys.stderr)
        return []

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    strategies = [c for c in columns if c != TORCH]
    asked = {s: [r["queries"] for r in rows if _label(r) == s and r.get("queries")] for s in strategies}
    total = {s: sum(q["total"] for q in asked[s]) for s in strategies}
    decided = {s: sum(q["proven"] + q["refuted"] for q in asked[s]) for s in strategies}
    share = [100 * decided[s] / total[s] if total[s] else 0 for s in strategies]
    full = [sum(1 for r in rows if _label(r) == c and full_range(r)) for c in columns]
    narrow = [sum(1 for r in rows if _label(r) == c and narrower(r)) for c in columns]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    bars = ax1.bar(strategies, share, color="#3b7dd8")
    ax1.bar_label(bars, [f"{decided[s]}/{total[s]}" for s in strategies], fontsize=8)
    ax1.set_ylim(0, 110)
    ax1.set_ylabel("% decided (proven or refuted)")
    ax1.set_title("Shape questions the strategy settled (the rest: the example decides)", fontsize=10)
    ax2.bar(columns, full, color=["#888" if c == TORCH else "#2e9d5b" for c in columns])
    ax2.bar(columns, narrow, bottom=full, color="#e3b341")
    ax2.set_title(f"Models exported, of {len({r['case'] for r in rows})}", fontsize=10)
    ax2.legend(handles=[Patch(color="#2e9d5b", label="whole declared range (torch.export: grey)"),
                        Patch(color="#e3b341", label="narrower (rejects valid shapes)")], fontsize=8,
                        loc="lower right")
    fig.tight_layout()
    decided_png = out / "decided.png"
    fig.savefig(decided_png, dpi=110)
    plt.close(fig)

    ratios = time_ratios(rows, columns)
    fig, ax = plt.subplots(figsize=(11, 4))
    cases = sorted({case for pairs in ratios.values() for case, _ in pairs})
    width = 0.8 / max(1, len(ratios))
    for k, (strategy, pairs) in enumerate(ratios.items()):
        values = dict(pairs)
        xs = [i + k * width for i, c in enumerate(cases) if c in values]
        ax.bar(xs, [values[c] for c in cases if c in values], width=width, label=strategy)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(cases))], cases, rotation=60, ha="right",
                  fontsize=7)
    ax.set_ylabel("export time / torch.export")
    ax.set_title("Export time relative to torch.export (models both export)")
    ax.legend(fontsize=8, ncol=len(ratios))
    fig.tight_layout()
    ratio_png = out / "time_ratio.png"
    fig.savefig(ratio_png, dpi=110)
    plt.close(fig)
    return [decided_png, ratio_png]


def write(rows: list[dict], columns: list[str], out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w") as f:
        f.writelines(json.dumps(r, default=str) + "\n" for r in rows)
    fields = ["case", "strategy", "status", "seconds", "total", "proven", "refuted", "unknown", "ms_median",
              "ms_p95", "differential", "error"]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, **(r.get("queries") or {}), "strategy": _label(r),
                             "differential": differential(r)})
    text = summary(rows, columns) + "\n" + table(rows, columns)
    (out / "table.md").write_text(text)
    plots(rows, columns, out)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--no-torch-export", action="store_true", help="skip the plain torch.export column")
    parser.add_argument("--cases", default="")
    parser.add_argument("--group", default="")
    parser.add_argument("--jobs", type=int, default=2, help="exports at a time (Ray: CPUs of a local one)")
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="local: a pool of subprocesses; ray: the same subprocesses as Ray tasks")
    parser.add_argument("--timeout", type=float, default=60, help="seconds per export (default 60)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "strategies")
    parser.add_argument("--replot", action="store_true", help="redo table and plots from --out/results.jsonl")
    args = parser.parse_args(argv)
    args.strategy = "cascade"
    if args.replot:
        rows = [json.loads(line) for line in (args.out / "results.jsonl").read_text().splitlines()]
        labels = {_label(r) for r in rows}
        print(write(rows, [c for c in (TORCH, *STRATEGIES) if c in labels], args.out))
        return 0

    names = select(load_registry(args.registry), args.cases, args.group)
    strategies = [s for s in args.strategies.split(",") if s]
    columns = ([] if args.no_torch_export else [TORCH]) + strategies
    jobs = [(n, "torch", "cascade") for n in names if not args.no_torch_export]
    jobs += [(n, "shapeproof", s) for n in names for s in strategies]
    logs = args.out / "logs"
    rows = run_jobs(_one, [(n, e, args, s, logs if e != "torch" else None) for n, e, s in jobs],
                    executor=args.executor, workers=args.jobs,
                    describe=lambda r: f"{r['case']} {_label(r)}: {r['status']} {r.get('seconds', 0):.1f}s")
    print(write(rows, columns, args.out))
    return 1 if any("mismatch" in differential(r) for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
