"""Issue 39's size branches on real library models: torch.export and shapeproof.export side by side.

    python -m bench.branch_idioms [--models focalnet,vit | --all] [--exporters torch,shapeproof]
                                  [--specs named,auto] [--out DIR] [--branches] [--workers N]

Each model of ``branch_models.py`` (transformers, and timm where it imports) is built from a small
config with random weights, then exported with both exporters in this one process, under two spec
styles: ``named`` (a ``Dim`` per root over the declared range, derived dims as ``k * Dim``) and
``auto`` (``Dim.AUTO`` on every one of those dims).  A row: exported or not, seconds, the traces the
exporter made (calls of ``torch.export.export`` during the export: shapeproof traces through it, so
its region search and narrowing are counted exactly), and, for a program, how many sizes of the
model's sweep it accepts and how many of those match eager (``torch.allclose``, tight tolerance).
The sweep (8-12 sizes) holds both ends of every range and sizes on each side of every branch; eager
runs at every one of them first (``eager ok`` counts them), which checks the declared ranges.

Fairness: before the clock, one static ``torch.export`` of the model warms the caches both exporters
share (dispatch, fake tensors, sympy), so neither is favoured by going second; every export and
every eager reference gets a fresh deep copy of the built model, since some of these models write to
themselves as they run (Swin clamps its window, Wav2Vec2-BERT caches its rotary table).
Swin, Swinv2, MobileViT and PVTv2 take minutes per export (on a loaded 2-core
machine torch.export fails on a 3-stage Swin's named spec after 90-140 s; shapeproof's Dim.AUTO export
of MobileViT took 311 s): they run when named or with ``--all``.  The default set takes about 8 minutes
there, half of it shapeproof's failing region search on SegFormer's named spec (24 traces).
``--branches`` prints each model's branches as the installed library writes them (file, line, body).
"""
from __future__ import annotations

import argparse
import copy
import csv
import gc
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .branch_models import IdiomModel, all_models, branch_sites

EXPORTERS = ("torch", "shapeproof")
SPECS = ("named", "auto")
RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Row:
    model: str
    idiom: str
    spec: str
    exporter: str
    status: str                      # "exported", or the exception's type
    seconds: float
    traces: int                      # torch.export.export calls the export made
    sweep: int                       # sizes of the sweep eager runs at
    accepted: int | None = None      # of those, sizes the program runs at (None: no program)
    matched: int | None = None       # of those, sizes whose output matches eager
    missed: str = ""                 # sweep sizes rejected ("x") or not matching eager ("!=")
    note: str = ""


@contextmanager
def counting_traces():
    """Counts ``torch.export.export`` calls inside the block: ``with counting_traces() as calls: ...``."""
    calls = [0]
    original = torch.export.export

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    torch.export.export = counted
    try:
        yield calls
    finally:
        torch.export.export = original


def _first_line(text: str) -> str:
    return next((s.strip() for s in text.splitlines() if s.strip()), "")


def failure_note(exc: BaseException) -> str:
    """What a failed export says in one line: shapeproof's verified narrower range where it found one,
    torch's first guard ("- Not all values of ...") after its headline, else the first line."""
    narrowing = getattr(exc, "narrowing", None)
    if narrowing is not None:
        return "narrower: " + "; ".join(f.description for f in narrowing.fixes)
    lines = [s.strip() for s in str(exc).splitlines() if s.strip()]
    guard = next((s for s in lines[1:] if s.startswith("- ")), None)
    return (lines[0] if lines else "") + (f" {guard}" if guard else "")


def _cut(text: str, width: int = 150) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _export(exporter: str, model, args, spec, workers: int | None = None) -> tuple:
    """(program or None, status, seconds, traces, note) of one export; shapeproof's traces side by side
    (``workers``) count too."""
    import shapeproof
    from shapeproof.export.search.trace_pool import started_elsewhere

    gc.collect()                    # a pending full collection would land in this export's time
    elsewhere = started_elsewhere()
    with warnings.catch_warnings(), counting_traces() as calls:
        warnings.simplefilter("ignore")       # the libraries' own; shapeproof's are in result.warnings
        start = time.perf_counter()
        try:
            if exporter == "torch":
                program = torch.export.export(model, args, dynamic_shapes=spec, strict=False)
                notes = []
            else:
                result = shapeproof.export_with_report(model, args, dynamic_shapes=spec, workers=workers)
                program, notes = result.program, list(result.warnings)
            seconds = time.perf_counter() - start
        except Exception as exc:    # a failing export is a row too
            traces = calls[0] + started_elsewhere() - elsewhere
            return None, type(exc).__name__, time.perf_counter() - start, traces, failure_note(exc)
    traces = calls[0] + started_elsewhere() - elsewhere
    return program, "exported", seconds, traces, _first_line(notes[0]) if notes else ""


def references(m: IdiomModel, pristine) -> list:
    """Eager output at every sweep point, each on a fresh copy (None where eager fails: a bad range)."""
    outs = []
    for point in m.sweep:
        try:
            with torch.no_grad():
                outs.append(copy.deepcopy(pristine)(*m.inputs(point)))
        except Exception:           # noqa: PERF203  reported as eager ok < sweep
            outs.append(None)
    return outs


