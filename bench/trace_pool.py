"""Region searches with traces side by side (``export/search/trace_pool.py``) against one trace at a time.

    python -m bench.trace_pool [--models mobilevit,vit] [--specs named] [--split both|yes|no]
                               [--workers 1,2] [--executor fork|ray] [--out DIR]

Each model of ``branch_models.py`` is built once (small config, random weights) and exported by
shapeproof with each ``workers`` count in turn, in this one process, each export on a fresh deep copy
after one warm-up export.  A row: exported or not, seconds, the traces made (``torch.export.export``
calls here plus those started in children or Ray tasks), the traces the search read
(``regions.traces``, from a child or not), the programs found, and for a program how many of the
model's sweep sizes it accepts and matches eager at.  Searches that stop at the second program (no
``split``) show what speculation costs; ``split=True`` searches, which trace every program's region,
show what it gains.
"""
from __future__ import annotations

import argparse
import copy
import gc
import time
import warnings
from pathlib import Path

import torch

from .branch_idioms import counting_traces, references, sweep_program
from .branch_models import all_models

HEADER = ["| model | spec | split | workers | exported | s | traces made | read (from children) | programs "
          "| accepted | matched |", "|---|---|---|---|---|---|---|---|---|---|---|"]


def _export(model, args, spec, split: bool, workers: int, executor: str):
    import shapeproof
    from shapeproof.export.search.regions import LocalTrace
    from shapeproof.export.search.trace_pool import started_elsewhere

    gc.collect()
    elsewhere = started_elsewhere()
    with warnings.catch_warnings(), counting_traces() as calls:
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        try:
            result = shapeproof.export_with_report(model, args, dynamic_shapes=spec, split=split,
                                                   workers=workers, executor=executor)
            status, program, search = "yes", result.program, result.regions
        except Exception as exc:            # a failing export is a row too
            status, program, search = f"no ({type(exc).__name__})", None, None
        seconds = time.perf_counter() - start
    made = calls[0] + started_elsewhere() - elsewhere
    read = "-" if search is None else (f"{len(search.traces)} "
                                       f"({sum(not isinstance(t, LocalTrace) for t in search.traces)})")
    programs = "-" if search is None else str(len(search.regions))
    return program, status, seconds, made, read, programs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilevit,vit,pegasus_x")
    parser.add_argument("--specs", default="named")
    parser.add_argument("--split", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--executor", choices=("fork", "ray"), default="fork")
    parser.add_argument("--out", type=Path, help="directory for trace_pool.md")
    args = parser.parse_args(argv)
    known = {m.name: m for m in all_models()}
    unknown = set(args.models.split(",")) - set(known)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {sorted(known)}")
    splits = {"both": (False, True), "yes": (True,), "no": (False,)}[args.split]
    lines = list(HEADER)
    print("\n".join(HEADER), flush=True)
    for name in args.models.split(","):
        m = known[name]
        pristine = m.build()
        with torch.no_grad():
            for point in m.warm:
                pristine(*m.inputs(point))
        expected = references(m, pristine)
        example = m.inputs(m.example)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.export.export(copy.deepcopy(pristine), example, strict=False)   # warm the shared caches
        for style in args.specs.split(","):
            for split in splits:
                for workers in (int(w) for w in args.workers.split(",")):
                    program, status, seconds, made, read, programs = _export(
                        copy.deepcopy(pristine), example, m.spec(style), split, workers, args.executor)
                    accepted = matched = "-"
                    if program is not None:
                        a, b, _ = sweep_program(m, program, expected)
                        accepted, matched = str(a), str(b)
                    line = (f"| {name} | {style} | {'yes' if split else 'no'} | {workers} | {status} "
                            f"| {seconds:.1f} | {made} | {read} | {programs} | {accepted} | {matched} |")
                    lines.append(line)
                    print(line, flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "trace_pool.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
