"""The ``pieces`` strategy: value ranges over parts of the box, for float questions over large boxes.

Interval arithmetic loses what one symbol says twice: over ``x >= 4`` it cannot
see that ``math.sqrt(x + 1) >= x`` holds nowhere, since ``math.sqrt(x + 1)``
is unbounded.  Over ``[4, 16]``, ``[17, 289]``, ... each piece's enclosures
settle it (``Bounds.floats``).  So the box is cut into pieces -- at 0, then
each range at a point between its ends (the geometric middle of a wide one,
so an unbounded range is covered in a few dozen pieces up to the magnitudes
where floats overflow) -- until on each piece a fact holds nowhere or the goal
holds everywhere (defined, ``Bounds.evaluates``); a piece of a few points is
evaluated point by point in Python, where a counterexample is one of the box.
Proven when every piece is settled; unknown when the pieces run out
(``MAX_PIECES``) or the time does.
"""
from __future__ import annotations

import math

from ..problems.bounds import Bounds
from ..problems.ranges import box_truth, tighten
from ..problems.deadline import Deadline
from ..problems.problem import Problem
from ..problems.strategy import Outcome, Strategy, check_counterexample, proven, refuted, unknown

__all__ = ["PiecesStrategy", "split"]

MAX_PIECES = 300
SMALL = 32                      # a piece of at most this many points is evaluated point by point
_FAR = 2 ** 1100                # past every double: a range from here on is not cut further


def split(lo: int | None, hi: int | None) -> list[tuple[int | None, int | None]] | None:
    """Two or three parts of ``[lo, hi]`` (the part nearer to 0 first), or None if it is not cut further."""
    if lo is not None and hi is not None and hi - lo < 1:
        return None
    if (lo is None or lo < 0) and (hi is None or hi > 0):
        return [(0, hi), (lo, -1)] if (hi is None or hi >= 1) else [(lo, -1), (0, hi)]
    if lo is not None and lo >= 0:
        up = _split_up(lo, hi)
        return None if up is None else [(a, b) for a, b in up]
    assert hi is not None and hi <= 0        # the cases above took every range reaching past 0
    parts = _split_up(-hi, None if lo is None else -lo)
    return None if parts is None else [(None if b is None else -b, -a) for a, b in parts]


def _split_up(lo: int, hi: int | None) -> list[tuple[int, int | None]] | None:
    """``[lo, hi]`` with ``0 <= lo``."""
    if hi is None:
        if lo >= _FAR:
            return None
        middle = max(2 * lo + 16, min(lo * lo, _FAR))
        return [(lo, middle), (middle + 1, None)]
    if hi > 4 * lo + 64:
        middle = 1 << ((lo.bit_length() + hi.bit_length()) // 2)
        middle = min(max(middle, lo + 1), hi - 1)
    else:
        middle = (lo + hi) // 2
    return [(lo, middle), (middle + 1, hi)]


def _corners(problem: Problem, box, most: int = 64):
    """Points of ``box`` at its ends (an open end at the first magnitude past every double)."""
    import itertools
    axes = []
    for s in problem.symbols:
        lo, hi = box[s]
        values = {v for v in (lo, hi) if v is not None}
        values |= {v for v in (_FAR + 1, -_FAR - 1) if (lo is None or lo <= v) and (hi is None or v <= hi)}
        values.add(max(lo, min(0, hi)) if lo is not None and hi is not None else
                   (lo if lo is not None and lo > 0 else (hi if hi is not None and hi < 0 else 0)))
        axes.append(sorted(values))
    axes = [sorted(a, key=lambda v: -abs(v)) for a in axes]        # the far ends first
    for point in itertools.islice(itertools.product(*axes), most):
        yield dict(zip(problem.symbols, point))


def _size(lo: int | None, hi: int | None) -> float:
    return math.inf if lo is None or hi is None else hi - lo + 1


class PiecesStrategy(Strategy):
    name = "pieces"
    open_ended = True
    decides_floats = True

    def __init__(self, max_pieces: int = MAX_PIECES):
        self.max_pieces = max_pieces

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        if not problem.has_floats or (problem.box_size is not None and problem.box_size <= SMALL):
            return unknown("not a float question over a large box")
        start = tighten(problem.ranges, problem.facts)
        if start is None:
            return proven("the facts exclude every point in range")
        stack = [start]
        pieces = 0
        while stack:
            if pieces >= self.max_pieces or deadline.expired():
                return unknown(f"not settled in {pieces} pieces of the box")
            box = stack.pop()
            pieces += 1
            sizes = [_size(*box[s]) for s in problem.symbols]
            if all(v <= SMALL for v in sizes) and math.prod(sizes) <= SMALL:
                point = self._counterexample(problem, box)
                if point is not None:
                    return refuted(point, f"Python evaluation in a piece of the box ({pieces} pieces)")
                continue
            bounds = Bounds(box)
            if any(box_truth(f, bounds)[1] for f in problem.facts) or box_truth(problem.goal, bounds)[0]:
                continue
            point = next((p for p in _corners(problem, box, 4) if check_counterexample(problem, p) is None),
                         None)
            if point is not None:               # an end of a piece not settled (where a float overflows)
                return refuted(point, f"Python evaluation at an end of a piece of the box ({pieces} pieces)")
            widest = max(problem.symbols, key=lambda s: (_size(*box[s]), s.name))
            parts = split(*box[widest])
            if parts is None:                       # past every double
                return unknown(f"a piece past the largest double is not settled ({pieces} pieces)")
            for part in reversed(parts):            # the part nearer to 0 is taken first
                stack.append({**box, widest: part})
        return proven(f"value ranges settle each of {pieces} pieces of the box")

    @staticmethod
    def _counterexample(problem: Problem, box) -> dict | None:
        import itertools
        axes = [range(box[s][0], box[s][1] + 1) for s in problem.symbols]
        for values in itertools.product(*axes):
            point = dict(zip(problem.symbols, values))
            if check_counterexample(problem, point) is None:
                return point
        return None
