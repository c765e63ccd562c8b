"""``prove``: the one query interface of the solver."""
from __future__ import annotations

from typing import Iterable, Mapping

from .cascade import Cascade
from .enumerate import EnumerateStrategy
from .interval import IntervalStrategy
from .parse import parse
from .problem import Deadline, Problem, normalize_ranges
from .rewrite import Normalizer, RewriteStrategy
from .smt import Z3Strategy
from .strategy import Strategy, run
from .tight import TightBounds
from .formula import Formula
from .verdict import Verdict

__all__ = ["prove", "simplify", "STRATEGIES", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 2.0

_CASCADE = Cascade()

STRATEGIES: dict[str, object] = {
    "interval": IntervalStrategy(),
    "rewrite": RewriteStrategy(),
    "enumerate": EnumerateStrategy(),
    "z3": Z3Strategy(),
    "cascade": _CASCADE,
}


def prove(goal, ranges: Mapping | None = None, facts: Iterable = (), strategy="cascade",
          timeout: float = DEFAULT_TIMEOUT) -> Verdict:
    """Prove ``goal`` for every value in ``ranges`` where all ``facts`` hold.

    ``goal`` and each fact are guard text or a ``Formula``; ``ranges`` maps
    symbol names to inclusive ``(lo, hi)``, ``None`` meaning unbounded (a
    symbol without an entry is unbounded).  ``strategy`` is one of
    ``STRATEGIES`` or a ``Strategy``.  No call runs much past ``timeout``
    seconds: a strategy that runs out answers ``unknown``.

    >>> prove("((2*T*T) // T) == 2*T", ranges={"T": (2, 1024)}).status.value
    'proven'
    >>> v = prove("(T % 4) != 0", ranges={"T": (2, 1024)})
    >>> v.status.value, v.counterexample
    ('refuted', {'T': 4})
    """
    deadline = Deadline(timeout)              # the budget covers reading the guard too
    if isinstance(strategy, str):
        try:
            strategy = STRATEGIES[strategy]
        except KeyError:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {sorted(STRATEGIES)}") from None
    problem = Problem.build(goal, ranges, facts)
    if isinstance(strategy, Cascade):
        return strategy(problem, deadline)
    if isinstance(strategy, Strategy):
        return run(strategy, problem, deadline)
    raise TypeError(f"not a strategy: {strategy!r}")


def simplify(expression, ranges: Mapping | None = None, timeout: float = DEFAULT_TIMEOUT):
    """The rewrite strategy's normal form of a term or condition over ``ranges``.

    Exact wherever the input is defined (divisors stay attached to conditions).

    >>> from shapeproof.solver.terms import term_str
    >>> term_str(simplify("(T + ((16 - T % 16) % 16)) // 16", {"T": (1, None)}))
    '-((-T) // 16)'
    """
    value = parse(expression) if isinstance(expression, str) else expression
    deadline = Deadline(timeout)
    normalizer = Normalizer(TightBounds(normalize_ranges(ranges), deadline), deadline)
    if isinstance(value, Formula):
        return normalizer.formula(value)
    return normalizer(value)
