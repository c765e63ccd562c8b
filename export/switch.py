"""``shapeproof.engine(...)``: code that calls ``torch.export`` itself exports with shapeproof's engine.

    with shapeproof.engine(strategy="cascade"):
        onnx_program = torch.onnx.export(model, (x,), dynamic_shapes=spec, dynamo=True)

Inside the block ``torch.export.export`` and ``torch.export.draft_export`` are
shapeproof's ``export``: same arguments, torch's ``ExportedProgram`` back, and
shapeproof's ``ExportError`` (counterexample, source line, verified fixes)
when a guard fails.  Exporters built on torch.export (``torch.onnx.export(...,
dynamo=True)``, transformers' and ExecuTorch's helpers) look both names up on
the ``torch.export`` module when they call them, which is the attribute the
block replaces; code that bound ``from torch.export import export`` before
the block keeps torch's function.  Leaving the block puts back exactly the
functions that were there (so blocks nest).

shapeproof itself traces through ``torch.export.export``; a call made while a
shapeproof export is running goes to the function the block replaced, so the
engine never recurses into itself.  The replacement is process-wide while the
block runs (module attributes are global): another thread calling
``torch.export.export`` meanwhile also gets shapeproof.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import Any

import torch
from shapeproof.tracer.torch_internals import DRAFT_EXPORT_REPORT_ATTRIBUTE, DraftExportReport

from .api import export as shapeproof_export
from .settings import ExportSettings

__all__ = ["engine"]

# True while a shapeproof export runs in this context: its own calls to torch.export go to torch.
_exporting = contextvars.ContextVar("shapeproof_exporting", default=False)


@contextlib.contextmanager
def engine(strategy: str = "cascade", split: bool = False, max_regions: int = 8,
           time_budget: float | None = None, progress: bool = False, workers: int | None = None,
           executor: str = "fork", cond_branches: bool = True) -> Iterator[None]:
    """Within the block, ``torch.export.export``/``draft_export`` export with shapeproof's engine.

    ``strategy``, ``split``, ``max_regions``, ``time_budget``, ``progress``,
    ``workers``, ``executor`` and ``cond_branches`` are ``shapeproof.export``'s,
    applied to every export the block runs (the budget bounds each export's
    region search, not the block).
    ``strict=True`` is traced non-strict (with a warning), as in
    ``shapeproof.export``.  With ``split=True`` a model that needs several
    programs comes back as a ``SplitProgram``, which only callers that accept
    one can use (``torch.onnx`` cannot).  ``draft_export`` does not go on past
    a failing guard as torch's does: it raises ``ExportError``; the program it
    returns carries an empty draft-export report (nothing was assumed).
    """
    options: dict[str, Any] = dict(strategy=strategy, split=split, max_regions=max_regions,
                                   time_budget=time_budget, progress=progress, workers=workers,
                                   executor=executor, cond_branches=cond_branches)
    ExportSettings(**options)                   # checked once here, before the block's first export
    saved = {name: getattr(torch.export, name) for name in ("export", "draft_export")}

    def run(name: str, mod, args, kwargs, **export_kwargs) -> Any:
        if _exporting.get():                      # shapeproof's own trace: torch's function
            return saved[name](mod, args, kwargs, **export_kwargs)
        token = _exporting.set(True)
        try:
            return shapeproof_export(mod, args, kwargs, **export_kwargs, **options)
        finally:
            _exporting.reset(token)

    @functools.wraps(saved["export"])
    def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict=False,
               preserve_module_call_signature=(), prefer_deferred_runtime_asserts_over_guards=False):
        return run("export", mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                   preserve_module_call_signature=preserve_module_call_signature,
                   prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards)

    @functools.wraps(saved["draft_export"])
    def draft_export(mod, args, kwargs=None, *, dynamic_shapes=None, preserve_module_call_signature=(),
                     strict=False, prefer_deferred_runtime_asserts_over_guards=False):
        program = run("draft_export", mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                      preserve_module_call_signature=preserve_module_call_signature,
                      prefer_deferred_runtime_asserts_over_guards=prefer_deferred_runtime_asserts_over_guards)
        if not _exporting.get() and isinstance(program, torch.export.ExportedProgram):
            # callers of draft_export read its report (torch.onnx: ep._report.successful())
            setattr(program, DRAFT_EXPORT_REPORT_ATTRIBUTE, DraftExportReport(
                failures=[], str_to_filename={}, expressions_created={}, op_profiles={}))
        return program

    torch.export.export, torch.export.draft_export = export, draft_export
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(torch.export, name, function)
