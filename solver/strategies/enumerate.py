"""The ``enumerate`` strategy: evaluate the goal at every point of a small box.

Complete on bounded boxes: a proof when no point fails, otherwise the
counterexample that comes first in lexicographic order of the symbols (sorted
by name), i.e. the smallest.  Evaluation is vectorized with numpy int64 in
chunks, which makes a 4k-point single-symbol guard cost about 0.1 ms, 20-50x
less than an SMT call (measured on torch 2.13's test guards).  The box is a grid
with one axis per symbol, and each symbol's values an array along its own
axis, so numpy broadcasting evaluates every subterm over the symbols it
mentions only: a term in ``H`` costs one value per ``H``, however many other
dims the facts bring into the box (a Swin trace asks over a thousand
questions of one dim's pads over a 90,000-point box of three dims).

numpy's ``//`` and ``%`` on integers follow Python's floor semantics;
division by zero is masked out through the relation's divisors.  Where a
value that matters could leave int64 the box is refused (UNKNOWN) rather than
decided from wrapped values.

Float nodes (``floats.py``) are evaluated in numpy float64, which is IEEE
double arithmetic as Python's floats are (``**`` by Python's own, lane by
lane); a lane where Python would raise (division by zero, ``math.sqrt`` of a
negative) is undefined, and the box is refused where a float would
not be finite, where an int converted to float or compared with a float
exceeds 2**53 (Python's int/float rules differ from numpy's there), or where a
rounded value leaves int64.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import sympy
from sympy import Expr, Symbol

from ..language import formula as F
from ..language.nodes import FLOAT_WRAPPERS, FloatTerm, Kind, row_of
from ..problems.deadline import Deadline
from ..problems.problem import Problem
from ..problems.recent import Recent
from ..problems.strategy import Outcome, Strategy, proven, refuted, unknown
from ..language.terms import iter_nodes

__all__ = ["EnumerateStrategy", "holds_along", "holding_grid", "Grid", "failing_among", "grid_work",
           "PointsEvaluator"]

_SAFE_MAGNITUDE = 2.0 ** 62      # half of int64's range: room for float rounding in the magnitude shadow
_RECENT_BOXES = 4                # chunk evaluators kept between questions
# node arrays kept between questions, all boxes together.  Measured on the Swin cases (the ones with
# boxes of 350,000 points and hundreds of questions each): 16 MB kept cost 35-40 MB of peak RSS
# (swin_window_partition_nobranch 490 -> 455 MB, hf_swinv2 515 -> 480 MB at 4 MB) for a solver-time
# difference within run-to-run noise on the first and +15% on the second (a chunk of such a box holds
# more than 4 MB after one question, so its evaluator is dropped, but the small boxes' ones are kept)
_RECENT_BYTES = 4 << 20


def _union(masks):
    out: np.ndarray | bool = False
    for mask in masks:
        out = out | mask
    return out


def _intersection(masks):
    out: np.ndarray | bool = True
    for mask in masks:
        out = out & mask
    return out


class _Overflow(Exception):
    """An intermediate value that floor semantics depend on may lie outside int64."""


def _largest(value) -> np.float64:
    """The largest ``|value|`` (as a double, rounded up: the bound must not fall below it)."""
    top = np.max(np.abs(value)) if np.size(value) else 0
    return np.nextafter(np.float64(top), np.inf)


def _safe(divisor: np.ndarray) -> np.ndarray:
    return np.where(divisor == 0, 1, divisor)


class _Vectorized:
    """Evaluates terms and truth values (Python's and/or) over arrays of points, exactly or not at all.

    Each node's value is its row's ``numpy`` column (``nodes.py``); this class
    keeps it exact.  int64 ``+ - *`` are exact modulo 2**64, so a polynomial
    whose true value fits comes out right even if a partial result wrapped;
    only values read by something else (``//``, ``%``, min/max, a comparison,
    a zero test) must truly fit.  Beside each value the evaluator keeps a float
    *magnitude*: the polynomial with every sign made positive, evaluated on the
    largest ``|value|`` each of its leaves (symbols and non-ring nodes) takes
    over the chunk, which bounds the true value everywhere there and is itself
    computed with only relative rounding error.  A read of a value whose
    magnitude reaches 2**62 raises ``_Overflow``.  The leaves' bounds are the
    values' own maxima, not interval bounds, so it refuses only where values are
    really large; and being one number per node, the shadow costs no array.
    """

    def __init__(self, env: dict[Symbol, np.ndarray]):
        self.env = env
        self.memo: dict[Expr, tuple] = {}
        self.float_memo: dict[Expr, tuple] = {}
        self.bad: dict[Expr, np.ndarray] = {}       # float wrapper -> lanes where Python raises
        # bytes its memos hold, counted as entries arrive: summing them after every chunk cost as much
        # as evaluating it (hf_swinv2: 0.8 of 1.5 s)
        self._held = 0

    def nbytes(self) -> int:
        """What its memos hold (each array only as large as the axes of its node's symbols)."""
        return self._held

    def _remember(self, memo: dict, node: Expr, entry):
        """``memo[node] = entry`` (an array, or a (value, magnitude) pair), counting its bytes."""
        memo[node] = entry
        self._held += sum(np.asarray(a).nbytes for a in (entry if isinstance(entry, tuple) else (entry,)))
        return entry

    def term(self, t: Expr):
        """Exact int64 value of ``t`` (raises ``_Overflow`` if it may not fit)."""
        value, magnitude = self._pair(t)
        if not np.all(magnitude < _SAFE_MAGNITUDE):     # NaN (0*inf) counts as too large
            raise _Overflow(t)
        return value

    def _pair(self, t: Expr):
        if t.is_Integer:
            if abs(int(t)) >= _SAFE_MAGNITUDE:
                raise _Overflow(t)
            return np.int64(int(t)), np.float64(abs(int(t)))
        cached = self.memo.get(t)
        if cached is None:
            cached = self._remember(self.memo, t, self._compute(t))
        return cached

    def _compute(self, t: Expr):
        if isinstance(t, Symbol):
            value = self.env[t]
            return value, _largest(value)
        row = row_of(t)
        if row.kind is Kind.RING:
            return self._ring(t, row)
        if row.is_float:
            raise TypeError(f"not an integer term: {t}")
        if row.is_wrapper:
            value = self._wrapper(t, row)
        else:
            args = [self.term(a) for a in t.args]
            if row.divisor is not None:
                args[row.divisor] = _safe(args[row.divisor])      # those lanes are undefined anyway
            value = row.numpy(*args)
        return value, _largest(value)

    def _ring(self, t: Expr, row):
        """The value and its magnitude shadow, both by the row's ``numpy`` column."""
        with np.errstate(over="ignore"):
            if row.cls is sympy.Pow:
                (base, base_mag), n = self._pair(t.args[0]), int(t.args[1])
                return row.numpy(base, n), row.numpy(base_mag, n)
            pairs = [self._pair(a) for a in t.args]
            return row.numpy(*(v for v, _ in pairs)), row.numpy(*(m for _, m in pairs))

    # -- float nodes ------------------------------------------------------------------
    def _bad_in(self, t: Expr):
        """Lanes where a float wrapper inside the integer term ``t`` is undefined.

        A numpy boolean even where no lane is: ``~`` of Python's ``False`` is ``-1``, which turned a
        relation's truth masks into integers that ``~`` then made nonzero everywhere.
        """
        bad: np.ndarray | np.bool_ = np.bool_(False)
        for node in iter_nodes(t):
            if isinstance(node, FLOAT_WRAPPERS):
                if node not in self.bad:
                    self.term(node)
                bad = bad | self.bad[node]
        return bad

    def _operand(self, a: Expr, row):
        """``(float64 values, undefined lanes)`` of an operand of the float node ``row``.

        An int operand is refused where it may reach ``row.exact_ints_below``: numpy converts it to a
        double before operating, Python does not (``a / b`` rounds once, ``x < 0.5`` compares exactly).
        """
        if isinstance(a, FloatTerm):
            cached = self.float_memo.get(a)
            if cached is None:
                cached = self._remember(self.float_memo, a, self._float(a))
            return cached
        if row.exact_ints_below >= _SAFE_MAGNITUDE:
            value = self.term(a)
        else:
            value, magnitude = self._pair(a)
            if not np.all(magnitude <= row.exact_ints_below):
                raise _Overflow(a)
        return np.asarray(value).astype(np.float64), self._bad_in(a)

    def _float(self, f: Expr):
        row = row_of(f)
        if row.kind is Kind.FLOAT_CONST:
            return row.numpy(f.value), False
        with np.errstate(all="ignore"):
            operands = [self._operand(a, row) for a in f.args]
            values = [v for v, _ in operands]
            bad = _union(b for _, b in operands)
            if row.divisor is not None:                 # Python raises ZeroDivisionError there
                zero = values[row.divisor] == 0
                bad = bad | zero
                values[row.divisor] = np.where(zero, 1.0, values[row.divisor])
            value = row.numpy(*values)
            if row.undefined_where_not_finite:          # Python raises there (math.sqrt(-1.0), 10.0 ** 400)
                bad = bad | ~np.isfinite(value)
        if not np.all(np.isfinite(value) | bad):
            raise _Overflow(f)
        return value, bad

    def _wrapper(self, node: Expr, row):
        if row.kind is Kind.DEFINED:
            self.term(node.args[0])
            self._remember(self.bad, node, self.bad[node.args[0]])
            return row.numpy(None)
        operands = [self._operand(a, row) for a in node.args]
        bad = _union(b for _, b in operands)
        with np.errstate(all="ignore"):
            value = row.numpy(*(v for v, _ in operands))
            if row.kind is Kind.ROUNDING:
                if not np.all((np.abs(value) < _SAFE_MAGNITUDE) | bad):
                    raise _Overflow(node)
                value = np.where(bad, 0.0, value)
        self._remember(self.bad, node, bad)
        return np.asarray(value).astype(np.int64)

    def truth(self, f: F.Formula, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
        """Masks of the points where ``f`` is (defined and true, defined and false), of ``shape``."""
        true, false = self._truth(f)
        return np.broadcast_to(true, shape), np.broadcast_to(false, shape)

    def _truth(self, f: F.Formula):
        """``truth`` over the axes of ``f``'s own symbols (masks that broadcast to the box)."""
        if isinstance(f, F.Const):
            return np.bool_(f.value), np.bool_(not f.value)
        if isinstance(f, F.Rel):
            defined = np.bool_(True)
            for d in f.divisors:
                defined = defined & (self.term(d) != 0)
            (lhs, lhs_mag), (rhs, rhs_mag) = self._pair(f.lhs), self._pair(f.rhs)
            if self.bad:
                for t in (f.lhs, f.rhs, *f.divisors):
                    defined = defined & ~self._bad_in(t)
            if not np.all(lhs_mag + rhs_mag < _SAFE_MAGNITUDE):
                raise _Overflow(f)
            with np.errstate(over="ignore"):
                holds = f.holds_for(lhs - rhs)
            return defined & holds, defined & ~holds
        stop_true = isinstance(f, F.Or)
        if not f.ordered:           # sympy's And/Or: any operand that decides does, wherever it stands
            parts = [self._truth(a) for a in f.args]
            trues, falses = _union(t for t, _ in parts), _intersection(fl for _, fl in parts)
            return (trues, falses) if stop_true else (_intersection(t for t, _ in parts),
                                                      _union(fl for _, fl in parts))
        # Python's left-to-right and/or: a later operand decides only where the earlier ones let it.
        decided_true, decided_false = np.bool_(False), np.bool_(False)
        going = np.bool_(True)
        for a in f.args:
            t, fl = self._truth(a)
            if stop_true:
                decided_true = decided_true | (going & t)      # not in place: the axes may grow
                going = going & fl
            else:
                decided_false = decided_false | (going & fl)
                going = going & t
        if stop_true:
            return decided_true, going
        return going, decided_false

    def failing(self, problem: Problem, shape: tuple) -> np.ndarray:
        """Points where every fact holds and the goal is not true: the problem's counterexamples."""
        facts_hold = np.bool_(True)
        for fact in problem.facts:
            facts_hold = facts_hold & self._truth(fact)[0]
        return np.broadcast_to(facts_hold & ~self._truth(problem.goal)[0], shape)


def grid_work(problem: Problem) -> int | None:
    """Array elements the grid evaluation computes: each distinct subterm over its own symbols' axes
    (a relation's truth over the axes of all its symbols), or None for an unbounded box."""
    if problem.box_size is None:
        return None
    counts = {s: max(0, hi - lo + 1) for s, (lo, hi) in problem.ranges.items()}
    own: dict[Expr, frozenset] = {}          # each distinct subterm's symbols, children first
    work = 0
    for f in (problem.goal, *problem.facts):
        for r in F.relations(f):
            sides = (r.lhs, r.rhs, *r.divisors)
            stack = [(side, False) for side in sides]
            while stack:                     # iterative: a deep term must not exhaust Python's stack
                node, children_done = stack.pop()
                if node in own:
                    continue
                if isinstance(node, Symbol) or not node.args:
                    own[node] = frozenset((node,)) if isinstance(node, Symbol) else frozenset()
                elif children_done:
                    own[node] = frozenset().union(*(own[a] for a in node.args))
                else:
                    stack.append((node, True))
                    stack.extend((a, False) for a in node.args if a not in own)
            work += math.prod(counts[s] for s in frozenset().union(*(own[side] for side in sides)))
    return work + sum(math.prod(counts[s] for s in syms) for syms in own.values())


class EnumerateStrategy(Strategy):
    """Exhaustive check of boxes up to ``max_points`` points, or of larger ones up to ``max_work`` array
    elements (``grid_work``: a box of many points whose terms each mention few of its symbols)."""

    name = "enumerate"
    decides_floats = True

    def __init__(self, max_points: int = 4_000_000, chunk: int = 1 << 18, max_work: int = 0,
                 max_work_points: int = 4_000_000):
        self.max_points = max_points
        self.max_work = max_work
        self.max_work_points = max_work_points
        self.chunk = chunk
        # evaluators of recent chunks, by box and chunk: the guards of one trace share their box and most
        # subterms (Swin's view sizes recur in hundreds of them), so a node is evaluated once per box
        self._recent: Recent[_Vectorized] = Recent(_RECENT_BOXES)

    def _evaluator(self, key: tuple, make_env) -> _Vectorized:
        return self._recent.get_or_make(key, lambda: _Vectorized(make_env()))

    def release(self) -> None:
        self._recent.clear()

    def _forget_if_large(self) -> None:
        """Drop the oldest evaluators while all of them hold more than ``_RECENT_BYTES`` of node arrays."""
        self._recent.drop_oldest_while(lambda kept: sum(v.nbytes() for v in kept) > _RECENT_BYTES)

    def covers(self, problem: Problem) -> bool:
        """Whether this strategy can decide ``problem`` given time (a box it enumerates, in int64)."""
        return self._too_large(problem) is None and _in_int64(problem.ranges.values())

    def _too_large(self, problem: Problem) -> str | None:
        size = problem.box_size
        if size is None:
            return "a range is unbounded, so the box cannot be enumerated"
        if size <= self.max_points:
            return None
        if not self.max_work:
            return f"the box has {size} points, more than the {self.max_points} this strategy enumerates"
        work = grid_work(problem) if size <= self.max_work_points else None
        if work is not None and work <= self.max_work:
            return None
        return (f"the box has {size} points and its grid {work or 'more'} array elements, more than the "
                f"{self.max_work} this strategy computes")

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        refused = self._too_large(problem)
        if refused is not None:
            return unknown(refused)
        size = problem.box_size
        assert size is not None
        if not _in_int64(problem.ranges.values()):
            return unknown("the box reaches past int64")
        symbols = problem.symbols
        lows = [problem.ranges[s][0] for s in symbols]
        counts = [problem.ranges[s][1] - lo + 1 for s, lo in zip(symbols, lows)] or [1]   # no symbol: a point
        rest = math.prod(counts[1:])
        step = max(1, self.chunk // rest)          # rows of the first axis per chunk
        for start in range(0, counts[0], step):
            if deadline.expired():
                return unknown(f"out of time after {start * rest} of {size} points")
            rows = min(step, counts[0] - start)
            shape = (rows, *counts[1:])

            def make_env(start=start, rows=rows):
                return {s: _axis(lo + (start if i == 0 else 0), rows if i == 0 else n, i, len(symbols))
                        for i, (s, lo, n) in enumerate(zip(symbols, lows, counts))}

            key = (tuple((s, problem.ranges[s]) for s in symbols), start, step)
            vec = self._evaluator(key, make_env)
            try:
                failing = vec.failing(problem, shape)
            except _Overflow:
                return unknown("intermediate values exceed int64")
            finally:
                self._forget_if_large()
            if failing.any():
                where = np.unravel_index(int(np.argmax(failing)), shape)
                point = {s: lo + int(c) + (start if i == 0 else 0)
                         for i, (s, lo, c) in enumerate(zip(symbols, lows, where))}
                return refuted(point, f"smallest counterexample among {size} points")
        return proven(f"checked all {size} points")


def _axis(lo: int, count: int, axis: int, ndim: int) -> np.ndarray:
    """``lo, lo+1, ..., lo+count-1`` along ``axis`` of an ``ndim``-dimensional grid (length 1 elsewhere)."""
    shape = [1] * ndim
    shape[axis] = count
    return np.arange(lo, lo + count, dtype=np.int64).reshape(shape)


def holds_along(f: F.Formula, sym: Symbol, lo: int, hi: int) -> np.ndarray:
    """Mask over ``lo..hi`` of the values of ``sym`` where ``f`` (in ``sym`` only) holds."""
    if not _in_int64([(lo, hi)]):
        raise OverflowError("values exceed int64")
    values = np.arange(lo, hi + 1, dtype=np.int64)
    try:
        return _Vectorized({sym: values}).truth(f, values.shape)[0]
    except _Overflow as e:
        raise OverflowError("values exceed int64") from e


class Grid(NamedTuple):
    """The points of a box where a condition holds: ``mask[i, j, ...]`` is the point
    ``symbols[0] = lows[0] + i``, ``symbols[1] = lows[1] + j``, ..."""

    symbols: list[Symbol]
    lows: list[int]
    mask: np.ndarray

    @property
    def share(self) -> float:
        """The share of the box's points where the condition holds."""
        return np.count_nonzero(self.mask) / self.mask.size

    def values(self, k: int) -> list[int]:
        """The values of ``symbols[k]`` at which the condition holds somewhere."""
        others = tuple(a for a in range(self.mask.ndim) if a != k)
        return [self.lows[k] + int(i) for i in np.flatnonzero(self.mask.any(axis=others))]


def holding_grid(f: F.Formula, ranges: dict, max_points: int = 1 << 22, chunk: int = 1 << 16) -> Grid | None:
    """Where ``f`` is defined and true on the grid of ``ranges`` over ``f``'s own symbols.

    None where one of those ranges is unbounded or missing, the grid has more
    than ``max_points`` points, or values exceed int64.  The grid is evaluated
    in chunks of about ``chunk`` points, so memory stays small for large formulas.
    """
    symbols = sorted(f.free_symbols, key=str)
    spans = [ranges.get(s, (None, None)) for s in symbols]
    if any(lo is None or hi is None for lo, hi in spans) or not _in_int64(spans):
        return None
    counts = [hi - lo + 1 for lo, hi in spans] or [1]
    if math.prod(counts) > max_points:
        return None
    rest = math.prod(counts[1:])
    step = max(1, chunk // rest)
    parts = []
    for start in range(0, counts[0], step):
        rows = min(step, counts[0] - start)
        env = {s: _axis(lo + (start if i == 0 else 0), rows if i == 0 else n, i, len(symbols))
               for i, (s, (lo, _), n) in enumerate(zip(symbols, spans, counts))}
        try:
            true, _ = _Vectorized(env).truth(f, (rows, *counts[1:]))
        except _Overflow:
            return None
        parts.append(np.array(true, dtype=bool))
    return Grid(symbols, [lo for lo, _ in spans], np.concatenate(parts))


class PointsEvaluator:
    """Exact values of terms at a fixed list of points, each node computed once across questions.

    The questions of one trace share their box, hence the points a probe picks there, and their facts:
    evaluating those facts again for every question was most of the probe's time on Swin traces.
    """

    def __init__(self, symbols: tuple[Symbol, ...], points: list[dict[Symbol, int]]):
        """Raises ``OverflowError`` where a coordinate leaves int64."""
        spans = [(min(p[s] for p in points), max(p[s] for p in points)) for s in symbols] if points else []
        if not _in_int64(spans):
            raise OverflowError("coordinates exceed int64")
        self.count = len(points)
        self._vec = _Vectorized({s: np.array([p[s] for p in points], dtype=np.int64) for s in symbols})

    def failing(self, problem: Problem) -> np.ndarray:
        """Mask over the points of those where the facts hold and the goal is not true.

        Raises ``OverflowError`` where a value read leaves int64 (callers then evaluate point by point).
        """
        if not self.count:
            return np.zeros(0, dtype=bool)
        try:
            return self._vec.failing(problem, (self.count,))
        except _Overflow as e:
            raise OverflowError("values exceed int64") from e


def failing_among(problem: Problem, points: list[dict[Symbol, int]]) -> np.ndarray:
    """Mask over ``points`` of those where the facts hold and the goal is not true, all evaluated at once.

    Raises ``OverflowError`` where a coordinate or a value read leaves int64 (callers then evaluate
    point by point in Python).
    """
    return PointsEvaluator(problem.symbols, points).failing(problem)


def _in_int64(ranges) -> bool:
    """Whether every (bounded) range lies well inside int64."""
    return all(abs(end) < _SAFE_MAGNITUDE for lo_hi in ranges for end in lo_hi)
