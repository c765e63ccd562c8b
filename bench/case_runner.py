"""Export every case of a registry with torch.export and with shapeproof, side by side.

    python -m bench.case_runner [--registry bench/corpus/cases.py] [--exporters torch,shapeproof]
                                [--cases a,b] [--group hand|hf] [--jobs 2] [--timeout 300] [--out DIR]
                                [--executor local|ray]

A registry is a Python file with ``CASES[name].build() -> (model, args, dynamic_shapes)``
(and optional ``alt_dims``), the format of ``bench/corpus/cases.py`` (the default).  Each
(case, exporter) runs in its own subprocess with a timeout.  For every program
that exports, ``ep.module()`` is compared with eager PyTorch on the example and
on at least five other inputs drawn from the declared ranges, both ends of
every range included (*differential soundness*).  For every shapeproof failure
the runner records the violations, checks that each counterexample really
violates its guard, evaluates eager at the counterexample (does the model
itself fail there, or only the traced path?), and re-exports with
``suggest_dynamic_shapes`` to see whether the fix works.

Writes ``results.jsonl``, ``results.csv`` and ``table.md`` to the out directory, and prints the README's
results table with the day and machine of the run (``readme_table.md``; the README quotes the run of all
three exporters, ``--exporters torch,shapeproof,split``).
"""
from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

from . import CORPUS
from .executors import EXECUTORS, REPO, run_jobs

DEFAULT_REGISTRY = CORPUS / "cases.py"
FIX_ROUNDS = 3
EXPORTERS = ("torch", "shapeproof")      # also "split": shapeproof with split=True


# ---------------------------------------------------------------------------- registry and inputs

