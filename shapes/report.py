"""``produce_guards``: check every recorded guard against the ranges the user declared.

Each guard is lifted back to input sizes (symbols introduced by divisibility
become ``x // c`` again) and proven over the *initial* ranges with no other
guard as a premise: otherwise every guard would prove itself.  The outcome per
guard: proven (the exported program needs no check for it), refuted (a
violation, with a counterexample and verified fixes), or unknown (kept as an
input check of the exported program, reported as such).  A guard that holds
from 2 up but not at sizes 0 or 1 that the user allowed is reported as a
0/1 warning, since torch.export assumes those sizes behave like 2.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sympy import Symbol

from shapeproof.solver import formula as F
from shapeproof.solver.api import prove
from shapeproof.solver.verdict import Verdict

from .fixes import Fix, joint_fixes, suggest_fixes
from .records import Guard

__all__ = ["Violation", "GuardReport", "produce_guards", "lift"]


@dataclass
class Violation:
    """A guard that fails for some input inside the declared ranges."""

    guard: Guard
    lifted: F.Formula
    verdict: Verdict
    counterexample: dict[str, int]    # by the user's names (Dim names or source paths)
    fixes: list[Fix] = field(default_factory=list)


@dataclass
class ZeroOneWarning:
    guard: Guard
    counterexample: dict[str, int]


@dataclass
class GuardReport:
    guards: list[Guard]
    violations: list[Violation]
    unproven: list[Guard]
    zero_one: list[ZeroOneWarning]
    specialized: list[tuple]          # (source, example size, declared range) of dims declared dynamic
    combined_fixes: list[Fix] | None = None   # one verified fix per dim that satisfies every violation at once

    @property
    def ok(self) -> bool:
        return not self.violations and not self.specialized

    @property
    def kept_guards(self) -> list[Guard]:
        """Guards the exported program must still check on its inputs (not proven over the ranges)."""
        return [g for g in self.guards if g.verdict is None or not g.verdict.proven]


def lift(env, f: F.Formula) -> F.Formula:
    """``f`` over input symbols only: derived symbols ``k`` (with ``x == c*k``) become ``x // c``."""
    for _ in range(len(env.derived) + 1):
        present = {s: env.derived[s] for s in f.free_symbols if s in env.derived}
        if not present:
            return f
        f = F.substitute(f, present)
    return f


def _initial_ranges(env, syms, declared: bool = False) -> dict[Symbol, tuple]:
    out = {}
    for s in syms:
        info = env.symbols[s]
        out[s] = info.declared if declared else info.range
    return out


def _labelled(env, point: dict[str, int]) -> dict[str, int]:
    by_name = {s.name: info for s, info in env.symbols.items()}
    return {by_name[name].label if name in by_name else name: value for name, value in point.items()}


def _raised_lower_bound(info) -> bool:
    """Reasoning started above the declared minimum (torch.export's 0/1 convention raised it)."""
    declared, used = info.declared[0], info.range[0]
    return used is not None and (declared is None or declared < used)


def produce_guards(env, strategy="cascade", timeout: float = 2.0) -> GuardReport:
    violations, unproven, zero_one = [], [], []
    for guard in env.guards:
        lifted = lift(env, guard.condition)
        syms = lifted.free_symbols
        verdict = prove(lifted, ranges=_initial_ranges(env, syms), strategy=strategy, timeout=timeout)
        guard.verdict = verdict
        if verdict.refuted:
            fixes = suggest_fixes(env, guard, lifted, timeout)
            violations.append(Violation(guard, lifted, verdict, _labelled(env, verdict.counterexample), fixes))
        elif not verdict.proven:
            unproven.append(guard)
        elif any(_raised_lower_bound(env.symbols[s]) for s in syms if env.symbols[s].backed):
            at_declared = prove(lifted, ranges=_initial_ranges(env, syms, declared=True), strategy=strategy,
                                timeout=timeout)
            if at_declared.refuted:
                zero_one.append(ZeroOneWarning(guard, _labelled(env, at_declared.counterexample)))
    combined = joint_fixes(env, violations, timeout) if violations else None
    return GuardReport(list(env.guards), violations, unproven, zero_one, list(env.specialized), combined)
