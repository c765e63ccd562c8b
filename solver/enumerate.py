"""The ``enumerate`` strategy: evaluate the goal at every point of a small box.

Complete on bounded boxes: a proof when no point fails, otherwise the
counterexample that comes first in lexicographic order of the symbols (sorted
by name), i.e. the smallest.  Evaluation is vectorized with numpy int64 in
chunks, which makes a 4k-point single-symbol guard cost about 0.1 ms, 20-50x
less than an SMT call (measured in ../shared/research).  numpy's ``//`` and
``%`` on integers follow Python's floor semantics; division by zero is masked
out through the relation's divisors.  Terms whose bounds could leave int64
are refused (UNKNOWN) rather than risk wrap-around.
"""
from __future__ import annotations

import numpy as np
import sympy
from sympy import Expr, Symbol

from . import formula as F
from .problem import Deadline, Problem
from .strategy import Outcome, Strategy, proven, refuted, unknown
from .terms import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv

__all__ = ["EnumerateStrategy", "holds_along"]

_SAFE_MAGNITUDE = 2 ** 62


def _safe(divisor: np.ndarray) -> np.ndarray:
    return np.where(divisor == 0, 1, divisor)


class _Vectorized:
    """Evaluates terms and Kleene truth values over arrays of points."""

    def __init__(self, env: dict[Symbol, np.ndarray]):
        self.env = env
        self.memo: dict[Expr, np.ndarray] = {}

    def term(self, t: Expr):
        if t.is_Integer:
            return np.int64(int(t))
        cached = self.memo.get(t)
        if cached is not None:
            return cached
        value = self._compute(t)
        self.memo[t] = value
        return value

    def _compute(self, t: Expr):
        if isinstance(t, Symbol):
            return self.env[t]
        args = [self.term(a) for a in t.args]
        if isinstance(t, sympy.Add):
            out = args[0]
            for a in args[1:]:
                out = out + a
            return out
        if isinstance(t, sympy.Mul):
            out = args[0]
            for a in args[1:]:
                out = out * a
            return out
        if isinstance(t, sympy.Pow):
            return args[0] ** int(t.args[1])
        if isinstance(t, FloorDiv):
            return args[0] // _safe(args[1])
        if isinstance(t, Mod):
            return args[0] % _safe(args[1])
        if isinstance(t, CeilDiv):
            return -((-args[0]) // _safe(args[1]))
        if isinstance(t, TruncDiv):
            a, b = args[0], _safe(args[1])
            q = np.abs(a) // np.abs(b)
            return np.where((a >= 0) == (b > 0), q, -q)
        if isinstance(t, Min):
            return np.minimum.reduce(np.broadcast_arrays(*args))
        if isinstance(t, Max):
            return np.maximum.reduce(np.broadcast_arrays(*args))
        raise TypeError(f"not an integer term: {t}")

    def truth(self, f: F.Formula, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Masks of the points where ``f`` is (defined and true, defined and false)."""
        if isinstance(f, F.Const):
            full = np.full(size, f.value)
            return full, ~full
        if isinstance(f, F.Rel):
            defined = np.ones(size, dtype=bool)
            for d in f.divisors:
                defined &= np.broadcast_to(self.term(d) != 0, (size,))
            holds = np.broadcast_to(f.holds_for(self.term(f.lhs) - self.term(f.rhs)), (size,))
            return defined & holds, defined & ~holds
        parts = [self.truth(a, size) for a in f.args]
        if isinstance(f, F.And):
            return np.logical_and.reduce([p[0] for p in parts]), np.logical_or.reduce([p[1] for p in parts])
        return np.logical_or.reduce([p[0] for p in parts]), np.logical_and.reduce([p[1] for p in parts])


def _magnitude(t: Expr, box: dict, memo: dict) -> int:
    """A bound on |value| of ``t`` and of every partial sum or product computed for it."""
    if t.is_Integer:
        return abs(int(t))
    if t in memo:
        return memo[t]
    if isinstance(t, Symbol):
        m = box[t]
    else:
        args = [_magnitude(a, box, memo) for a in t.args]
        if isinstance(t, sympy.Add):
            m = sum(args)
        elif isinstance(t, sympy.Mul):
            m = 1
            for a in args:
                m *= a
        elif isinstance(t, sympy.Pow):
            m = args[0] ** int(t.args[1])
        elif isinstance(t, Mod):
            m = args[1]  # |a % b| < |b|; a zero divisor is replaced by 1
        else:  # floor/ceil/trunc division (|quotient| <= |dividend|), min, max
            m = max(args)
    memo[t] = m
    return m


def _fits_int64(problem: Problem) -> bool:
    box = {s: max(abs(lo), abs(hi)) for s, (lo, hi) in problem.ranges.items()}
    memo: dict = {}
    for f in (problem.goal, *problem.facts):
        for rel in F.relations(f):
            terms = (rel.lhs, rel.rhs, *rel.divisors)
            if sum(_magnitude(t, box, memo) for t in terms) >= _SAFE_MAGNITUDE:
                return False
    return True


class EnumerateStrategy(Strategy):
    """Exhaustive check of boxes up to ``max_points`` points."""

    name = "enumerate"

    def __init__(self, max_points: int = 4_000_000, chunk: int = 1 << 16):
        self.max_points = max_points
        self.chunk = chunk

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        if not problem.bounded:
            return unknown("a range is unbounded, so the box cannot be enumerated")
        size = problem.box_size
        if size > self.max_points:
            return unknown(f"the box has {size} points, more than the {self.max_points} this strategy enumerates")
        if not _fits_int64(problem):
            return unknown("intermediate values could exceed int64")
        lows = [problem.ranges[s][0] for s in problem.symbols]
        shape = tuple(problem.ranges[s][1] - lo + 1 for s, lo in zip(problem.symbols, lows)) or (1,)
        for start in range(0, size, self.chunk):
            if deadline.expired():
                return unknown(f"out of time after {start} of {size} points")
            flat = np.arange(start, min(size, start + self.chunk), dtype=np.int64)
            coords = np.unravel_index(flat, shape)
            env = {s: (c + lo).astype(np.int64) for s, c, lo in zip(problem.symbols, coords, lows)}
            vec = _Vectorized(env)
            facts_hold = np.ones(len(flat), dtype=bool)
            for fact in problem.facts:
                facts_hold &= vec.truth(fact, len(flat))[0]
            failing = facts_hold & ~vec.truth(problem.goal, len(flat))[0]
            if failing.any():
                i = int(np.argmax(failing))
                point = {s: int(env[s][i]) for s in problem.symbols}
                return refuted(point, f"smallest counterexample among {size} points")
        return proven(f"checked all {size} points")


def holds_along(f: F.Formula, sym: Symbol, lo: int, hi: int) -> np.ndarray:
    """Mask over ``lo..hi`` of the values of ``sym`` where ``f`` (in ``sym`` only) holds."""
    values = np.arange(lo, hi + 1, dtype=np.int64)
    problem = Problem(f, (), (sym,), {sym: (lo, hi)})
    if not _fits_int64(problem):
        raise OverflowError("values could exceed int64")
    return _Vectorized({sym: values}).truth(f, len(values))[0]
