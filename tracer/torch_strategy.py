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
a point the scan finds is a refutation.  Registered under
``shapeproof.solver.STRATEGIES["torch"]`` when ``shapeproof.tracer`` is
imported (``solver`` itself never imports torch).
"""
from __future__ import annotations

import sympy
from shapeproof.solver import formula as F
from shapeproof.solver.api import STRATEGIES
from shapeproof.solver.problem import Deadline, Problem
from shapeproof.solver.strategy import (
    Outcome,
    Strategy,
    check_counterexample,
    proven,
    refuted,
    sample_points,
    unknown,
)
from shapeproof.solver.terms import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv
from sympy import Expr, Symbol

from . import torch_internals as T

__all__ = ["TorchStrategy", "register"]

_SCAN_LIMIT = 20_000


class _ToTorch:
    """shapeproof terms -> torch's sympy functions (Python semantics: PythonMod, FloorDiv)."""

    def __init__(self, names: dict[Symbol, Symbol]):
        self.names = names

    def term(self, e: Expr) -> Expr:
        if isinstance(e, Symbol):
            return self.names[e]
        if e.is_Integer:
            return e
        args = [self.term(a) for a in e.args]
        if isinstance(e, FloorDiv):
            return T.FloorDiv(*args)
        if isinstance(e, Mod):
            return T.PythonMod(*args)
        if isinstance(e, CeilDiv):
            return -T.FloorDiv(-args[0], args[1])
        if isinstance(e, TruncDiv):
            return T.TruncToInt(T.IntTrueDiv(*args))
        if isinstance(e, Min):
            return T.Min(*args)
        if isinstance(e, Max):
            return T.Max(*args)
        if isinstance(e, (sympy.Add, sympy.Mul, sympy.Pow)):
            return e.func(*args)
        raise ValueError(f"no torch form for {e}")

    def condition(self, f: F.Formula):
        if isinstance(f, F.Const):
            return sympy.true if f.value else sympy.false
        if isinstance(f, F.Rel):
            op = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge}[f.op]
            return op(self.term(f.lhs), self.term(f.rhs))
        parts = [self.condition(a) for a in f.args]
        return sympy.And(*parts) if isinstance(f, F.And) else sympy.Or(*parts)


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
        if answer is None:
            return unknown("torch's static evaluation left it open")
        if bool(answer):
            # torch takes every divisor to be nonzero; shapeproof's goals are false where one is zero
            for d in sorted({d for r in F.relations(problem.goal) for d in r.divisors}, key=str):
                if env._maybe_evaluate_static(sympy.Ne(convert.term(d), 0), axioms=axioms or None) is not sympy.true:
                    return unknown("torch decides it assuming a divisor is nonzero, which it cannot show")
            if problem.bounded and self._box_points(problem) <= _SCAN_LIMIT:
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
        if problem.bounded and self._box_points(problem) <= _SCAN_LIMIT:
            return self._scan(problem, deadline)
        return None

    @staticmethod
    def _box_points(problem: Problem) -> int:
        total = 1
        for lo, hi in problem.ranges.values():
            total *= hi - lo + 1
        return total

    def _scan(self, problem: Problem, deadline: Deadline):
        import itertools

        axes = [range(lo, hi + 1) for lo, hi in (problem.ranges[s] for s in problem.symbols)]
        for k, values in enumerate(itertools.product(*axes)):
            if k % 1024 == 0 and deadline.expired():
                return None
            point = dict(zip(problem.symbols, values))
            if check_counterexample(problem, point) is None:
                return point
        return None


def register() -> None:
    STRATEGIES.setdefault("torch", TorchStrategy())
