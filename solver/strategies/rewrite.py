"""The ``rewrite`` strategy: normalize ``//`` and ``%``, then decide by bounds.

Three steps, all exact:

1. *Reduce* with the facts: ``x % c == 0`` substitutes ``x = c*k`` for a fresh
   ``k``; an equality that defines a symbol (``s0 == 2*s1 + 1``) substitutes it
   and keeps its range as a fact; linear facts tighten the ranges.
2. *Normalize* every term bottom-up with the rules in ``rules.py``: ``%`` and
   ceil division become ``//``, exact multiples leave the dividend
   (``(2*T*T) // T -> 2*T``, ``(4 + 4*q) // (1 + q) -> 4``), nested and
   scaled divisions collapse.  Differences of equal terms cancel to 0.
3. *Decide* each relation from the tight interval of ``lhs - rhs``
   (``tight.py``: ``x - b*(x // b)`` folds back into ``x % b``, whose range
   ``[0, b-1]`` is what proves ``T <= 16*ceil(T/16)``).

The same reduction feeds SMT in the cascade (``Simplified``), which turns the
nested pad-to-multiple guards that Z3 alone gives up on into easy ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from sympy import Expr, Symbol, preorder_traversal

from ..language import formula as F
from ..language.evaluate import Undefined, _eval
from ..problems.ranges import box_truth, tighten
from ..problems.deadline import Deadline, OutOfTime
from ..problems.problem import Problem
from ..problems.classify import LearnedKind, learned_from
from .interval import IntervalStrategy
from ..problems.normalize import Normalizer, SharedForms
from ..problems.recent import Recent
from ..problems.strategy import (
    Outcome, Strategy, check_counterexample, proven, refuted, sample_points, unknown,
)
from ..language.nodes import FLOAT_WRAPPERS, Defined, iter_nodes
from ..language.terms import symbol
from ..problems.tight import TightBounds

__all__ = ["Normalizer", "Reduction", "Reductions", "reduce_problem", "RewriteStrategy", "Simplified"]

# boxes whose normal forms are kept (a trace asks over one box; narrowing and merging over a few)
_BOXES_WITH_FORMS = 4


@dataclass
class Reduction:
    """A problem rewritten into an equivalent one, with the map back for points."""

    problem: Problem
    original: Problem
    substitutions: list[tuple[Symbol, Expr]] = field(default_factory=list)
    fired: dict[str, int] = field(default_factory=dict)
    infeasible: bool = False

    def lift(self, point: dict[Symbol, int]) -> dict[Symbol, int]:
        """A point of the original problem from a point of the reduced one."""
        env = dict(point)
        for sym, expr in reversed(self.substitutions):
            env[sym] = _eval(expr, env, {})
        return {s: env[s] if s in env else _any_value(self.original.ranges[s]) for s in self.original.symbols}


def _any_value(span: tuple) -> int:
    """A value for a symbol that normalization cancelled out of every formula (so any value in range
    works)."""
    lo, hi = span
    return lo if lo is not None else (hi if hi is not None else 0)


class Reductions:
    """Completed reductions by question (``Problem.key``), least recently used dropped first; thread-safe.

    Only reductions that ran to completion are kept, and a reduction runs to
    completion or raises (its bounds never silently loosen at the deadline), so
    a kept reduction is exactly what any call with enough time computes.  What
    the facts alone give (``_FactsReduced``) is kept too, by the facts and their
    symbols' ranges: the questions of one trace share their facts, and
    normalizing Swin-sized facts again for each question was most of the cost.
    And the normal forms found over each of the last few boxes
    (``SharedForms``), which the questions of one trace share.
    """

    def __init__(self, size: int = 256):
        self.size = size
        self._items: Recent[Reduction] = Recent(size)
        self._facts: Recent[_FactsReduced] = Recent(size)
        self._forms: Recent[SharedForms] = Recent(_BOXES_WITH_FORMS)

    def release(self) -> None:
        """Drop the shared normal forms (kept only to answer faster; the reductions stay)."""
        self._forms.clear()

    def forms(self, ranges: dict) -> SharedForms:
        """The normal forms found so far over exactly these ranges (the goals of one trace share a box)."""
        return self._forms.get_or_make(tuple(sorted(ranges.items(), key=lambda item: item[0].name)),
                                       SharedForms)

    def get(self, key: tuple) -> Reduction | None:
        return self._items.get(key)

    def put(self, key: tuple, reduction: Reduction) -> None:
        self._items.put(key, reduction)

    def facts_reduced(self, problem: Problem, deadline: Deadline | None) -> _FactsReduced:
        return self._facts.get_or_make(_facts_key(problem), lambda: _reduce_facts(problem, deadline))


def reduce_problem(problem: Problem, deadline: Deadline | None = None,
                   cache: Reductions | None = None) -> Reduction:
    """Substitute what the facts define, tighten ranges, normalize every term (kept in ``cache``).

    A reduction that ran out of time raises and is not remembered at all, so no
    verdict depends on which queries came before.
    """
    cached = cache.get(problem.key) if cache is not None else None
    if cached is not None:
        return cached
    facts = cache.facts_reduced(problem, deadline) if cache is not None else _reduce_facts(problem, deadline)
    reduction = _reduce(problem, facts, deadline, cache)
    if cache is not None:
        cache.put(problem.key, reduction)
    return reduction


@dataclass(frozen=True)
class _FactsReduced:
    """What a problem's facts give whatever its goal: the substitutions they define, the change of
    symbols that makes (eliminated, introduced), and the remaining facts normalized over their tightened
    ranges (``tightened`` None: no point satisfies them)."""

    substitutions: tuple[tuple[Symbol, Expr], ...]
    eliminated: frozenset[Symbol]
    introduced: dict[Symbol, tuple]
    facts: tuple[F.Formula, ...]                    # after the substitutions, before normalizing
    symbols: frozenset[Symbol]                      # theirs, and those a substitution introduced
    tightened: dict[Symbol, tuple] | None           # the ranges of ``symbols``, narrowed
    normalized: tuple[F.Formula, ...]
    fired: dict[str, int]


def _fact_symbols(facts) -> set[Symbol]:
    return set().union(*(f.free_symbols for f in facts))


def _facts_key(problem: Problem) -> tuple:
    """The facts and the ranges of their symbols: all a ``_FactsReduced`` depends on."""
    return problem.facts, tuple((s, problem.ranges[s]) for s in sorted(_fact_symbols(problem.facts),
                                                                        key=lambda s: s.name))


def _reduce_facts(problem: Problem, deadline: Deadline | None) -> _FactsReduced:
    """Step 1 for the facts alone: it reads no goal, so every question under the same facts shares it."""
    ranges = {s: problem.ranges[s] for s in _fact_symbols(problem.facts)}
    facts = list(problem.facts)
    subs: list[tuple[Symbol, Expr]] = []
    fired: dict[str, int] = {}

    for _ in range(8):
        changed = False
        for i, fact in enumerate(facts):
            if not isinstance(fact, F.Rel):
                continue
            norm = Normalizer(TightBounds(ranges, deadline, strict=True), deadline)
            nfact = norm.formula(fact)
            if not isinstance(nfact, F.Rel):
                continue
            learned = learned_from(nfact,
                                   lambda candidates: next((s for s in candidates if s in ranges), None))
            if learned is None:
                continue
            if learned.kind is LearnedKind.DIVISIBILITY:
                x, c = cast(Symbol, learned.symbol), cast(int, learned.divisor)
                k = symbol(f"{x.name}/{c}")
                lo, hi = ranges[x]
                ranges[k] = (None if lo is None else -((-lo) // c), None if hi is None else hi // c)
                replacement: Expr = c * k
                new_facts: list[F.Formula] = []
                fired["fact_divisibility"] = fired.get("fact_divisibility", 0) + 1
            else:
                x, replacement = cast(Symbol, learned.symbol), cast(Expr, learned.replacement)
                lo, hi = ranges[x]
                new_facts = [F.rel(op, replacement, bound) for op, bound in ((">=", lo), ("<=", hi))
                             if bound is not None]
                fired["fact_definition"] = fired.get("fact_definition", 0) + 1
            subs.append((x, replacement))
            del ranges[x]
            mapping = {x: replacement}
            facts = [F.substitute(f, mapping) for j, f in enumerate(facts) if j != i] + new_facts
            changed = True
            break
        if not changed:
            break

    eliminated = frozenset(x for x, _ in subs)
    introduced = {s: r for s, r in ranges.items() if s not in problem.ranges}
    # the facts' symbols and those a substitution introduced (``k`` in ``x = 2*k``), which stay in the
    # problem even when nothing mentions them: their range is what the fact said, and ``lift`` needs a value
    derived = {s for _, e in subs for s in e.free_symbols if s in ranges}
    own = _fact_symbols(facts) | derived
    tightened = tighten({s: ranges.get(s, (None, None)) for s in own}, facts)
    normalized: tuple[F.Formula, ...] = ()
    if tightened is not None:
        norm = Normalizer(TightBounds(tightened, deadline, strict=True), deadline)
        normalized = tuple(f for f in (norm.formula(f) for f in facts) if f != F.TRUE)
        for name, count in norm.fired.items():
            fired[name] = fired.get(name, 0) + count
    return _FactsReduced(tuple(subs), eliminated, introduced, tuple(facts), frozenset(own), tightened,
                         normalized, fired)


def _reduce(problem: Problem, reduced: _FactsReduced, deadline: Deadline | None,
            cache: Reductions | None = None) -> Reduction:
    """Steps 1 and 2 for one question: its goal under what the facts gave."""
    ranges = {s: r for s, r in problem.ranges.items() if s not in reduced.eliminated}
    ranges.update(reduced.introduced)
    goal = problem.goal
    for x, replacement in reduced.substitutions:
        goal = F.substitute(goal, {x: replacement})
    subs = list(reduced.substitutions)
    fired = dict(reduced.fired)
    facts = reduced.facts
    # the facts mention none of the goal's other symbols, so tightening leaves those ranges as they are
    syms = set(goal.free_symbols) | reduced.symbols
    if reduced.tightened is None:
        reduced_problem = Problem(goal, facts, tuple(sorted(syms, key=lambda s: s.name)),
                                  {s: ranges.get(s, (None, None)) for s in syms})
        return Reduction(reduced_problem, problem, subs, fired, infeasible=True)
    tightened = {s: ranges.get(s, (None, None)) for s in syms}
    tightened.update(reduced.tightened)
    shared = cache.forms(tightened) if cache is not None else None
    norm = Normalizer(TightBounds(tightened, deadline, strict=True), deadline, shared=shared)
    goal = norm.formula(goal)
    for name, count in norm.fired.items():
        fired[name] = fired.get(name, 0) + count
    normalized = reduced.normalized
    syms = set(goal.free_symbols).union(*(f.free_symbols for f in normalized)) | set(tightened)
    ordered = tuple(sorted(syms, key=lambda s: s.name))
    box: dict[Symbol, tuple] = {}
    for s in ordered:
        box[s] = tightened[s] if s in tightened else ranges.get(s, (None, None))
    result = Problem(goal, normalized, ordered, box)
    infeasible = any(f == F.FALSE for f in normalized)
    return Reduction(result, problem, subs, fired, infeasible)


def _describe(fired: dict[str, int]) -> str:
    """The rules a reduction took, by name (a normal form found by an earlier question over the same box
    counts its rules once: ``SharedForms``)."""
    return ", ".join(sorted(fired)) or "no rules"


def _marked(r: F.Rel) -> F.Formula:
    """``r`` with a ``Defined`` marker for each float wrapper it reads: a rule may cancel a wrapper
    (``w % 1`` is 0), and Python still raises where the wrapper does."""
    wrappers = {n for side in (r.lhs, r.rhs) for n in iter_nodes(side) if isinstance(n, FLOAT_WRAPPERS)}
    return F.rel(r.op, r.lhs, r.rhs, r.divisors | {Defined(w) for w in wrappers})


def _map_relations(f: F.Formula, fn) -> F.Formula:
    if isinstance(f, F.Rel):
        return fn(f)
    if isinstance(f, (F.And, F.Or)):
        return F.rebuilt(f, (_map_relations(a, fn) for a in f.args))
    return f


def float_normal_form(problem: Problem, deadline: Deadline | None) -> Problem | None:
    """A float question with its integer terms normalized (``x // x`` is 1 where ``x != 0``, inside float
    nodes too; float nodes themselves are kept, as Python computes them), then made exact where doubles are
    (``exact_floats``); None where nothing changed.  Every relation keeps its divisors and a ``Defined``
    marker for each float wrapper it read, so it is undefined exactly where it was: an equal question."""
    norm = Normalizer(TightBounds(problem.ranges, deadline, strict=True), deadline)

    def normal(f: F.Formula) -> F.Formula:
        return _map_relations(f, lambda r: norm.formula(_marked(r)) if r.has_floats else norm.formula(r))
    goal, facts = normal(problem.goal), tuple(normal(f) for f in problem.facts)
    if not norm.fired:
        return None
    return Problem.build(goal, problem.ranges, facts)


def completed(problem: Problem, point) -> dict[Symbol, int]:
    """``point`` of a question over fewer symbols (normalization dropped some: ``x - x``), with the value
    nearest to 0 for the others."""
    out = dict(point)
    for s in problem.symbols:
        if s not in out:
            lo, hi = problem.ranges[s]
            out[s] = max(lo, min(0, hi)) if lo is not None and hi is not None else (
                lo if lo is not None and lo > 0 else (hi if hi is not None and hi < 0 else 0))
    return out


class RewriteStrategy(Strategy):
    name = "rewrite"
    open_ended = True       # normalizing a Swin-sized term can take its whole deadline (measured: 17 s of 20)
    # float nodes are kept as they are; the integer terms around and in them normalized
    decides_floats = True

    def __init__(self, reductions: Reductions | None = None):
        self.reductions = reductions

    def release(self) -> None:
        if self.reductions is not None:
            self.reductions.release()

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        if problem.has_floats:
            return self._floats(problem, deadline)
        try:
            red = reduce_problem(problem, deadline, self.reductions)
        except OutOfTime:
            return unknown("the rewrite budget ran out")
        except RecursionError:
            return unknown("the terms are nested too deeply to rewrite")
        if red.infeasible:
            return proven(f"the facts exclude every point in range ({_describe(red.fired)})")
        bounds = TightBounds(red.problem.ranges, deadline)
        always, never = box_truth(red.problem.goal, bounds)
        if always:
            return proven(f"normalized and bounded ({_describe(red.fired)})")
        if never:
            for point in sample_points(red.problem, count=8):
                try:
                    lifted = red.lift(point)
                except Undefined:
                    continue
                if check_counterexample(problem, lifted) is None:
                    return refuted(lifted,
                                   f"after normalization the goal can never hold ({_describe(red.fired)})")
        goal = red.problem.goal
        # printing a large term costs more than the rewriting (Swin's merged pad sizes): name small ones only
        return unknown("normalized form is inconclusive" + (f": {goal}" if _few_nodes(goal) else ""))


    def _floats(self, problem: Problem, deadline: Deadline) -> Outcome:
        """A float question: its normal form (``float_normal_form``), decided by value ranges (or as an
        integer question where no float node is left)."""
        try:
            normal = float_normal_form(problem, deadline)
        except (OutOfTime, RecursionError):
            return unknown("the rewrite budget ran out")
        if normal is None:
            return unknown("no rule applies to the integer terms of the float question")
        outcome = (IntervalStrategy() if normal.has_floats else self).decide(normal, deadline)
        if outcome.counterexample is not None:
            point = completed(problem, outcome.counterexample)
            if check_counterexample(problem, point) is not None:
                return unknown("a counterexample of the normal form that is not one of the question")
            return refuted(point, f"{outcome.reason} (integer terms normalized)")
        return Outcome(outcome.status, f"{outcome.reason} (integer terms normalized)")


def _few_nodes(f: F.Formula, most: int = 60) -> bool:
    """Whether ``f``'s terms have at most ``most`` nodes in all (counting stops there)."""
    count = 0
    for rel in F.relations(f):
        for side in (rel.lhs, rel.rhs):
            for _ in preorder_traversal(side):
                count += 1
                if count > most:
                    return False
    return True


