"""``write_report``: an export, or a failed one, as a self-contained HTML page.

A failed export is the case that needs a page most (it is read later, in a CI
artifact or a bug report), so both outcomes go through the same call and the
same renderer, ``shapeproof.shapes.apps.html_report``; this module only gathers
what torch-side objects know (the program summary, torch's own error).
"""
from __future__ import annotations

from pathlib import Path

from shapeproof.shapes.apps import render_html

from .api import ExportResult
from .errors import ExportError
from .summary import program_summary

__all__ = ["write_report"]


def write_report(outcome: ExportResult | ExportError, path, title: str | None = None) -> Path:
    """Write the HTML report of ``outcome`` to ``path`` (parent folders created); returns the path."""
    if isinstance(outcome, ExportResult):
        engine, exported, failure = outcome.engine, True, None
        program, notes = _program_text(outcome.program), engine.notes + outcome.warnings
    elif isinstance(outcome, ExportError):
        if outcome.engine is None:
            raise ValueError("this ExportError carries no engine (it was not raised by shapeproof.export)")
        engine, exported, program, notes = outcome.engine, False, None, outcome.notes
        failure = f"{type(outcome.cause).__name__}: {outcome.cause}" if outcome.cause is not None else None
    else:
        raise TypeError(f"write_report takes an ExportResult or an ExportError, not {type(outcome).__name__}")
    model = outcome.model_name
    page = render_html(engine, outcome.report, title=title or f"{model or 'model'}: shapeproof export report",
                       model=model, exported=exported, seconds=outcome.seconds, program=program,
                       failure=failure, notes=notes)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def _program_text(program) -> str:
    """``program_summary`` of the program, or of each member of a split program with its region."""
    members = getattr(program, "programs", None)
    if members is None:
        return program_summary(program)
    return "\n\n".join(f"region {i}: {predicate}\n{program_summary(member)}"
                        for i, (member, predicate) in enumerate(zip(members, program.predicates)))
