"""The main job: export the bundled audio encoder and explain its guards.

    python -m shapeproof.export.demo [--out audio_encoder.pt2] [--skip-torch]

Tries torch.export 2.13 first (it fails on this model), then exports with
shapeproof, prints the program summary and every guard the engine discharged
(where it came from, what it says, which strategy proved it and how fast),
checks the program against eager PyTorch at the corners of the declared ranges,
saves and reloads the ``.pt2``, and writes an HTML report of the export.
"""
from __future__ import annotations

import argparse
import time
import warnings
from collections import Counter
from pathlib import Path

import torch

from .api import export_with_report
from .examples import example
from .html import write_report
from .summary import discharged_table, program_summary


def _try_torch(model, args, spec) -> str:
    start = time.perf_counter()
    try:
        torch.export.export(model, args, dynamic_shapes=spec, strict=False)
        return f"exported in {time.perf_counter() - start:.1f} s"
    except Exception as exc:  # any failure is the finding we report
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"FAILED after {time.perf_counter() - start:.1f} s: {type(exc).__name__}: {first[:160]}"


def _differential(program, model, corners) -> list[str]:
    lines = []
    module = program.module()
    with torch.no_grad():
        for b, t in corners:
            x = torch.randn(b, t, 80)
            same = torch.allclose(module(x), model(x), rtol=1e-4, atol=1e-5)
            lines.append(f"  B={b:<2} T={t:<5} {'matches eager' if same else 'DIFFERS FROM EAGER'}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Export the bundled audio encoder and explain its guards.")
    parser.add_argument("--out", type=Path, default=Path("audio_encoder.pt2"))
    parser.add_argument("--report", type=Path, default=Path("audio_encoder_report.html"),
                        help="HTML report of the export (self-contained, opens offline)")
    parser.add_argument("--skip-torch", action="store_true", help="do not run torch.export for comparison")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)

    model, inputs, spec = example()
    print("Model: AudioEncoder (4x strided-conv subsampling, pad-to-multiple frame stacking, rel-pos "
          "attention)")
    print(f"Input: features {tuple(inputs[0].shape)}, dynamic_shapes: {spec}\n")
    if not args.skip_torch:
        print(f"torch.export.export(strict=False): {_try_torch(model, inputs, spec)}\n")

    result = export_with_report(model, inputs, dynamic_shapes=spec)
    program = result.program
    assert isinstance(program, torch.export.ExportedProgram), "exported without split: one program"
    print(f"shapeproof.export: exported in {result.seconds:.1f} s\n")
    print(program_summary(program))

    discharged = result.discharged
    by = Counter(q.strategy for q in discharged)
    print(f"\nGuards discharged by the engine (questions torch's own reasoning left open): {len(discharged)}")
    print("  by strategy: " + ", ".join(f"{name} {count}" for name, count in by.most_common()))
    print(discharged_table(result.engine, discharged))
    first = [q for q in result.engine.queries if q.asked_before_torch and q.status == "proven"]
    print(f"Questions on large terms the engine proved before torch's reasoning was asked: {len(first)}")
    kept = result.report.kept_guards
    print(f"\nGuards left for the program to check at run time: {len(kept)}")
    for guard in kept:
        assert guard.verdict is not None, "produce_guards judged every guard"
        print(f"  {result.engine.render(guard.condition)}  ({guard.verdict.status.value})")

    print("\nDifferential check against eager PyTorch at the corners of the declared ranges:")
    lines = _differential(program, model, [(1, 16), (8, 16), (1, 3000), (8, 3000), (3, 17), (2, 1001)])
    print("\n".join(lines))

    torch.export.save(program, args.out)
    reloaded = torch.export.load(args.out)
    x = torch.randn(2, 555, 80)
    same = torch.allclose(reloaded.module()(x), model(x), rtol=1e-4, atol=1e-5)
    print(f"\nSaved {args.out.resolve()} ({args.out.stat().st_size // 1024} KiB); reloaded program "
          f"{'matches' if same else 'DIFFERS FROM'} eager at T=555")
    print(f"HTML report: {write_report(result, args.report).resolve()}")
    return 0 if all("matches" in line for line in lines) and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