def load_registry(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location(f"registry_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.CASES


def select(cases: dict, names: str, group: str) -> list[str]:
    """The cases ``--cases a,b`` and ``--group g`` pick (all when neither is given), in registry order.

    A name or group the registry does not have is an error naming what it has, not an empty run.
    """
    wanted = [n for n in names.split(",") if n]
    unknown = [n for n in wanted if n not in cases]
    if unknown:
        raise SystemExit(f"no case {', '.join(unknown)} in the registry; it has: {', '.join(cases)}")
    groups = sorted({c.group for c in cases.values()})
    if group and group not in groups:
        raise SystemExit(f"no group {group!r} in the registry; it has: {', '.join(groups)}")
    return [n for n, c in cases.items() if (not wanted or n in wanted) and (not group or c.group == group)]


def _dims(spec, args):
    """(arg index, dim index, Dim) for every dynamic dim of a tuple-shaped spec."""
    import torch
    from torch.export import Dim

    flat_specs = spec if isinstance(spec, (list, tuple)) else [spec]
    out = []
    for i, (arg, per_arg) in enumerate(zip(args, flat_specs)):
        if isinstance(arg, torch.Tensor) and isinstance(per_arg, dict):
            for d, dim in per_arg.items():
                if isinstance(dim, Dim):
                    out.append((i, d, dim))
    return out


def _root(dim):
    return getattr(dim, "root", dim)


def _size_of(dim, root_value: int) -> int:
    return int(dim.fn(root_value)) if hasattr(dim, "root") else root_value


def dim_points(args, spec, alt_dims=None, count: int = 5, seed: int = 0) -> list[dict]:
    """Values of every root Dim: the example first, then range ends and interior values."""
    roots, example = {}, {}
    for i, d, dim in _dims(spec, args):
        root = _root(dim)
        roots[root.__name__] = root
        size = int(args[i].shape[d])
        if hasattr(dim, "root"):
            b = int(dim.fn(0))
            a = int(dim.fn(1)) - b
            example[root.__name__] = (size - b) // a
        else:
            example[root.__name__] = size
    lo = {n: int(r.min) for n, r in roots.items()}
    hi = {n: int(min(r.max, 10 ** 6)) for n, r in roots.items()}
    rng = random.Random(seed)
    points = [dict(example), dict(lo), dict(hi)]
    names = sorted(roots)
    for k, name in enumerate(names):                      # mixed corners: one end per dim
        points.append({n: (lo[n] if (j + k) % 2 else hi[n]) for j, n in enumerate(names)})
    for p in alt_dims or []:
        points.append({**example, **{k: v for k, v in p.items() if k in roots}})
    while len(points) < count + 3:
        points.append({n: rng.randint(lo[n], hi[n]) | 1 if hi[n] > lo[n] else lo[n] for n in names})
    unique = []
    for p in points:
        p = {n: max(lo[n], min(hi[n], v)) for n, v in p.items()}
        if p not in unique:
            unique.append(p)
    return unique


def inputs_for(args, spec, point: dict, seed: int = 0):
    """A copy of ``args`` with every dynamic dim resized to ``point``; values fresh but plausible."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    sizes = {}
    for i, d, dim in _dims(spec, args):
        sizes.setdefault(i, {})[d] = _size_of(dim, point[_root(dim).__name__])
    new = []
    for i, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor) or i not in sizes:
            new.append(arg)
            continue
        shape = [sizes[i].get(d, s) for d, s in enumerate(arg.shape)]
        if arg.dtype.is_floating_point:
            new.append(torch.randn(*shape, generator=gen, dtype=arg.dtype))
        elif arg.numel() and set(arg.unique().tolist()) <= {0, 1}:
            mask = torch.ones(*shape, dtype=arg.dtype)
            if mask.dim() >= 2 and mask.shape[0] > 1 and mask.shape[-1] > 1:
                mask[-1, mask.shape[-1] - max(1, mask.shape[-1] // 4):] = 0
            new.append(mask)
        else:
            low, high = int(arg.min()), int(arg.max()) + 1
            new.append(torch.randint(low, max(high, low + 1), shape, generator=gen, dtype=arg.dtype))
    return tuple(new)


def _flat(out):
    import torch

    leaves, _ = torch.utils._pytree.tree_flatten(out)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def compare(ep, model, args, state=None) -> str:
    """'match', 'mismatch', 'rejects_valid' (program raises, eager runs) or 'eager_fails'.

    ``state``: the model's attributes when it was exported (``ModuleState``), put back before eager runs:
    a model that rebinds its own attributes at some sizes (Hugging Face Swin's window at small inputs)
    would otherwise be compared, at every later point, as the last run left it."""
    import torch

    if state is not None:
        state.restore()
    with torch.no_grad():
        try:
            expected = _flat(model(*args))
        except Exception:
            return "eager_fails"
        try:
            got = _flat(ep.module()(*args))
        except Exception:
            return "rejects_valid"
    if len(got) != len(expected):
        return "mismatch"
    for g, e in zip(got, expected):
        if g.shape != e.shape or not torch.allclose(g.float(), e.float(), rtol=1e-4, atol=1e-4,
                                                    equal_nan=True):
            return "mismatch"
    return "match"


# ---------------------------------------------------------------------------- one case in-process

def _export(exporter: str, model, args, spec, strategy: str):
    import torch

    if exporter == "torch":
        return torch.export.export(model, args, dynamic_shapes=spec, strict=False), None
    import shapeproof

    result = shapeproof.export_with_report(model, args, dynamic_shapes=spec, strategy=strategy,
                                           split=exporter == "split")
    return result.program, result


def region_points(package, example: dict, scan: int = 4096) -> list[dict]:
    """Both ends of every region of a SplitProgram, along each dim with the others at the example."""
    from shapeproof.solver.language.evaluate import truth
    from shapeproof.solver.language.terms import symbol

    points = []
    for pred in package.predicates:
        for var, (lo, hi) in package.box.items():
            if var not in example:
                continue
            hi = min(hi if hi is not None else lo + scan, lo + scan)

            def inside(v):
                env = {symbol(k): x for k, x in {**example, var: v}.items()}
                return truth(pred, env) is True

            low = next((v for v in range(lo, hi + 1) if inside(v)), None)
            high = next((v for v in range(hi, lo - 1, -1) if inside(v)), None)
            points += [{**example, var: v} for v in (low, high) if v is not None]
    return points


def _check_failure(error, case, model, args, spec, strategy) -> dict:
    """Violations of a shapeproof ExportError: counterexample valid? eager at it? does the fix work?"""
    import shapeproof

    report = []
    for ex in error.violations:
        entry = {"condition": ex.condition, "counterexample": ex.counterexample,
                 "where": (ex.where or {}).get("code"), "fixes": [f.description for f in ex.fixes]}
        if ex.counterexample:
            point = dim_points(args, spec)[0]
            point.update({k: v for k, v in ex.counterexample.items() if k in point})
            try:
                status = compare_eager_only(model, inputs_for(args, spec, point))
            except Exception as exc:  # building the input itself failed
                status = f"input error: {exc}"
            entry["eager_at_counterexample"] = status
        report.append(entry)
    fix = {"applied": False}
    current, current_spec = error, spec
    for round_ in range(1, FIX_ROUNDS + 1):     # a fix can open a path with new guards: apply the next one
        try:
            current_spec = shapeproof.suggest_dynamic_shapes(current, current_spec)
            fix.update(applied=True, rounds=round_)
            shapeproof.export(case.build()[0], args, dynamic_shapes=current_spec, strategy=strategy)
            fix["works"] = True
            break
        except shapeproof.ExportError as again:
            current = again
            fix["works"] = False
            fix["error"] = f"ExportError: {str(again).splitlines()[0][:200]}"
        except Exception as exc:
            fix["works"] = False
            fix["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            break
    return {"violations": report, "fix": fix}


def compare_eager_only(model, args) -> str:
    import torch

    with torch.no_grad():
        try:
            model(*args)
            return "eager ok"
        except Exception:
            return "eager fails"


def _query_stats(row: dict, engine, name: str, log_dir: Path | None) -> None:
    """The engine's questions during the export: counts, solver time, and the replayable log."""
    from shapeproof.shapes.querylog import summarize, write_log

    row["queries"] = summarize((q.status for q in engine.queries), (q.seconds for q in engine.queries))
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        row["query_log"] = str(write_log(engine.queries, log_dir / f"{name}__{row['strategy']}.jsonl"))


def run_case(name: str, registry: Path, exporter: str, strategy: str = "cascade",
             log_dir: Path | None = None) -> dict:
    import torch

    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    case = load_registry(registry)[name]
    model, args, spec = case.build()
    row = {"case": name, "group": case.group, "pattern": case.pattern, "exporter": exporter,
           "strategy": strategy}
    start = time.perf_counter()
    try:
        ep, result = _export(exporter, model, args, spec, strategy)
    except Exception as exc:
        row.update(status="failed", seconds=time.perf_counter() - start, error_type=type(exc).__name__,
                   error=(str(exc).strip().splitlines() or [""])[0][:300], message=str(exc)[:6000])
        if exporter != "torch" and type(exc).__name__ == "ExportError":
            if getattr(exc, "engine", None) is not None:
                _query_stats(row, exc.engine, name, log_dir)
            row.update(_check_failure(exc, case, model, args, spec, strategy))
        elif exporter != "torch":
            row["traceback"] = traceback.format_exc()[-3000:]
        return row
    row.update(status="exported", seconds=time.perf_counter() - start,
               guards_code=len(getattr(ep, "_guards_code", []) or []),
               range_constraints={str(k): [str(v.lower), str(v.upper)]
                                  for k, v in getattr(ep, "range_constraints", {}).items()})
    points = dim_points(args, spec, case.alt_dims)
    if result is not None:
        _query_stats(row, result.engine, name, log_dir)
        row["discharged"] = len(result.discharged)
        row["kept_guards"] = len(result.report.kept_guards)
        if result.regions is not None:
            row["regions"] = result.regions.describe()
            row["traces"] = len(result.regions.traces)
            row["input_checks"] = getattr(ep, "_guards_code", None)
        if hasattr(ep, "predicates"):
            points += [p for p in region_points(ep, points[0]) if p not in points]
    from shapeproof.tracer.module_state import ModuleState

    exported_state = ModuleState(model)
    checks = []
    for k, point in enumerate(points):
        inputs = args if k == 0 else inputs_for(args, spec, point, seed=k)
        checks.append({"dims": point, "result": compare(ep, model, inputs, exported_state)})
    row["checks"] = checks
    return row


# ---------------------------------------------------------------------------- driver

def _one(name: str, exporter: str, args, strategy: str | None = None, log_dir: Path | None = None) -> dict:
    """Run one (case, exporter) in a fresh interpreter with a timeout; the row it prints."""
    cmd = [sys.executable, "-m", "bench.case_runner", "--one", name, "--exporter", exporter,
           "--registry", str(args.registry), "--strategy", strategy or args.strategy]
    if log_dir is not None:
        cmd += ["--log-dir", str(log_dir)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=REPO,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
    except subprocess.TimeoutExpired:
        return {"case": name, "exporter": exporter, "strategy": strategy or args.strategy,
                "status": "timeout", "seconds": args.timeout}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"case": name, "exporter": exporter, "strategy": strategy or args.strategy, "status": "error",
                "error": done.stderr[-800:]}
    return json.loads(lines[-1])


def differential(row: dict) -> str:
    checks = row.get("checks") or []
    if not checks:
        return ""
    counts = {k: sum(c["result"] == k for c in checks)
              for k in ("match", "mismatch", "rejects_valid", "eager_fails")}
    text = f"{counts['match']}/{len(checks)} match"
    for key in ("mismatch", "rejects_valid", "eager_fails"):
        if counts[key]:
            text += f", {counts[key]} {key.replace('_', ' ')}"
    return text


def summary_cell(row: dict | None) -> str:
    if row is None:
        return ""
    if row["status"] == "exported":
        regions = (f", {len(row['regions'])} region(s) from {row['traces']} traces" if row.get("regions")
                   else "")
        return f"OK ({differential(row)}{regions})"
    if row["status"] == "failed" and row.get("violations") is not None:
        parts = []
        for v in row["violations"][:2]:
            cex = ", ".join(f"{k}={x}" for k, x in (v.get("counterexample") or {}).items())
            parts.append(f"`{v['condition'][:60]}` fails at {cex} ({v.get('eager_at_counterexample', '?')})")
        more = f" (+{len(row['violations']) - 2} more)" if len(row["violations"]) > 2 else ""
        fix = row.get("fix", {})
        rounds = f" ({fix['rounds']} rounds)" if fix.get("rounds", 1) > 1 else ""
        fix_text = f"fix works{rounds}" if fix.get("works") else f"fix: {fix.get('error', 'none')[:80]}"
        return f"FAIL: {'; '.join(parts)}{more}; {fix_text}"
    return f"{row['status'].upper()}: {row.get('error_type', '')} {row.get('error', '')[:100]}"


def write_outputs(rows: list[dict], out: Path, exporters: list[str]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    fields = ["case", "exporter", "status", "seconds", "error_type", "error", "discharged", "kept_guards"]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields + ["differential"], extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "differential": differential(r)})
    by_case: dict[str, dict] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["exporter"]] = r
    header = "| case | " + " | ".join(exporters) + " | export s (" + " / ".join(exporters) + ") |"
    lines = [header, "|---|" + "---|" * (len(exporters) + 1)]
    for case, per in by_case.items():
        cells = [summary_cell(per.get(e)) for e in exporters]
        times = " / ".join(f"{per[e]['seconds']:.1f}" if e in per and "seconds" in per[e] else "-"
                           for e in exporters)
        lines.append(f"| {case} | " + " | ".join(cells) + f" | {times} |")
    totals = []
    for e in exporters:
        ok = sum(1 for per in by_case.values() if per.get(e, {}).get("status") == "exported")
        totals.append(f"{e}: {ok}/{len(by_case)} exported")
    both = [per for per in by_case.values()
            if all(per.get(e, {}).get("status") == "exported" for e in exporters)]
    if len(exporters) == 2 and both:
        ratios = [per[exporters[1]]["seconds"] / per[exporters[0]]["seconds"] for per in both]
        totals.append(f"median export-time ratio {exporters[1]}/{exporters[0]} over {len(both)} cases both "
                      f"export: {statistics.median(ratios):.2f}")
    mismatches = [(r["case"], r["exporter"]) for r in rows if "mismatch" in differential(r)]
    totals.append(f"mismatches against eager: {mismatches or 'none'}")
    table = "\n".join(lines) + "\n\n" + "\n".join(f"- {t}" for t in totals) + "\n"
    (out / "table.md").write_text(table)
    return table


_GROUPS = {"hand": "hand-written patterns", "hf": "transformers models"}
_COLUMNS = {"torch": "torch.export", "shapeproof": "shapeproof", "split": "shapeproof `split=True`"}


def machine() -> str:
    """The machine a run was on, as the README says it."""
    import platform

    import torch

    def proc(name: str) -> list[str]:
        path = Path("/proc") / name
        return path.read_text().splitlines() if path.exists() else []

    model = next((line.split(":", 1)[1].strip() for line in proc("cpuinfo") if line.startswith("model name")),
                 platform.processor())
    kib = next((int(line.split()[1]) for line in proc("meminfo") if line.startswith("MemTotal")), 0)
    return (f"{os.cpu_count()} cores ({model or 'unknown CPU'}), {round(kib / 2 ** 20)} GiB, "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def results_table(rows: list[dict], exporters: list[str], day: str, where: str) -> str:
    """The README's results table: cases each exporter exports, per group, and mismatches against eager."""
    by_case: dict[str, dict] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["exporter"]] = r
    head = ("| group | cases | " + " | ".join(_COLUMNS.get(e, e) for e in exporters)
            + " | mismatches vs eager |")
    lines = [f"Runs of **{day}**, on {where}.", "", head, "|---|---|" + "---|" * len(exporters) + "---|"]
    groups = sorted({per[e]["group"] for per in by_case.values() for e in per}, key=list(_GROUPS).index)
    for group in [*groups, None]:
        cases = [per for per in by_case.values()
                 if group is None or any(r.get("group") == group for r in per.values())]
        exported = [sum(per.get(e, {}).get("status") == "exported" for per in cases) for e in exporters]
        wrong = sum("mismatch" in differential(r) for per in cases for r in per.values())
        cells = [str(len(cases)), *map(str, exported), str(wrong)]
        if group is None:
            lines.append("| **all** | " + " | ".join(f"**{c}**" for c in cells) + " |")
        else:
            lines.append(f"| {_GROUPS.get(group, group)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", type=Path, default=DEFAULT_REGISTRY)
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--exporter", help=argparse.SUPPRESS)
    parser.add_argument("--strategy", default="cascade")
    parser.add_argument("--cases", default="")
    parser.add_argument("--group", default="")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--executor", choices=EXECUTORS, default="local",
                        help="local: a pool of subprocesses; ray: the same subprocesses as Ray tasks")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "cases")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", type=Path, help="write each export's query log (JSONL) here")
    args = parser.parse_args(argv)

    if args.one:
        print(json.dumps(run_case(args.one, args.registry, args.exporter, args.strategy, args.log_dir),
                         default=str))
        return 0
    cases = load_registry(args.registry)
    names = select(cases, args.cases, args.group)
    exporters = args.exporters.split(",")
    rows = run_jobs(_one, [(n, e, args) for n in names for e in exporters], executor=args.executor,
                    workers=args.jobs, describe=lambda r: f"{r['case']} {r['exporter']}: {r['status']} "
                                                          f"{r.get('seconds', 0):.1f}s {differential(r)}")
    print(write_outputs(rows, args.out, exporters))
    readme = results_table(rows, exporters, time.strftime("%Y-%m-%d"), machine())
    (args.out / "readme_table.md").write_text(readme)
    print(readme)
    return 1 if any("mismatch" in differential(r) for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
