"""A query in normal form: goal, facts and the range of every symbol they use."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Mapping

from sympy import Symbol

from ..language import formula as F
from .exact_floats import exact_floats
from ..language.parse import parse_condition
from ..language.terms import symbol

__all__ = ["Bound", "Problem", "normalize_ranges"]

Bound = tuple  # (lo, hi): inclusive ints, None for unbounded


def _bound(name, value) -> Bound:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise ValueError(f"range of {name} must be a (lo, hi) pair, got {value!r}") from None
    for end in (lo, hi):
        if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
            raise ValueError(f"range of {name} must hold ints or None, got {value!r}")
    return (lo, hi)


def normalize_ranges(ranges: Mapping | None) -> dict[Symbol, Bound]:
    """Map ``{"T": (2, 1024)}`` (names or symbols) to ``{Symbol: (lo, hi)}``."""
    out: dict[Symbol, Bound] = {}
    for key, value in (ranges or {}).items():
        sym = key if isinstance(key, Symbol) else symbol(str(key))
        out[sym] = _bound(sym.name, value)
    return out


@dataclass(frozen=True)
class Problem:
    """Prove ``goal`` for every point of the box where all ``facts`` hold.

    ``symbols`` lists every free symbol of goal and facts, sorted by name (the
    order counterexamples are minimized in); ``ranges`` has one entry each.
    """

    goal: F.Formula
    facts: tuple[F.Formula, ...]
    symbols: tuple[Symbol, ...]
    ranges: Mapping[Symbol, Bound]

    @classmethod
    def build(cls, goal, ranges: Mapping | None = None, facts: Iterable = ()) -> "Problem":
        goal = parse_condition(goal)
        facts = tuple(f for f in (parse_condition(f) for f in facts) if f != F.TRUE)
        given = normalize_ranges(ranges)
        syms = set(goal.free_symbols).union(*(f.free_symbols for f in facts))
        ordered = tuple(sorted(syms, key=lambda s: s.name))
        box = {s: given.get(s, (None, None)) for s in ordered}
        goal, facts = exact_floats(goal, facts, box)
        return cls(goal, facts, ordered, box)

    @cached_property
    def key(self) -> tuple:
        """Hashable identity of the query (cache key)."""
        return (self.goal, frozenset(self.facts), tuple((s.name, self.ranges[s]) for s in self.symbols))

    @cached_property
    def has_floats(self) -> bool:
        """Whether a float node is left (one that ``exact_floats`` could not make exact)."""
        return any(r.has_floats for f in (self.goal, *self.facts) for r in F.relations(f))

    @cached_property
    def empty(self) -> bool:
        """True when some range is empty, so the goal holds vacuously."""
        return any(lo is not None and hi is not None and lo > hi for lo, hi in self.ranges.values())

    @cached_property
    def bounded(self) -> bool:
        return all(lo is not None and hi is not None for lo, hi in self.ranges.values())

    @cached_property
    def box_size(self) -> int | None:
        """Number of points in the box, or None when a range is unbounded."""
        if not self.bounded:
            return None
        size = 1
        for lo, hi in self.ranges.values():
            size *= max(0, hi - lo + 1)
        return size

    @cached_property
    def assumption(self) -> F.Formula:
        return F.conj(*self.facts)

    def with_goal(self, goal: F.Formula) -> "Problem":
        return Problem(goal, self.facts, self.symbols, self.ranges)

    def describe(self) -> str:
        def span(lo, hi):
            return f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        parts = [f"{s.name} in {span(*self.ranges[s])}" for s in self.symbols]
        text = f"{self.goal} for {', '.join(parts) or 'all values'}"
        return text + (f" given {' and '.join(str(f) for f in self.facts)}" if self.facts else "")