class Simplified(Strategy):
    """Run ``inner`` on the rewritten problem and map its counterexample back (a problem with float nodes,
    which the rules do not rewrite, goes to ``inner`` as it is)."""

    def __init__(self, inner: Strategy, reductions: Reductions | None = None):
        self.inner = inner
        self.reductions = reductions
        self.name = f"rewrite+{inner.name}"
        self.open_ended = inner.open_ended
        self.decides_floats = inner.decides_floats

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        if problem.has_floats:
            try:
                normal = float_normal_form(problem, deadline)
            except (OutOfTime, RecursionError):
                normal = None
            if normal is None:
                return self.inner.decide(problem, deadline)
            outcome = self.inner.decide(normal, deadline)
            if outcome.counterexample is not None:
                point = completed(problem, outcome.counterexample)
                if check_counterexample(problem, point) is not None:
                    return unknown("a counterexample of the normal form that is not one of the question")
                return refuted(point, outcome.reason)
            return outcome
        try:
            red = reduce_problem(problem, deadline, self.reductions)
        except (OutOfTime, RecursionError):
            return self.inner.decide(problem, deadline)
        if red.infeasible:
            return proven("the facts exclude every point in range")
        outcome = self.inner.decide(red.problem, deadline)
        if outcome.counterexample is not None:
            try:
                lifted = red.lift(dict(outcome.counterexample))
            except Undefined:
                return unknown("could not map the counterexample back")
            return refuted(lifted, outcome.reason)
        return outcome
