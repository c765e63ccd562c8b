"""torch's own shape reasoning as one more solver strategy (``strategy="torch"``), for comparisons.

The question goes to a fresh torch ``ShapeEnv`` the way torch asks it while
tracing: the symbols get the query's ranges as value ranges, the facts are
passed as axioms, and ``_maybe_evaluate_static`` answers True, False or
nothing.  torch gives no counterexample, so a False answer is turned into
a refutation only when one of a few sample points (or a small exhaustive
scan) shows it; otherwise it is reported as unknown.  torch's value-range
reasoning is not exact (it proves ``TruncDiv(x, y) <= y - 4`` over
``x in [-3, -2], y in [3, 4]``, false at ``x = -2, y = 3``), so a True answer
is scanned on boxes of up to ``_SCAN_LIMIT`` points before it is a proof, and
a point the scan finds is a refutation.  Chosen explicitly: pass a
``TorchStrategy()`` (or ``strategy="torch"`` to ``shapeproof.export``, which
resolves the name with ``strategy_named``); ``solver`` itself never imports torch.
"""
from __future__ import annotations

import sympy
from sympy import Expr, Symbol

from shapeproof import solver as S
from shapeproof.solver import (
    Deadline, EnumerateStrategy, Outcome, Problem, Status, Strategy, Unmodelled, check_counterexample, proven,
    refuted, row_of, sample_points, unknown,
)

from . import torch_internals as T

__all__ = ["TorchStrategy", "strategy_named"]

_SCAN_LIMIT = 20_000


class _ToTorch:
    """shapeproof terms -> torch's sympy functions: each node's ``torch`` column (``solver.nodes``)."""

    def __init__(self, names: dict[Symbol, Symbol]):
        self.names = names

    def term(self, e: Expr) -> Expr:
        if isinstance(e, Symbol):
            return self.names[e]
        if e.is_Integer:
            return e
        try:
            row = row_of(e)
        except TypeError:
            raise ValueError(f"no torch form for {e}") from None
        if isinstance(row.torch, Unmodelled):
            raise ValueError(f"no torch form for {e}: {row.torch.why}")
        return row.torch(T, *(self.term(a) for a in e.args))

    def condition(self, f: S.Formula):
        if isinstance(f, S.Const):
            return sympy.true if f.value else sympy.false
        if isinstance(f, S.Rel):
            op = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt,
                  ">=": sympy.Ge}[f.op]
            return op(self.term(f.lhs), self.term(f.rhs))
        parts = [self.condition(a) for a in f.args]
        return sympy.And(*parts) if isinstance(f, S.And) else sympy.Or(*parts)


def _torch_range(lo, hi):
    return T.ValueRanges(T.NegativeIntInfinity() if lo is None else lo, T.IntInfinity() if hi is None else hi)


class TorchStrategy(Strategy):
    """What torch 2.13's ShapeEnv decides statically about the query."""

    name = "torch"

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        env = T.TorchShapeEnv()
        names = {s: sympy.Symbol(f"s{i}", integer=True) for i, s in enumerate(problem.symbols)}
        for s, torch_sym in names.items():
            env.var_to_range[torch_sym] = _torch_range(*problem.ranges[s])
        convert = _ToTorch(names)
        try:
            goal = convert.condition(problem.goal)
            axioms = tuple(convert.condition(f) for f in problem.facts)
            answer = goal if goal in (sympy.true, sympy.false) else env._maybe_evaluate_static(
                goal, axioms=axioms or None)
        except ValueError as exc:
            return unknown(str(exc))
        except ZeroDivisionError:   # torch's sympy functions evaluate a constant zero divisor eagerly
            return unknown("torch cannot reason about a division by zero")
        except AssertionError as exc:   # torch's canonicalization meets a part its simplification folded
            return unknown(f"torch's static evaluation fails on it: {exc}")
        if answer is None:
            return unknown("torch's static evaluation left it open")
        if bool(answer):
            # torch takes every divisor to be nonzero; shapeproof's goals are false where one is zero
            for d in sorted({d for r in S.relations(problem.goal) for d in r.divisors}, key=str):
                if env._maybe_evaluate_static(sympy.Ne(convert.term(d), 0),
                                              axioms=axioms or None) is not sympy.true:
                    return unknown("torch decides it assuming a divisor is nonzero, which it cannot show")
            point = self._scan(problem, deadline)
            if point is not None:
                return refuted(point, "torch's ShapeEnv decides it true, but it fails here")
            return proven("torch's ShapeEnv decides it statically")
        point = self._witness(problem, deadline)
        if point is None:
            return unknown("torch decides it false, but no counterexample was found to confirm")
        return refuted(point, "torch's ShapeEnv decides it false")

    def _witness(self, problem: Problem, deadline: Deadline):
        for point in sample_points(problem, count=12):
            if check_counterexample(problem, point) is None:
                return point
        return self._scan(problem, deadline)

    @staticmethod
    def _scan(problem: Problem, deadline: Deadline):
        """The smallest counterexample of a box of at most ``_SCAN_LIMIT`` points, by enumeration."""
        size = problem.box_size             # None when a range is unbounded
        if size is None or size > _SCAN_LIMIT:
            return None
        outcome = EnumerateStrategy(max_points=_SCAN_LIMIT).decide(problem, deadline)
        return outcome.counterexample if outcome.status is Status.REFUTED else None


def strategy_named(choice):
    """``choice`` with the name ``"torch"`` made the strategy itself (solvers know the engine's own by
    name)."""
    return TorchStrategy() if choice == TorchStrategy.name else choice
