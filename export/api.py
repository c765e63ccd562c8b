"""``shapeproof.export``: torch.export's call, with shapeproof's engine deciding every shape question."""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.export import ExportedProgram

from shapeproof.shapes import GuardReport, ShapeEnv
from shapeproof.shapes.records import Query
from shapeproof.solver.api import DEFAULT_TIMEOUT
from shapeproof.tracer.engine_env import TorchDataDependentError, engine_tracing

from .errors import ExportError
from .specs import apply_fixes, dim_specs, normalize_spec

__all__ = ["export", "export_with_report", "ExportResult", "suggest_dynamic_shapes"]


@dataclass
class ExportResult:
    """An exported program plus what the engine did to get it."""

    program: ExportedProgram
    engine: ShapeEnv
    report: GuardReport
    seconds: float

    @property
    def discharged(self) -> list[Query]:
        """Questions the engine settled by proof (each one a guard torch would otherwise have recorded)."""
        return [q for q in self.engine.queries if q.status == "proven"]


def _data_dependent_cause(exc: BaseException | None) -> TorchDataDependentError | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TorchDataDependentError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def export_with_report(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None,
                       strategy="cascade", timeout: float = DEFAULT_TIMEOUT) -> ExportResult:
    """Like ``export``, returning the ``ExportResult`` (program, engine, guard report, time)."""
    spec = normalize_spec(dynamic_shapes, model, args, kwargs)
    engine = ShapeEnv(strategy=strategy, timeout=timeout)
    context, _ = engine_tracing(engine, dim_specs(spec))
    start = time.perf_counter()
    program, failure = None, None
    with context:
        try:
            program = torch.export.export(model, args, kwargs, dynamic_shapes=spec, strict=False)
        except Exception as exc:  # decided below: a shape violation becomes ExportError, anything else re-raises
            failure = exc
    data_dependent = _data_dependent_cause(failure)
    if data_dependent is not None:
        raise data_dependent.with_traceback(None) from None
    report = engine.produce_guards()
    if not report.ok:
        raise ExportError(report, [engine.explain(v) for v in report.violations], engine.notes, failure) from failure
    if failure is not None:
        raise failure
    return ExportResult(program, engine, report, time.perf_counter() - start)


def export(model: torch.nn.Module, args: tuple, kwargs: dict | None = None, *, dynamic_shapes=None,
           strategy="cascade") -> ExportedProgram:
    """Export ``model`` like ``torch.export.export(..., strict=False)``, proving shape guards with shapeproof.

    Returns torch's own ``ExportedProgram`` (save/load, ``.module()`` and
    ``run_decompositions`` work as usual).  Raises ``ExportError`` when a guard
    the traced program needs fails for some input in the declared ranges; its
    message leads with the input dim, the source line, a counterexample and
    fixes, and ``suggest_dynamic_shapes`` applies them.
    """
    return export_with_report(model, args, kwargs, dynamic_shapes=dynamic_shapes, strategy=strategy).program


def suggest_dynamic_shapes(error: ExportError, dynamic_shapes):
    """``dynamic_shapes`` with the best verified fix of every violation in ``error`` applied.

    Uses the report's combined fix (one per dim, verified to satisfy every
    violated guard at once) when there is one; otherwise the best fix of each
    violation (the one keeping the most of the declared range), intersected
    per dim.
    """
    if error.report.combined_fixes is not None:
        return apply_fixes(dynamic_shapes, error.report.combined_fixes)
    fixes = [next(f for f in ex.fixes if f.kind != "rewrite") for ex in error.violations
             if any(f.kind != "rewrite" for f in ex.fixes)]
    return apply_fixes(dynamic_shapes, fixes)
