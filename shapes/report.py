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

import time
from dataclasses import dataclass, field
from typing import Iterable

from sympy import Integer, Poly, Symbol

from shapeproof import solver as S
from shapeproof.solver import Verdict

from .fixes import Fix, FixKind, joint_fixes, suggest_fixes
from .records import Guard, RuntimeAssert
from .symbols import DimKind, Specialization
from .view import EnvView

__all__ = ["Violation", "GuardReport", "produce_guards", "lift", "asserts_that_narrow"]

_EVERY_SIZE = 64     # _narrows_alone tries the first this many sizes of a named dim (all of a shorter range)


@dataclass
class Violation:
    """A guard that fails for some input inside the declared ranges."""

    guard: Guard
    lifted: S.Formula
    verdict: Verdict
    counterexample: dict[str, int]    # by the user's names (Dim names or source paths)
    fixes: list[Fix] = field(default_factory=list)
    # torch.export keeps it as an input check instead of failing: it is on roots of derived dims that no
    # input carries (``x.size(1) > 100`` with ``x.size(1) = 32*h``) and leaves them more than one size
    torch_keeps: bool = False


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
    specialized: list[Specialization]   # dims declared dynamic whose example value is 0 or 1
    # one verified fix per dim that satisfies every violation at once
    combined_fixes: list[Fix] | None = None
    # refuted guards on dims the spec lets export narrow (Dim.AUTO/DYNAMIC, relations between named dims):
    # not errors, but input checks of the program, as torch.export keeps them
    restrictions: list[Violation] = field(default_factory=list)
    # Dim.DYNAMIC dims (label, size) the restrictions together leave one size (torch exports them silently)
    pinned_together: list[tuple[str, int]] = field(default_factory=list)
    # Dim.DYNAMIC dims (label, 0 or 1) the restrictions leave that one size: torch allows it (an input check)
    pinned_zero_one: list[tuple[str, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations and not self.specialized

    @property
    def kept_guards(self) -> list[Guard]:
        """Guards the exported program must still check on its inputs (not proven over the ranges)."""
        return [g for g in self.guards if g.verdict is None or not g.verdict.proven]


def lift(env: EnvView, f: S.Formula) -> S.Formula:
    """``f`` over input symbols only: derived symbols ``k`` (with ``x == c*k``) become ``x // c``."""
    for _ in range(len(env.derived) + 1):
        present = {s: env.derived[s] for s in f.free_symbols if s in env.derived}
        if not present:
            return f
        f = S.substitute(f, present)
    return f


def _initial_ranges(env: EnvView, syms, declared: bool = False) -> dict[Symbol, tuple]:
    out = {}
    for s in syms:
        info = env.symbols[s]
        out[s] = info.declared if declared else info.range
    return out


def _labelled(env: EnvView, point: dict[str, int]) -> dict[str, int]:
    by_name = {s.name: info for s, info in env.symbols.items()}
    return {by_name[name].label if name in by_name else name: value for name, value in point.items()}


def _raised_lower_bound(info) -> bool:
    """Reasoning started above the declared minimum (torch.export's 0/1 convention raised it)."""
    declared, used = info.declared[0], info.range[0]
    return used is not None and (declared is None or declared < used)


def _tolerated(env: EnvView, guard: Guard, lifted: S.Formula, counterexample: dict, strategy: str,
               timeout: float) -> bool:
    """Whether torch.export's rules make this refuted guard an input check of the program, not an error.

    Dims declared ``Dim.AUTO``/``Dim.DYNAMIC`` let export decide, so guards on
    them only narrow what the program accepts (``DYNAMIC`` ones may not be
    pinned to one size: see ``_pinned``).  A named ``Dim`` promises its whole
    range: a guard on it alone is a violation.  A relation between named
    dims is kept as an input check (``N <= M``, ``a*b == c*d``, ``(a*b) // 2
    != a`` at b = 2), except an equation that would make one named dim a
    function of the others (torch asks for a shared or derived ``Dim``
    there) and one that narrows by itself a named dim it taught a
    divisibility (``H*W == 4*(H // 2)*(W // 2)``: the per-dim questions torch
    asks after it, and raises on, the environment answered from ``H = 2*k``);
    a relation with an ``AUTO``/``DYNAMIC`` dim is one that dim adopts, as
    long as it leaves the named dims their ranges.
    """
    infos = [env.symbols[s] for s in lifted.free_symbols]
    if not infos or any(not info.backed for info in infos):
        return False
    strict = [info for info in infos if info.kind is DimKind.STRICT]
    if not strict:
        return True
    if _restates_an_adopted_range(env, lifted, strategy, timeout):
        return True
    if len(infos) == 1 or (len(strict) == len(infos) and _solvable_equation(lifted)):
        return False
    taught = _roots(env, guard.taught)
    return not any(_narrows_alone(env, lifted, info, counterexample, strategy, timeout)
                   for info in strict if info.symbol in taught)


def _kept_by_torch(env: EnvView, lifted: S.Formula) -> bool:
    """Whether torch.export keeps this refuted guard as an input check: its named dims are all roots of
    derived dims that no input carries, and torch made none of them a constant.

    torch raises only where it solved a guard into a constant: an equation linear in an input's dim
    (``x.size(1) == 16`` with ``x.size(1) = 2*h``), which replaces that dim.  ``x.size(1) // 2 == 8``
    pins ``h`` as surely, yet torch keeps it as an input check and exports (measured on 2.13), and so
    does shapeproof, whose warning says the share of sizes the check accepts.
    """
    infos = [env.symbols[s] for s in lifted.free_symbols]
    strict = [info for info in infos if info.kind is DimKind.STRICT]
    return (bool(strict) and all(info.backed for info in infos)
            and all(info.uncarried_root for info in strict)
            and not any(_replaced_by_torch(env, info) for info in strict))


def _replaced_by_torch(env: EnvView, info) -> bool:
    """Whether torch made ``info``'s dim, or an input dim derived from it, a constant."""
    if info.fixed is not None:
        return True
    derived = [s for s, value in env.knowledge.replacements.items() if info.symbol in value.free_symbols]
    return any(s in env.symbols and env.symbols[s].fixed is not None for s in derived)


def _restates_an_adopted_range(env: EnvView, lifted: S.Formula, strategy: str, timeout: float) -> bool:
    """Whether ``lifted`` holds wherever an ``AUTO``/``DYNAMIC`` dim the environment replaced by named dims
    is in its range: ``u[1:] + w`` makes ``w = u - 1``, and ``w >= 2`` (torch's 0/1 rule) reads
    ``u - 1 >= 2``, a guard on the named ``u`` alone.  torch, which roots the pair at ``w``, keeps it as
    ``w``'s range: an input check."""
    for w, replacement in env.knowledge.replacements.items():
        info = env.symbols.get(w)
        if info is None or info.kind is DimKind.STRICT or not replacement.free_symbols & lifted.free_symbols:
            continue
        lo, hi = info.range
        in_range = [S.rel(op, replacement, Integer(bound)) for op, bound in ((">=", lo), ("<=", hi))
                    if bound is not None]
        syms = lifted.free_symbols | replacement.free_symbols
        if in_range and env.solver.prove(lifted, ranges={s: env.symbols[s].range for s in syms},
                                         facts=in_range, strategy=strategy, timeout=timeout).proven:
            return True
    return False


def _roots(env: EnvView, syms) -> set[Symbol]:
    """The input symbols behind ``syms`` (``k`` with ``H == 2*k`` is ``H``'s)."""
    todo, roots = list(syms), set()
    while todo:
        s = todo.pop()
        if s in env.derived:
            todo.extend(env.derived[s].free_symbols)
        else:
            roots.add(s)
    return roots


def _narrows_alone(env: EnvView, lifted: S.Formula, info, counterexample: dict, strategy: str,
                   timeout: float) -> bool:
    """Whether some size of one named dim fails ``lifted`` whatever the other dims are.

    A relation such as ``N <= M`` leaves each dim its whole range (the
    program checks the pair); ``3*B*H*W == 12*B*(H//2)*(W//2)`` does not (no
    ``B``, ``W`` make it hold for an odd ``H``): that is a guard on ``H``
    alone in other words, a violation like torch's own per-dim guards.
    Sizes tried: the counterexample's, the ends of the range and its first
    ``_EVERY_SIZE`` sizes (all of a shorter one), where the relation fails
    alone first (``(B*T) % (2*(T // 2)) == 0`` holds at T = 3, 5, 7, 9 for
    some ``B <= 8``, at no odd T from 11); the first sizes stop once
    ``timeout`` is spent.  A miss only means the program checks the
    relation on its inputs, which the export reports.
    """
    sym = info.symbol
    others = {s: env.symbols[s].range for s in lifted.free_symbols if s != sym}
    lo, hi = info.range
    first: Iterable[int] = () if lo is None else range(lo, lo + _EVERY_SIZE if hi is None else
                                                      min(hi + 1, lo + _EVERY_SIZE))
    sizes = dict.fromkeys(v for v in (counterexample.get(sym.name), lo, hi, *first) if v is not None)
    stop = time.perf_counter() + timeout
    for tried, value in enumerate(sizes):
        if tried >= 3 and time.perf_counter() > stop:
            break
        if env.solver.prove(S.neg(S.substitute(lifted, {sym: value})), ranges=others, strategy=strategy,
                 timeout=timeout).proven:
            return True
    return False


def _solvable_equation(f: S.Formula) -> bool:
    """``a*x + b*y + ... == c`` (alone or in a conjunction): an equation over several dims that torch solves
    into a replacement of one dim by the others."""
    if isinstance(f, S.And):
        return any(_solvable_equation(part) for part in f.args)
    if not isinstance(f, S.Rel) or f.op != "==":
        return False
    difference = f.lhs - f.rhs
    syms = sorted(difference.free_symbols, key=str)
    return (len(syms) > 1 and difference.is_polynomial(*syms)
            and Poly(difference, *syms).total_degree() <= 1)


def _pinned(env: EnvView, restrictions: list[Violation], strategy: str,
            timeout: float) -> tuple[dict[int, Symbol], list[tuple[str, int]]]:
    """Restrictions that leave a ``Dim.DYNAMIC`` dim a single size (torch.export's "specialized" error), by
    ``id``, each with the dim: those on the dim alone when the ones torch solves (linear in the dim:
    ``s == 64``, ``s <= 64`` with ``s >= 64``) allow only the example's size, and every one on a dim the
    tracer specialized (``s*t == 10*t`` made torch replace ``s`` by 10).  BigBird's ``s // 4 == 16`` with
    ``s % 4 == 0`` also allows only 64, but torch keeps those as input checks and exports: so does
    shapeproof, saying so (``_pinned_together``).

    torch lets a ``Dim.DYNAMIC`` dim become 0 or 1 (an example of that size kept
    symbolic by ``backed_size_oblivious``) and only checks it on the inputs; such
    dims come back apart, as ``(label, size)``, to be said rather than raised.
    """
    pinned: dict[int, Symbol] = {}
    tolerated: list[tuple[str, int]] = []
    for sym, info in env.symbols.items():
        if info.kind is not DimKind.DYNAMIC or info.hint is None:
            continue
        if info.fixed is not None:
            size, own = info.fixed, [v for v in restrictions if sym in v.lifted.free_symbols]
        else:
            size, own = info.hint, [v for v in restrictions if v.lifted.free_symbols == {sym}]
            solved = [v for v in own if _linear_in(v.lifted, sym)]
            if not (solved and _only_the_example(env, sym, solved, strategy, timeout)):
                continue
        if size in (0, 1):
            tolerated.append((info.label, size))
        else:
            pinned.update((id(v), sym) for v in own)
    return pinned, tolerated


def _pinned_together(env: EnvView, restrictions: list[Violation], strategy: str,
                     timeout: float) -> list[tuple[str, int]]:
    """``Dim.DYNAMIC`` dims (label, size) that restrictions torch does not solve leave a single size together.

    torch.export exports these without a word (pixel_unshuffle's conv check
    ``C*(H//(H//2))*(W//(W//2)) == 12``, with ``H//2 != 1`` and ``W//2 != 1``,
    accepts only ``C = 3``, which no single guard says; BigBird's ``s // 4 == 16``
    and ``s % 4 == 0`` accept only ``s = 64``); shapeproof exports them too,
    and says so.  (torch fails where a later op makes it replace ``C`` by 3;
    shapeproof exports that program as well, with the warning.)
    """
    found = []
    for sym, info in env.symbols.items():
        if info.kind is not DimKind.DYNAMIC or info.hint is None or info.fixed is not None:
            continue
        mentioning = [v for v in restrictions if sym in v.lifted.free_symbols]
        if not mentioning:
            continue
        shared = set().union(*(v.lifted.free_symbols for v in mentioning))
        context = [v for v in restrictions if v.lifted.free_symbols <= shared]
        if _only_the_example(env, sym, context, strategy, timeout):
            found.append((info.label, info.hint))
    return found


def _linear_in(f: S.Formula, sym: Symbol) -> bool:
    """Whether every relation of ``f`` (a conjunction) is linear in ``sym``: what torch solves for a dim's
    value or range (not ``s // 4 == 16``, nor a disjunction)."""
    if isinstance(f, S.And):
        return all(_linear_in(part, sym) for part in f.args)
    if not isinstance(f, S.Rel):
        return False
    difference = f.lhs - f.rhs
    return difference.is_polynomial(sym) and Poly(difference, sym).degree() <= 1


def _only_the_example(env: EnvView, sym: Symbol, restrictions: list[Violation], strategy: str,
                      timeout: float) -> bool:
    """Whether the solver shows that ``restrictions`` together allow ``sym`` only its example's size."""
    return _allows_only_the_example(env, sym, S.conj(*(v.lifted for v in restrictions)), strategy, timeout)


def _allows_only_the_example(env: EnvView, sym: Symbol, f: S.Formula, strategy: str, timeout: float) -> bool:
    """Whether the solver shows that ``f`` holds, over the ranges of its dims, only at ``sym``'s example."""
    only_hint = S.disj(S.neg(f), S.eq(sym, env.symbols[sym].hint))
    return env.solver.prove(only_hint, ranges={s: env.symbols[s].range for s in f.free_symbols | {sym}},
                            strategy=strategy, timeout=timeout).proven


def _static_fix(env: EnvView, sym: Symbol) -> Fix:
    info = env.symbols[sym]
    size = info.hint if info.fixed is None else info.fixed
    return Fix(FixKind.STATIC, info.label,
               f"{info.label} only works as {size}: declare it Dim.STATIC or Dim.AUTO "
               "(Dim.DYNAMIC may not become one size)", value=size)


def produce_guards(env: EnvView, strategy="cascade", timeout: float = 2.0) -> GuardReport:
    violations: list[Violation] = []
    restrictions: list[Violation] = []
    unproven: list[Guard] = []
    zero_one: list[ZeroOneWarning] = []
    for guard in env.guards:
        lifted = lift(env, guard.condition)
        syms = lifted.free_symbols
        verdict = env.solver.prove(lifted, ranges=_initial_ranges(env, syms), strategy=strategy,
                                   timeout=timeout)
        guard.verdict = verdict
        if verdict.refuted:
            point = verdict.counterexample or {}            # set on every refutation
            violation = Violation(guard, lifted, verdict, _labelled(env, point))
            tolerated = _tolerated(env, guard, lifted, point, strategy, timeout)
            (restrictions if tolerated else violations).append(violation)
        elif not verdict.proven:
            unproven.append(guard)
        elif any(_raised_lower_bound(env.symbols[s]) for s in syms if env.symbols[s].backed):
            at_declared = env.solver.prove(lifted, ranges=_initial_ranges(env, syms, declared=True),
                                           strategy=strategy,
                                timeout=timeout)
            if at_declared.refuted:
                zero_one.append(ZeroOneWarning(guard, _labelled(env, at_declared.counterexample or {})))
    # once a named dim is an error, every relation that narrows it by itself is part of the error too, so
    # that its fix covers them all
    erring = {s for v in violations for s in v.lifted.free_symbols if env.symbols[s].kind is DimKind.STRICT}
    joined = {id(r) for r in restrictions if any(
        _narrows_alone(env, r.lifted, env.symbols[s], r.verdict.counterexample or {}, strategy, timeout)
        for s in r.lifted.free_symbols & erring)}
    violations += [r for r in restrictions if id(r) in joined]
    restrictions = [r for r in restrictions if id(r) not in joined]
    pinned, pinned_zero_one = _pinned(env, restrictions, strategy, timeout)
    violations = sorted(violations + [r for r in restrictions if id(r) in pinned],
                        key=lambda v: v.guard.index)
    restrictions = [r for r in restrictions if id(r) not in pinned]
    for violation in violations:
        violation.torch_keeps = _kept_by_torch(env, violation.lifted)
        violation.fixes = suggest_fixes(env, violation.guard, violation.lifted, timeout)
        if id(violation) in pinned and not any(f.kind == "static" for f in violation.fixes):
            violation.fixes.insert(0, _static_fix(env, pinned[id(violation)]))
    combined = joint_fixes(env, violations, timeout) if violations else None
    together = _pinned_together(env, restrictions, strategy, timeout) if not violations else []
    return GuardReport(list(env.guards), violations, unproven, zero_one, list(env.specialized), combined,
                       restrictions, together, pinned_zero_one)


def asserts_that_narrow(env: EnvView, strategy="cascade", timeout: float = 2.0) -> list[RuntimeAssert]:
    """Runtime asserts over input sizes alone, one a named dim at least, that fail for some sizes in the
    ranges (export's ``prefer_deferred_runtime_asserts_over_guards`` makes guards such asserts): the program
    rejects those sizes when it runs, which the caller should say (as for guards, what ops need of
    ``Dim.AUTO``/``Dim.DYNAMIC`` dims alone is what those kinds ask export to infer)."""
    found = []
    for ra in env.runtime_asserts:
        lifted = lift(env, ra.condition)
        syms = lifted.free_symbols
        infos = [env.symbols.get(s) for s in syms]
        if not infos or not all(i is not None and i.backed for i in infos) or not any(
                i.kind is DimKind.STRICT for i in infos if i is not None):
            continue
        if env.solver.prove(lifted, ranges=_initial_ranges(env, syms), strategy=strategy,
                            timeout=timeout).refuted:
            found.append(ra)
    return found
