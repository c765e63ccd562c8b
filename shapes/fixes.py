"""Concrete fixes for a guard that does not hold over the declared ranges.

Every suggested fix is *verified*: the guard is proven under the changed
spec before it is offered, so following a suggestion cannot lead to the same
failure (torch's suggestions sometimes do: baseline.md lists fixes that
"still fail" and derived dims with a negative minimum).

Kinds: ``range`` (a tighter ``Dim(min, max)`` around the example), ``multiple``
(a derived dim ``m*Dim(...) + r``), ``equal`` (two dims are the same ``Dim``),
``static`` (the model only works for one size) and ``rewrite`` (the guard
comes from a Python branch on a size; change the code or export with
``split=True``), the last one advice rather than a verified spec change.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import copy
import itertools
import math

import numpy as np
from sympy import Poly, Symbol

from shapeproof import solver as S
from shapeproof.solver import Mod, Vocabulary, holds_along, prove, term_str

from .view import EnvView

__all__ = ["Fix", "suggest_fixes", "joint_fixes"]

_ENUMERATE_LIMIT = 2_000_000
_MAX_MODULUS = 64
_MAX_GUARD_MODULUS = 10 ** 6     # a guard's own divisors (and their lcm) up to this are tried as moduli too


class FixKind(Vocabulary):
    """What a fix changes: a Dim's range, a Dim made a multiple, two Dims tied, a Dim made static, or the
    code."""

    RANGE = "range"
    MULTIPLE = "multiple"
    EQUAL = "equal"
    STATIC = "static"
    REWRITE = "rewrite"


@dataclass(frozen=True)
class Fix:
    kind: FixKind
    dim: str                       # the Dim (or input dim) it changes
    description: str
    min: int | None = None         # range: the new bounds; multiple: bounds of the new root dim
    max: int | None = None
    modulus: int | None = None     # multiple: dim = modulus*root + remainder
    remainder: int = 0
    # equal: dim == scale*other + offset (a shared Dim, or one derived from other)
    other: str | None = None
    scale: int = 1
    offset: int = 0
    value: int | None = None       # static: the only size that works
    kept: float | None = None      # fraction of the declared range the fix keeps

    @property
    def share_kept(self) -> str | None:
        """``kept`` for messages: a percentage, ``under 1%`` rather than a 0% that is not nothing."""
        if self.kept is None:
            return None
        return "under 1%" if 0 < self.kept < 0.005 else f"{self.kept:.0%}"

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _spec(name: str, lo, hi) -> str:
    args = ([repr(name)] + ([f"min={lo}"] if lo is not None else [])
            + ([f"max={hi}"] if hi is not None else []))
    return f"Dim({', '.join(args)})"


def _size(lo, hi) -> int | None:
    return None if lo is None or hi is None else hi - lo + 1


def _kept(lo, hi, declared) -> float | None:
    total = _size(*declared)
    part = _size(lo, hi)
    return None if total is None or part is None or total == 0 else part / total


def _holds(goal: S.Formula, ranges: dict, facts=(), timeout: float = 1.0) -> bool:
    return prove(goal, ranges=ranges, facts=facts, timeout=timeout).proven


def _interval_fix(guard: S.Formula, sym: Symbol, hint: int, lo, hi, timeout) -> tuple | None:
    """Largest ``[a, b]`` around ``hint`` inside ``[lo, hi]`` where ``guard`` holds everywhere."""
    if lo is not None and hi is not None and hi - lo < _ENUMERATE_LIMIT:
        try:
            mask = holds_along(guard, sym, lo, hi)
        except OverflowError:
            mask = None
        if mask is not None:
            i = hint - lo
            if not mask[i]:
                return None
            failing_below = np.flatnonzero(~mask[:i])
            failing_above = np.flatnonzero(~mask[i:])
            a = lo + (failing_below[-1] + 1 if len(failing_below) else 0)
            b = lo + i + (failing_above[0] - 1 if len(failing_above) else len(mask) - 1 - i)
            return int(a), int(b)

    def holds_on(a, b) -> bool:
        return _holds(guard, {sym: (a, b)}, timeout=timeout)

    # binary searches on monotone predicates: "holds on [a, hint]" and "holds on [hint, b]"
    if holds_on(lo, hint):
        a = lo
    else:
        good, bad = hint, lo if lo is not None else hint - 2 ** 40
        while good - bad > 1:
            mid = (good + bad) // 2
            good, bad = (mid, bad) if holds_on(mid, hint) else (good, mid)
        a = good
    if holds_on(hint, hi):
        b = hi
    else:
        good, bad = hint, hi if hi is not None else hint + 2 ** 40
        while bad - good > 1:
            mid = (good + bad) // 2
            good, bad = (mid, bad) if holds_on(hint, mid) else (good, mid)
        b = good
    return (a, b) if holds_on(a, b) else None


def _moduli(guard: S.Formula, small: int = _MAX_MODULUS) -> list[int]:
    """Moduli a congruence fix may use, smallest first: ``2..small``, then the guard's own constant divisors
    and their common multiple (a hop of 320 samples, a stride product of 256), which no small modulus
    replaces.  A few more questions per guard at most: one per distinct divisor, and the multiple."""
    constants = S.constant_divisors(side for r in S.relations(guard) for side in (r.lhs, r.rhs))
    candidates = set(constants) | ({math.lcm(*constants)} if len(constants) > 1 else set())
    return list(range(2, small + 1)) + sorted(c for c in candidates if small < c <= _MAX_GUARD_MODULUS)


def _multiple_fix(guard: S.Formula, sym: Symbol, hint: int, lo, hi, timeout) -> tuple[int, int] | None:
    """Smallest ``m`` such that the guard holds on every ``x == hint (mod m)`` in range."""
    for m in _moduli(guard):
        r = hint % m
        if lo is not None and hi is not None and lo + (r - lo) % m + m > hi:
            continue                       # one value left in range: that is a static dim, not a multiple
        congruent = S.eq(Mod(sym, m), r)
        if _holds(guard, {sym: (lo, hi)}, facts=(congruent,), timeout=timeout):
            return m, r
    return None


def _single_symbol_fixes(env: EnvView, label: str, guard: S.Formula, sym: Symbol, timeout) -> list[Fix]:
    info = env.symbols[sym]
    lo, hi = info.range
    hint = info.hint
    declared = info.declared
    fixes: list[Fix] = []
    if hint is None:
        return fixes
    interval = _interval_fix(guard, sym, hint, lo, hi, timeout)
    if interval is not None:
        a, b = interval
        if a == b:
            fixes.append(Fix(FixKind.STATIC, label,
                             f"{label} only works as {a}: make it static (drop it from "
                             f"dynamic_shapes) or change the code that needs {label} == {a}", value=a,
                             kept=_kept(a, b, declared)))
        else:
            fixes.append(Fix(FixKind.RANGE, label, f"{label} = {_spec(label, a, b)}", min=a, max=b,
                             kept=_kept(a, b, declared)))
    multiple = _multiple_fix(guard, sym, hint, lo, hi, timeout)
    if multiple is not None:      # kept even when a range keeps more: congruences combine across guards
        fixes.append(_as_multiple(label, *multiple, lo, hi, declared))
    return fixes


def _as_multiple(label: str, m: int, r: int, lo, hi, declared) -> Fix:
    """``label = m*root + r``, with ``root`` bounded so that ``lo <= label <= hi``."""
    root_lo = None if lo is None else -((-(lo - r)) // m)
    root_hi = None if hi is None else (hi - r) // m
    kept = None if root_lo is None or root_hi is None or declared[1] is None \
        else (root_hi - root_lo + 1) / _size(*declared)
    tail = f" + {r}" if r else ""
    return Fix(FixKind.MULTIPLE, label, f"{label} = {m}*{_spec(f'{label}_{m}', root_lo, root_hi)}{tail}",
               min=root_lo, max=root_hi, modulus=m, remainder=r, kept=kept)


def _equality_fix(env: EnvView, labels: dict, guard: S.Formula, syms: list[Symbol], timeout) -> list[Fix]:
    """``b == k*a + c`` between two dims: one shared ``Dim`` (k=1, c=0) or ``b`` derived from ``a``'s Dim.

    The relation is read off the guard when it is a linear equation, and
    offered only if it is proven equivalent to the guard over the ranges.
    """
    relation = _linear_relation(guard, sorted(syms, key=lambda s: env.creation_order(s)))
    if relation is None:
        return []
    b, k, a, c = relation
    ranges = {s: env.symbols[s].range for s in syms}
    tied = S.eq(b, k * a + c)
    if not (_holds(guard, ranges, facts=(tied,), timeout=timeout)
            and _holds(tied, ranges, facts=(guard,), timeout=timeout)):
        return []
    if (k, c) == (1, 0):
        text = f"use one Dim for {labels[b]} and {labels[a]} (they must be equal)"
    elif k >= 1:
        derived = term_str(k * Symbol(labels[a]) + c)
        text = f"declare {labels[b]} as a Dim derived from {labels[a]}'s: {labels[b]} = {derived}"
    else:
        # torch's derived Dims increase with their root (a*root + b, a >= 1): say the relation, not a Dim
        derived = term_str(k * Symbol(labels[a]) + c)
        text = (f"{labels[b]} must be {derived}, which torch's Dim cannot declare (a derived Dim increases "
                f"with its root): make {labels[b]} or {labels[a]} static, or change the code that needs it")
    return [Fix(FixKind.EQUAL, labels[b], text, other=labels[a], scale=k, offset=c)]


def _linear_relation(guard: S.Formula, syms: list[Symbol]) -> tuple | None:
    """``(b, k, a, c)`` with the guard reading ``b == k*a + c`` (integers k, c), deriving the newest dim
    that has a unit coefficient; None when the guard is no such equation."""
    if not isinstance(guard, S.Rel) or guard.op != "==":
        return None
    difference = guard.lhs - guard.rhs
    if not difference.is_polynomial(*syms):
        return None
    poly = Poly(difference, *syms)
    if poly.total_degree() != 1:
        return None
    coefficients = {s: poly.coeff_monomial(s) for s in syms}
    constant = poly.coeff_monomial(1)
    if not all(c.is_Integer for c in (*coefficients.values(), constant)):
        return None              # a constant float step (math.ceil(float(7))) is no integer coefficient
    for b in reversed(syms):
        (a,) = [s for s in syms if s != b]
        q = coefficients[b]
        if q in (1, -1) and coefficients[a] != 0:
            return b, int(-coefficients[a] / q), a, int(-constant / q)
    return None


_BRANCH_WORDS = ("if ", "elif ", "while ", " if ")


def _rewrite_fix(label: str, guard, notes: dict[tuple[str, int], str]) -> list[Fix]:
    frame = guard.where.frame if guard.where is not None else None
    if frame is None or not any(word in f" {frame.code}" for word in _BRANCH_WORDS):
        return []
    note = notes.get((frame.filename, frame.lineno))
    why = f", which could not run as a torch.cond ({note})" if note else ""
    return [Fix(FixKind.REWRITE, label, f"the guard comes from a Python branch on a size at {frame.short} "
                f"(`{frame.code}`){why}: export with split=True to keep both branches, or compute the size "
                "without a branch (e.g. pad = (-T) % N instead of `if T % N != 0`)")]


def suggest_fixes(env: EnvView, guard, lifted: S.Formula, timeout: float = 1.0) -> list[Fix]:
    """Verified fixes for ``guard`` (whose condition, over input symbols, is ``lifted``)."""
    syms = sorted(lifted.free_symbols, key=lambda s: s.name)
    labels = {s: env.symbols[s].label for s in syms}
    fixes: list[Fix] = []
    if len(syms) == 1:
        fixes += _single_symbol_fixes(env, labels[syms[0]], lifted, syms[0], timeout)
    elif len(syms) == 2:
        fixes += _equality_fix(env, labels, lifted, syms, timeout)
    fixes.sort(key=lambda f: -1.0 if f.kept is None else -f.kept)   # the most of the declared range first
    if syms:
        fixes += _rewrite_fix(labels[syms[0]], guard, env.branch_notes)
    return fixes


class _DimState:
    """What a combined fix allows for one symbol: ``lo <= s <= hi`` and ``s % modulus == remainder``."""

    def __init__(self, lo, hi):
        self.lo, self.hi, self.modulus, self.remainder = lo, hi, None, 0

    def restrict(self, fix: Fix) -> None:
        if fix.kind == "range":
            self.lo = fix.min if self.lo is None else max(self.lo, fix.min)
            self.hi = fix.max if self.hi is None else (self.hi if fix.max is None else min(self.hi, fix.max))
        elif fix.kind == "multiple":
            self.congruent(cast(int, fix.modulus), cast(int, fix.remainder))
        elif fix.kind == "static":
            self.lo = self.hi = fix.value

    def congruent(self, modulus: int, remainder: int) -> None:
        """Also require ``s % modulus == remainder`` (Chinese remainder: ``4*k`` and ``16*k`` make ``16*k``).

        Fixes come from one example, so their congruences are compatible; one
        that is not (never from a single example) leaves the state unchanged.
        """
        if self.modulus is None:
            self.modulus, self.remainder = modulus, remainder
            return
        lcm = math.lcm(self.modulus, modulus)
        both = [x for x in range(self.remainder, lcm, self.modulus) if x % modulus == remainder]
        if both:
            self.modulus, self.remainder = lcm, both[0]


def _holds_jointly(guard: S.Formula, states: dict, timeout: float) -> bool:
    syms = guard.free_symbols
    ranges = {s: (states[s].lo, states[s].hi) for s in syms}
    facts = tuple(S.eq(Mod(s, states[s].modulus), states[s].remainder)
                  for s in syms if states[s].modulus is not None)
    return _holds(guard, ranges, facts, timeout)


def _congruence_search(env: EnvView, guard: S.Formula, states: dict, timeout: float) -> dict | None:
    """Smallest set of dims (then smallest modulus) whose congruence to their example makes ``guard`` hold."""
    syms = sorted((s for s in guard.free_symbols if states[s].modulus is None
                   and env.symbols[s].hint is not None),
                  key=lambda s: s.name)
    moduli = _moduli(guard, small=16)
    for size in range(1, len(syms) + 1):
        for subset in itertools.combinations(syms, size):
            for m in moduli:
                trial = dict(states)
                for s in subset:
                    state = _DimState(states[s].lo, states[s].hi)
                    state.modulus, state.remainder = m, cast(int, env.symbols[s].hint) % m
                    trial[s] = state
                if _holds_jointly(guard, trial, timeout):
                    return {s: trial[s] for s in subset}
    return None


def _bound_search(env: EnvView, guard: S.Formula, states: dict, timeout: float) -> dict | None:
    """Raise the minimums (else lower the maximums) of all of ``guard``'s dims together, up to their examples.

    For guards such as ``min(H // 8, W // 8) > 4`` that no congruence fixes:
    the smallest common step ``k`` (binary search; the result is re-proven)
    with ``lo + k`` (or ``hi - k``) capped at each dim's example.
    """
    syms = [s for s in guard.free_symbols if env.symbols[s].hint is not None]
    if len(syms) != len(guard.free_symbols):
        return None
    for side in ("lo", "hi"):
        def moved(k, side=side):
            trial = dict(states)
            for s in syms:
                state, hint = states[s], env.symbols[s].hint
                new = copy.copy(state)
                if side == "lo":
                    new.lo = hint if state.lo is None else min(hint, state.lo + k)
                else:
                    new.hi = hint if state.hi is None else max(hint, state.hi - k)
                trial[s] = new
            return trial

        bounds = [(env.symbols[s].hint, getattr(states[s], side)) for s in syms]
        widest = max((abs(hint - bound) for hint, bound in bounds if bound is not None), default=0)
        if not _holds_jointly(guard, moved(widest), timeout):
            continue
        bad, good = -1, widest
        while good - bad > 1:
            mid = (good + bad) // 2
            bad, good = (bad, mid) if _holds_jointly(guard, moved(mid), timeout) else (mid, good)
        found = moved(good)
        return {s: found[s] for s in syms}
    return None


def _values(state: _DimState) -> int | None:
    """How many sizes ``state`` allows (None if unbounded)."""
    if state.lo is None or state.hi is None:
        return None
    m, r = state.modulus or 1, state.remainder
    return max(0, (state.hi - r) // m - (-((-(state.lo - r)) // m)) + 1)


def _dim_share(old: _DimState, new: _DimState) -> float:
    """How much of ``old`` ``new`` keeps (counted exactly when bounded; else a congruence mod m keeps 1/m)."""
    before, after = _values(old), _values(new)
    if before and after is not None:
        return after / before
    return (old.modulus or 1) / (new.modulus or 1)


def _share_kept(changed: dict, states: dict) -> float:
    """How much of the current ranges a change (dim -> new state) keeps."""
    return math.prod(_dim_share(states[s], new) for s, new in changed.items())


def _fit(env: EnvView, violations, choose, timeout: float) -> dict | None:
    """Dim states under which every violated guard holds, starting from one single-dim fix per violation."""
    syms = set().union(*(v.lifted.free_symbols for v in violations))
    states = {s: _DimState(*env.symbols[s].range) for s in syms}
    for v in violations:
        spec_fixes = [f for f in v.fixes if f.kind in ("range", "multiple", "static")]
        if spec_fixes and len(v.lifted.free_symbols) == 1:
            (s,) = v.lifted.free_symbols
            states[s] = choose(states[s], spec_fixes)
    for v in violations:
        if not _holds_jointly(v.lifted, states, timeout):
            candidates = [c for c in (_congruence_search(env, v.lifted, states, timeout),
                                      _bound_search(env, v.lifted, states, timeout)) if c is not None]
            found = max(candidates, key=lambda c: _share_kept(c, states), default=None)
            if found is None:
                return None
            states.update(found)
    if not all(_holds_jointly(v.lifted, states, timeout) for v in violations):
        return None
    return states


def _restricted(state: _DimState, fix: Fix) -> _DimState:
    new = copy.copy(state)
    new.restrict(fix)
    return new


def _widest_alone(state: _DimState, fixes: list[Fix]) -> _DimState:
    return _restricted(state, fixes[0])           # suggest_fixes sorts by the share of the range kept


def _widest_together(state: _DimState, fixes: list[Fix]) -> _DimState:
    """The fix that keeps the most of what the fixes chosen so far left (``4*k`` then ``16*k``, not
    ``[96, 99]``)."""
    return max((_restricted(state, f) for f in fixes), key=lambda new: _dim_share(state, new))


def joint_fixes(env: EnvView, violations, timeout: float = 1.0) -> list[Fix] | None:
    """One fix per dim that makes *every* violated guard hold at once, verified; None if none is found.

    Starts from each violation's best single fix, then, for guards still
    failing under the combination (typically multivariate ones), searches
    congruences over the fewest dims, then common raises of their minimums
    (or cuts of their maximums).  Every guard is re-proven at the end.  The
    widest single fixes do not always combine best (a range that suits one
    pad is cut to one size by the next pad's congruence), so a second
    combination picks, guard by guard, the fix that keeps the most of what is
    left; the combination keeping more wins.
    """
    syms = set().union(*(v.lifted.free_symbols for v in violations))
    declared = {s: _DimState(*env.symbols[s].range) for s in syms}
    fits = [f
            for f in (_fit(env, violations, choose, timeout) for choose in (_widest_alone, _widest_together))
            if f is not None]
    if not fits:
        return None
    states = max(fits, key=lambda f: _share_kept(f, declared))
    fixes = []
    for s, state in sorted(states.items(), key=lambda kv: kv[0].name):
        info = env.symbols[s]
        fix = dim_fix(info.label, state.lo, state.hi, info.range, info.declared,
                      state.modulus, state.remainder)
        if fix is not None:
            fixes.append(fix)
    return fixes


def dim_fix(label: str, lo: int | None, hi: int | None, current: tuple, declared: tuple,
            modulus: int | None = None, remainder: int = 0) -> Fix | None:
    """The fix that keeps ``label`` within ``[lo, hi]`` (and ``== remainder`` mod ``modulus``), None when
    that is its whole ``current`` range; ``declared`` is what the share kept is counted against."""
    if (lo, hi) == current and modulus is None:
        return None
    if lo is not None and lo == hi:
        return Fix(FixKind.STATIC, label, f"{label} only works as {lo}", value=lo)
    if modulus is None:
        return Fix(FixKind.RANGE, label, f"{label} = {_spec(label, lo, hi)}", min=lo, max=hi,
                   kept=_kept(lo, hi, declared))
    fix = _as_multiple(label, modulus, remainder, lo, hi, declared)
    if fix.min is not None and fix.min == fix.max:    # one size left
        value = modulus * fix.min + remainder
        return Fix(FixKind.STATIC, label, f"{label} only works as {value}", value=value)
    return fix
