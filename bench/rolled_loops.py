"""Issue 42: a Python loop over the sequence rolled into one scan, beside a static export of the longest.

    python -m bench.rolled_loops [--models scan,mamba] [--max 512] [--out DIR]

For each model of ``loop_models.py``, side by side:

* ``shapeproof.export`` over ``S in [1, max]`` (example length 24): seconds, traces (calls of
  ``torch.export.export``), the program's ``scan`` nodes and nodes (the body's graphs included),
  and how many of the lengths 1, 2, 24, max/5, max (both ends and three between) match eager;
* ``torch.export`` over the same range: it unrolls the loop at the example's length, so it fails
  (or specializes the length);
* a static ``torch.export`` at ``S = max``: the loop unrolled ``max`` times, seconds and nodes.

Before the clocks, one static ``torch.export`` at a short length warms the caches all three share;
each export gets a fresh deep copy of the built model.
"""
from __future__ import annotations

import argparse
import copy
import gc
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from .branch_idioms import counting_traces, failure_note
from .loop_models import LoopModel, all_models, loop_line

EXAMPLE = 24
RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Row:
    model: str
    idiom: str
    loop: str                        # file:line of the loop in the installed source
    rolled_s: float | None           # shapeproof.export over [1, max]
    rolled_traces: int
    scans: int | None
    rolled_nodes: int | None
    matched: str                     # "5/5" at the lengths checked
    torch_dynamic: str               # torch.export over [1, max]: what it says
    torch_dynamic_s: float
    static_s: float | None           # torch.export at S = max, static
    static_nodes: int | None


def _nodes(program) -> int:
    graphs = [m.graph for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]
    return sum(len(g.nodes) for g in graphs)


def _scans(program) -> int:
    return sum(1 for n in program.graph.nodes if n.op == "call_function" and "scan" in str(n.target))


def _timed(export) -> tuple:
    gc.collect()
    with warnings.catch_warnings(), counting_traces() as calls:
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        try:
            return export(), time.perf_counter() - start, calls[0], None
        except Exception as exc:  # a failing export is a row too
            return None, time.perf_counter() - start, calls[0], exc


def _says(exc: BaseException) -> str:
    """torch's failure in a few words: the constant it specialized the length to, else its first lines."""
    found = re.search(r"You marked (\w+) as dynamic but your code specialized it to be a constant \((\d+)\)",
                      str(exc))
    return f"{found.group(1)} specialized to {found.group(2)}" if found else failure_note(exc)


def run_model(m: LoopModel, longest: int = 512, echo=None) -> Row:
    import shapeproof

    pristine = m.build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.export.export(copy.deepcopy(pristine), m.inputs(4), strict=False)     # warm the shared caches
    args, spec = m.inputs(EXAMPLE), m.spec(1, longest)
    rolled, rolled_s, traces, failure = _timed(
        lambda: shapeproof.export(copy.deepcopy(pristine), args, dynamic_shapes=spec))
    lengths = (1, 2, EXAMPLE, longest // 5, longest)
    matched = "-"
    if rolled is not None:
        module, hits = rolled.module(), 0
        for s in lengths:
            inputs = m.inputs(s)
            with torch.no_grad():
                want, got = pristine(*inputs), module(*inputs)
            hits += got.shape == want.shape and torch.allclose(got, want, rtol=RTOL, atol=ATOL)
        matched = f"{hits}/{len(lengths)}"
    _, torch_s, _, torch_failure = _timed(
        lambda: torch.export.export(copy.deepcopy(pristine), args, dynamic_shapes=spec, strict=False))
    said = "exported" if torch_failure is None else f"{type(torch_failure).__name__}: {_says(torch_failure)}"
    static, static_s, _, static_failure = _timed(
        lambda: torch.export.export(copy.deepcopy(pristine), m.inputs(longest), strict=False))
    file, line = loop_line(m)
    row = Row(m.name, m.idiom, f"{Path(file).name}:{line}",
              None if rolled is None else round(rolled_s, 1), traces,
              None if rolled is None else _scans(rolled), None if rolled is None else _nodes(rolled),
              matched if failure is None else f"failed: {failure_note(failure)[:80]}", said[:120],
              round(torch_s, 1), None if static is None else round(static_s, 1),
              None if static is None else _nodes(static))
    if static_failure is not None:
        row.static_s = None
    if echo:
        echo(row)
    return row


def markdown(rows: list[Row], longest: int) -> list[str]:
    lines = [f"| model | loop | shapeproof, S in [1, {longest}]: s | traces | scans | nodes | matches eager "
             f"| torch.export, S in [1, {longest}] | static torch.export, S = {longest}: s | nodes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.model} ({r.idiom}) | {r.loop} | {r.rolled_s if r.rolled_s is not None else '-'} "
                     f"| {r.rolled_traces} | {r.scans if r.scans is not None else '-'} "
                     f"| {r.rolled_nodes if r.rolled_nodes is not None else '-'} | {r.matched} "
                     f"| {r.torch_dynamic.replace('|', '/')} ({r.torch_dynamic_s} s) "
                     f"| {r.static_s if r.static_s is not None else 'failed'} "
                     f"| {r.static_nodes if r.static_nodes is not None else '-'} |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--max", type=int, default=512, help="the longest length (default 512)")
    parser.add_argument("--out", type=Path, default=None, help="write the table to DIR/rolled_loops.md")
    args = parser.parse_args(argv)
    wanted = [n for n in args.models.split(",") if n]
    models = [m for m in all_models() if not wanted or m.name in wanted]
    rows = [run_model(m, args.max, echo=lambda r: print(r, flush=True)) for m in models]
    table = markdown(rows, args.max)
    print("\n".join(table))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rolled_loops.md").write_text(
            f"# bench.rolled_loops (torch {torch.__version__})\n\n" + "\n".join(table) + "\n")


if __name__ == "__main__":
    main()
