"""``Solver``: the solver's one object, which owns its strategies, their caches and their budgets.

Modelled on TVM's ``arith.Analyzer``: every question an upper layer asks goes
through one of these, and nothing else in the solver keeps state between
calls.  What it keeps is a cache of decided verdicts (the cascade's) and of
completed rewrites, each keyed by the whole question (goal, facts, ranges), so
no verdict depends on the questions asked before it except by being found
sooner.  Strategies are registered explicitly: the tracer adds torch's own
reasoning (``tracer.torch_strategy``) to the solvers that want it.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from sympy import Expr, Symbol

from .language import formula as F
from .strategies.cascade import Cascade
from .problems.classify import Learned, classify_fact
from .strategies.enumerate import EnumerateStrategy
from .language.evaluate import evaluate_term
from .strategies.interval import IntervalStrategy
from .language.parse import ParseError, parse
from .problems.bounds import Bounds
from .problems.deadline import Deadline, OutOfTime
from .problems.problem import Problem, normalize_ranges
from .strategies.rewrite import Normalizer, Reductions, RewriteStrategy
from .strategies.smt import Z3Strategy
from .problems.strategy import Strategy
from .problems.tight import TightBounds
from .problems.verdict import Verdict

__all__ = ["Solver", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 2.0


class Solver:
    """Strategies by name (``interval``, ``rewrite``, ``enumerate``, ``z3``, ``cascade``, and any registered),
    the caches they share, and the default time budget of a question."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, cache_size: int = 8192):
        self.timeout = timeout
        self.reductions = Reductions()
        self.cascade = Cascade(cache_size=cache_size, reductions=self.reductions)
        self.strategies: dict[str, Strategy] = {}
        for strategy in (IntervalStrategy(), RewriteStrategy(self.reductions), EnumerateStrategy(),
                         Z3Strategy(), self.cascade):
            self.register(strategy)

    def release(self) -> None:
        """Drop the memory strategies keep to answer faster (enumeration's node values); verdicts stay."""
        for strategy in self.strategies.values():
            strategy.release()

    def register(self, strategy: Strategy) -> Strategy:
        """Make ``strategy`` answerable by its name on this solver."""
        self.strategies[strategy.name] = strategy
        return strategy

    def strategy(self, choice: str | Strategy) -> Strategy:
        """The strategy called ``choice`` (or ``choice`` itself)."""
        if isinstance(choice, Strategy):
            return choice
        if isinstance(choice, str):
            try:
                return self.strategies[choice]
            except KeyError:
                known = sorted(self.strategies)
                raise ValueError(f"unknown strategy {choice!r}; choose one of {known}") from None
        raise TypeError(f"not a strategy: {choice!r}")

    def prove(self, goal, ranges: Mapping | None = None, facts: Iterable = (),
              strategy: str | Strategy = "cascade", timeout: float | None = None) -> Verdict:
        """Prove ``goal`` for every value in ``ranges`` where all ``facts`` hold (see ``api.prove``)."""
        deadline = Deadline(self.timeout if timeout is None else timeout)   # it covers reading the guard too
        chosen = self.strategy(strategy)
        return chosen.verdict(Problem.build(goal, ranges, facts), deadline)

    def simplify(self, expression, ranges: Mapping | None = None, timeout: float | None = None):
        """The rewrite strategy's normal form of a term or condition over ``ranges`` (the parsed input as it
        is when ``timeout`` runs out first)."""
        value = parse(expression) if isinstance(expression, str) else expression
        normalizer = self._normalizer(ranges, timeout)
        try:
            return normalizer.formula(value) if isinstance(value, F.Formula) else normalizer(value)
        except OutOfTime:
            return value

    def bounds(self, expression, ranges: Mapping | None = None,
               timeout: float | None = None) -> tuple[int | None, int | None]:
        """``(lo, hi)`` of a term over ``ranges`` after normalization (None where unbounded or empty); the
        plain interval of the term when ``timeout`` runs out first."""
        term = parse(expression) if isinstance(expression, str) else expression
        if isinstance(term, F.Formula):
            raise ParseError("bounds takes a term, not a condition", str(expression))
        normalizer = self._normalizer(ranges, timeout)
        try:
            interval = normalizer.bounds.tight(normalizer(term))
        except OutOfTime:
            interval = Bounds(normalize_ranges(ranges))(term)
        return (None, None) if interval is None else (_finite(interval.lo), _finite(interval.hi))

    @staticmethod
    def evaluate(term: Expr, point: Mapping) -> int:
        """The exact value of ``term`` at ``point`` (raises ``Undefined`` where Python would raise)."""
        return evaluate_term(term, point)

    def classify_fact(self, fact: F.Formula, ranges: Mapping[Symbol, tuple],
                      prefer_eliminating: Callable[[list[Symbol]], Symbol | None]) -> Learned:
        """What ``fact`` can teach: a substitution, a divisibility, or a plain fact (see ``classify``)."""
        return classify_fact(fact, ranges, prefer_eliminating)

    def _normalizer(self, ranges, timeout) -> Normalizer:
        deadline = Deadline(self.timeout if timeout is None else timeout)
        return Normalizer(TightBounds(normalize_ranges(ranges), deadline), deadline)


def _finite(value) -> int | None:
    return None if value in (float("inf"), float("-inf")) else int(value)
