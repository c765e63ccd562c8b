"""Why a guard failed, in structured form and as text.

The text leads with what the user controls: where the guard came from (file,
line, code, op), the input dims it depends on and their declared ranges, the
counterexample evaluated step by step, and verified fixes; engine names
(``s0``) and the solver strategy come last.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sympy import Expr, Symbol

from shapeproof import solver as S
from shapeproof.solver import Undefined, evaluate, term_str, truth

from .fixes import Fix
from .records import Guard, RuntimeAssert
from .report import Violation, lift
from .symbols import DimKind, span_str
from .view import EnvView

__all__ = ["Explanation", "DimInfo", "explain"]

_MAX_STEPS = 14


@dataclass(frozen=True)
class DimInfo:
    path: str                 # the input dim, e.g. "x.size(1)"
    name: str                 # the Dim name the user gave, or the path
    declared: tuple
    example: int | None
    kind: DimKind = DimKind.STRICT

    def __str__(self) -> str:
        named = f" = {self.name}" if self.name != self.path else ""
        example = f", example {self.example}" if self.example is not None else ""
        return f"{self.path}{named} in {span_str(self.declared)}{example}"


@dataclass
class Explanation:
    kind: str                               # "guard" or "runtime assert"
    index: int
    condition: str                          # in the user's names
    asked: str
    where: dict | None
    dims: list[DimInfo]
    status: str                             # proven / refuted / unknown / not checked
    decided_by: str | None
    counterexample: dict[str, int] | None
    steps: list[tuple[str, str]] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine_condition: str = ""

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "index": self.index, "condition": self.condition, "asked": self.asked,
            "where": self.where, "dims": [{**d.__dict__, "kind": d.kind.value} for d in self.dims],
            "status": self.status,
            "decided_by": self.decided_by, "counterexample": self.counterexample,
            "steps": [{"expression": e, "value": v} for e, v in self.steps],
            "fixes": [f.to_dict() for f in self.fixes], "notes": self.notes,
            "engine_condition": self.engine_condition,
        }

    @property
    def text(self) -> str:
        head = {
            "refuted": f"{self.kind.capitalize()} #{self.index} does not hold for every input in range:",
            "proven": f"{self.kind.capitalize()} #{self.index} holds for every input in range:",
            "unknown": f"{self.kind.capitalize()} #{self.index} could not be decided; it stays an input "
            "check:",
        }.get(self.status, f"{self.kind.capitalize()} #{self.index}:")
        lines = [head, f"  condition:  {self.condition}"]
        if self.where and self.where.get("file"):
            w = self.where
            op = f"  [{w['op']}]" if w.get("op") else ""
            lines.append(f"  where:      {w['file']}:{w['line']} in {w['function']}{op}")
            lines.append(f"              {w['code']}")
        elif self.where and self.where.get("op"):
            lines.append(f"  where:      {self.where['op']} (no user frame)")
        if self.dims:
            lines.append("  depends on: " + "; ".join(str(d) for d in self.dims))
        if self.counterexample is not None:
            point = ", ".join(f"{k} = {v}" for k, v in self.counterexample.items())
            lines.append(f"  fails at:   {point}")
            lines += [f"      {expr} {'is' if value in ('True', 'False') else '='} {value}"
                      for expr, value in self.steps]
        for note in self.notes:
            lines.append(f"  note:       {note}")
        if self.fixes:
            lines.append("  fixes:")
            for fix in self.fixes:
                kept = f"  (keeps {fix.share_kept} of the declared range)" if fix.kept is not None else ""
                lines.append(f"    - {fix.description}{kept}")
        if self.decided_by:
            lines.append(f"  decided by: {self.decided_by}; engine form: {self.engine_condition}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text


def _steps(env: EnvView, f: S.Formula, point: dict[Symbol, int]) -> list[tuple[str, str]]:
    """Values of the subterms and relations of ``f`` at ``point``, innermost first."""
    labels = env.label_map()
    seen: list[Expr] = []

    def visit(term: Expr):
        for arg in term.args:
            visit(arg)
        if not (term.is_Atom or term in seen):
            seen.append(term)

    rels = list(S.relations(f))
    for r in rels:
        visit(r.lhs)
        visit(r.rhs)
    out: list[tuple[str, str]] = []
    for term in seen:
        try:
            value = str(evaluate(term, point))
        except Undefined:
            value = "undefined (division by zero)"
        out.append((term_str(term.xreplace(labels)), value))
    for r in rels:
        verdict = truth(r, point)
        shown = {True: "True", False: "False", None: "undefined (division by zero)"}[verdict]
        out.append((str(S.substitute(r, labels)), shown))
    if len(out) > _MAX_STEPS:   # keep the innermost few and every relation
        out = out[:_MAX_STEPS - len(rels)] + [("...", "...")] + out[-len(rels):]
    return out


def _dims(env: EnvView, f: S.Formula) -> list[DimInfo]:
    out = []
    for path in env.graph.inputs_of(f.free_symbols):
        info = next((i for i in env.symbols.values() if any(src.path == path for src in i.sources)), None)
        if info is not None:
            out.append(DimInfo(path, info.dim_name or path, info.declared, info.hint, info.kind))
    return out


def explain(env: EnvView, item) -> Explanation:
    """Explain a ``Guard``, a ``Violation``, a ``RuntimeAssert``, or a guard's index."""
    if isinstance(item, int):
        item = env.guards[item]
    violation = item if isinstance(item, Violation) else None
    record = violation.guard if violation else item
    if isinstance(record, RuntimeAssert):
        condition, kind, verdict = record.condition, "runtime assert", None
    elif isinstance(record, Guard):
        condition, kind, verdict = record.condition, record.kind, record.verdict
    else:
        raise TypeError(f"cannot explain {item!r}")
    lifted = lift(env, condition)
    status = verdict.status.value if verdict is not None else "not checked"
    counterexample, steps, fixes, notes = None, [], [], []
    if violation is not None:
        counterexample = violation.counterexample
        point = {Symbol(name, integer=True): value
                 for name, value in (violation.verdict.counterexample or {}).items()}
        steps = _steps(env, lifted, point)
        fixes = violation.fixes
    for sym in sorted(lifted.free_symbols, key=lambda s: s.name):
        notes += env.symbols[sym].notes
    where = record.where.to_dict() if record.where is not None else None
    decided_by = f"{verdict.strategy} in {verdict.milliseconds:.1f} ms" if verdict is not None else None
    asked = env.render(record.asked) if isinstance(record, Guard) else env.render(condition)
    return Explanation(kind, record.index, env.render(lifted), asked, where, _dims(env, lifted), status,
                       decided_by, counterexample, steps, fixes, notes, str(lifted))