def sweep_program(m: IdiomModel, program, expected: list) -> tuple[int, int, str]:
    """(sizes the program accepts, sizes whose output matches eager, the others) over the sweep eager
    runs at."""
    module = program.module()
    accepted = matched = 0
    missed = []
    for point, want in zip(m.sweep, expected):
        if want is None:
            continue
        at = ",".join(str(v) for v in point.values())
        try:
            with torch.no_grad():
                got = module(*m.inputs(point))
        except Exception:           # noqa: PERF203  an input check rejected the size (or the graph failed)
            missed.append(f"x{at}")
            continue
        accepted += 1
        if got.shape == want.shape and torch.allclose(got, want, rtol=RTOL, atol=ATOL):
            matched += 1
        else:
            missed.append(f"!={at}")
    return accepted, matched, " ".join(missed)


def run_model(m: IdiomModel, exporters=EXPORTERS, specs=SPECS, echo=None, workers=None) -> list[Row]:
    pristine = m.build()
    with torch.no_grad():
        for point in m.warm:
            pristine(*m.inputs(point))
    expected = references(m, pristine)
    runs = sum(e is not None for e in expected)
    args = m.inputs(m.example)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.export(copy.deepcopy(pristine), args, strict=False)      # warm the shared caches
    rows = []
    for style in specs:
        for exporter in exporters:
            program, status, seconds, traces, note = _export(exporter, copy.deepcopy(pristine), args,
                                                             m.spec(style), workers)
            row = Row(m.name, m.idiom, style, exporter, status, round(seconds, 2), traces, runs, note=note)
            if program is not None:
                row.accepted, row.matched, row.missed = sweep_program(m, program, expected)
            rows.append(row)
            if echo:
                echo(row)
    return rows


def markdown(rows: list[Row]) -> list[str]:
    lines = ["| model | idiom | spec | exporter | exported | s | traces | eager ok | accepted | matched "
             "| missed | note |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        got = "yes" if r.status == "exported" else f"no ({r.status})"
        acc = "-" if r.accepted is None else r.accepted
        mat = "-" if r.matched is None else r.matched
        note = _cut(r.note).replace("|", "\\|")
        lines.append(f"| {r.model} | {r.idiom} | {r.spec} | {r.exporter} | {got} | {r.seconds:.1f} "
                     f"| {r.traces} | {r.sweep} | {acc} | {mat} | {r.missed} | {note} |")
    return lines


def describe(m: IdiomModel) -> list[str]:
    """The model's declared ranges, sweep and branches as the installed library writes them."""
    dims = ", ".join(f"{r} in [{lo}, {hi}]" for r, (lo, hi) in m.ranges.items())
    sizes = ", ".join(f"arg{s.arg}.dim{s.dim} = {s.mult}*{s.root}" if s.mult > 1 else
                      f"arg{s.arg}.dim{s.dim} = {s.root}" for s in m.sizes)
    out = [f"## {m.name}: {m.model_class} (idiom {m.idiom})", f"ranges: {dims}; {sizes}; example {m.example}"]
    if m.note:
        out.append(f"note: {m.note}")
    out.append("sweep: " + "; ".join(",".join(f"{k}={v}" for k, v in p.items()) for p in m.sweep))
    for path, line, body in branch_sites(m):
        out.append(f"{path}:{line}")
        out += [f"    {b}" for b in body]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: all but the heavy ones)")
    parser.add_argument("--all", action="store_true", help="every model, the heavy ones (Swin) included")
    parser.add_argument("--exporters", default=",".join(EXPORTERS))
    parser.add_argument("--specs", default=",".join(SPECS))
    parser.add_argument("--out", help="directory for branch_idioms.md and branch_idioms.csv")
    parser.add_argument("--branches", action="store_true", help="print the models' branches and exit")
    parser.add_argument("--workers", type=int,
                        help="shapeproof's traces side by side (default: one per core)")
    args = parser.parse_args(argv)
    models = all_models()
    if args.models:
        wanted = args.models.split(",")
        unknown = set(wanted) - {m.name for m in models}
        if unknown:
            parser.error(f"unknown models {sorted(unknown)}; known: {[m.name for m in models]}")
        models = [m for m in models if m.name in wanted]
    elif not args.all and not args.branches:
        models = [m for m in models if not m.heavy]
    if args.branches:
        for m in models:
            print("\n".join(describe(m)) + "\n")
        return 0
    header = markdown([])
    print("\n".join(header), flush=True)
    rows: list[Row] = []
    for m in models:
        rows += run_model(m, args.exporters.split(","), args.specs.split(","),
                          echo=lambda r: print(markdown([r])[-1], flush=True), workers=args.workers)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "branch_idioms.md").write_text("\n".join(markdown(rows)) + "\n")
        with open(out / "branch_idioms.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])) if rows else ["model"])
            writer.writeheader()
            writer.writerows(asdict(r) for r in rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
