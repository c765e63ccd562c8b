"""``ExportError``: why an export failed, leading with what the user controls."""
from __future__ import annotations

from shapeproof.shapes import DimKind, Explanation, Fix, FixKind, GuardReport, ShapeEnv, specialization_lines
from shapeproof.tracer.torch_internals import UserError, UserErrorType

from .specs import suggested_fixes

__all__ = ["ExportError"]

_MAX_LISTED = 8


class ExportError(UserError):
    """Some guard the traced program needs does not hold over the declared ranges.

    A ``torch._dynamo.exc.UserError`` of type ``CONSTRAINT_VIOLATION``, what
    torch.export raises there, so a caller's ``except UserError`` (written for
    torch.export) still catches it.

    ``violations`` holds one structured ``Explanation`` per failing guard (input
    dims, source line, counterexample, fixes); ``report`` is the full
    ``GuardReport``.  ``shapeproof.suggest_dynamic_shapes(error, spec)`` applies
    the fixes.  ``engine`` (the ``ShapeEnv`` of the trace), ``seconds`` and
    ``model_name`` let ``shapeproof.export.html.write_report`` draw the failure.
    ``regions`` are the ``Region``s a region search found before it stopped
    (each with its whole predicate and the traces behind it).  ``narrowing``,
    when set, is the widest verified restriction of the ranges that one
    program serves (``narrow.Narrowing``).  ``spec`` is the ``dynamic_shapes``
    the export was given: the message ends, like torch.export's, with
    "Suggested fixes:" in torch's syntax, so ``refine_dynamic_shapes_from_suggested_fixes``
    (torch's helper for this error) works on it too.
    """

    def __init__(self, report: GuardReport, violations: list[Explanation], notes: list[str],
                 cause: BaseException | None = None, *, engine: ShapeEnv | None = None,
                 seconds: float | None = None, model_name: str = "", regions: list | None = None,
                 narrowing=None, input_names: tuple[str, ...] = (), spec=None):
        self.report = report
        self.input_names = input_names      # the model's inputs in call order, to place fixes in a spec
        self.violations = violations
        self.notes = notes
        self.cause = cause
        self.engine = engine
        self.seconds = seconds
        self.model_name = model_name
        self.regions = regions or []
        self.narrowing = narrowing
        self.spec = spec
        super().__init__(UserErrorType.CONSTRAINT_VIOLATION, self._message())

    @property
    def fixes(self) -> list[Fix]:
        """The verified fixes ``shapeproof.suggest_dynamic_shapes`` applies.

        The widest verified restriction (``narrowing``) when there is one, else
        the report's combined fix (one per dim, verified to satisfy every
        violated guard at once), else the best fix of each violation (the one
        keeping the most of the declared range); a named Dim torch specializes
        to its 0/1 example becomes that size, as torch suggests.
        """
        static = [Fix(FixKind.STATIC, s.dim_name, f"{s.dim_name} = {s.size}", value=s.size)
                  for s in self.report.specialized if s.dim_name is not None]
        if self.narrowing is not None:
            return static + self.narrowing.fixes
        if self.report.combined_fixes is not None:
            return static + self.report.combined_fixes
        return static + [next(f for f in ex.fixes if f.kind != "rewrite") for ex in self.violations
                         if any(f.kind != "rewrite" for f in ex.fixes)]

    def _message(self) -> str:
        specialized = specialization_lines(self.report.specialized)
        n = len(self.violations) + len(specialized)
        lines = [f"shapeproof could not export: {n} requirement(s) of the traced program do not hold for "
                 "every input in the declared ranges."]
        lines += [f"\n- {line}." for line in specialized]
        for ex in self.violations[:_MAX_LISTED]:
            dims = ", ".join(f"{d.path} = {d.name}" if d.name != d.path else d.path
                             for d in ex.dims) or "inputs"
            lines.append(f"\n- {dims}: the program needs {ex.condition}")
            if ex.where and ex.where.get("file"):
                lines.append(f"    from {ex.where['file']}:{ex.where['line']}: {ex.where['code']}"
                             + (f"  [{ex.where['op']}]" if ex.where.get("op") else ""))
            elif ex.where and ex.where.get("op"):
                lines.append(f"    from {ex.where['op']}")
            if ex.counterexample:
                point = ", ".join(f"{k} = {v}" for k, v in ex.counterexample.items())
                lines.append(f"    fails at {point}: " + "; ".join(
                    f"{e} {'is' if v in ('True', 'False') else '='} {v}" for e, v in ex.steps[-3:]))
            if ex.dims and all(d.kind is DimKind.DYNAMIC for d in ex.dims):
                lines.append(f"    {dims} declared Dim.DYNAMIC, which export may not fix to one size "
                             "(torch.export fails here too); Dim.AUTO lets export make it static")
            for fix in ex.fixes[:3]:
                kept = f" (keeps {fix.share_kept} of the range)" if fix.kept is not None else ""
                lines.append(f"    fix: {fix.description}{kept}")
        if len(self.violations) > _MAX_LISTED:
            lines.append(f"\n... and {len(self.violations) - _MAX_LISTED} more (see error.violations)")
        combined = self.report.combined_fixes
        if combined:
            lines.append("\nTogether, verified to satisfy all of the above: "
                         + "; ".join(f.description for f in combined))
        if self.narrowing is not None:
            lines.append(f"\nWider: {self.narrowing.describe()}")
        applied = ("that wider restriction" if self.narrowing is not None
                   else "that combined fix" if combined else "the best fix of each")
        ready = ("; error.narrowing.program is that program already, checking its inputs against it"
                 if self.narrowing is not None and self.narrowing.program is not None else "")
        lines.append(f"\nshapeproof.suggest_dynamic_shapes(error, dynamic_shapes) applies {applied}{ready}.")
        lines += [f"note: {note}" for note in self.notes]
        # last, as torch ends its message: refine_dynamic_shapes_from_suggested_fixes reads every line after
        suggested = suggested_fixes(self.spec, self.fixes)
        if suggested:
            lines += ["Suggested fixes:"] + [f"  {line}" for line in suggested]
        return "\n".join(lines)
