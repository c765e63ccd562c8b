"""torch.export and shapeproof.export timed in one process, on one machine state, case by case.

    python -m bench.side_by_side --cases hf_swin,hf_swinv2 [--registry bench/corpus/cases.py]
                                 [--split] [--order torch,shapeproof] [--rounds 2]

``case_runner`` runs each exporter in its own subprocess, so a loaded machine
can favour either; here both run back to back in one interpreter, and the
ratio shapeproof / torch.export is what a row reports.  The first export of a
model pays for caches the second one reuses (measured on hf_swin: torch.export
49 s, then 18 s), so each case runs ``--rounds`` times: the first round
favours whichever exporter runs second, the later ones compare warm with warm.
Each export either returns a program or raises; both count.
"""
from __future__ import annotations

import argparse
import time
import warnings

from .case_runner import DEFAULT_REGISTRY, load_registry, select


def _timed(export) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        program = export()
        outcome = f"exported ({type(program).__name__})"
    except Exception as exc:  # the outcome is part of the measurement
        outcome = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:90]}"
    return time.perf_counter() - start, outcome


def run(cases, name: str, order: list[str], split: bool) -> dict:
    import shapeproof
    import torch

    row = {"case": name}
    for exporter in order:
        model, args, spec = cases[name].build()
        if exporter == "torch":
            row["torch"] = _timed(lambda: torch.export.export(model, args, dynamic_shapes=spec, strict=False))
        else:
            row["shapeproof"] = _timed(lambda: shapeproof.export(model, args, dynamic_shapes=spec,
                                                                 split=split))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default=DEFAULT_REGISTRY)
    parser.add_argument("--cases", required=True)
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--order", default="torch,shapeproof")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    cases = load_registry(args.registry)
    print("| case | round | torch.export | s | shapeproof" + (" split=True" if args.split else "")
          + " | s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in select(cases, args.cases, ""):
        for k in range(1, args.rounds + 1):
            row = run(cases, name, args.order.split(","), args.split)
            (t, t_out), (s, s_out) = row["torch"], row["shapeproof"]
            print(f"| {name} | {k} | {t_out} | {t:.1f} | {s_out} | {s:.1f} | {s / t:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
