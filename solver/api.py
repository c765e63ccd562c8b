"""The module-level questions: ``prove``, ``simplify``, ``bounds`` on a default ``Solver``.

The upper layers (``shapes``, ``tracer``, ``export``) own ``Solver`` objects of
their own (one per shape environment); these functions serve one-off
questions (the CLI, the service, explanations of pasted guards).  The default
solver's state is its caches of decided verdicts and completed rewrites, each
keyed by the whole question.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from .solver import DEFAULT_TIMEOUT, Solver
from .problems.strategy import Strategy
from .problems.verdict import Verdict

__all__ = ["prove", "simplify", "bounds", "STRATEGIES", "DEFAULT_TIMEOUT", "DEFAULT_SOLVER"]

DEFAULT_SOLVER = Solver()
STRATEGIES = DEFAULT_SOLVER.strategies          # by name: interval, rewrite, enumerate, z3, cascade


def prove(goal, ranges: Mapping | None = None, facts: Iterable = (), strategy: str | Strategy = "cascade",
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
    return DEFAULT_SOLVER.prove(goal, ranges, facts, strategy, timeout)


def simplify(expression, ranges: Mapping | None = None, timeout: float = DEFAULT_TIMEOUT):
    """The rewrite strategy's normal form of a term or condition over ``ranges``.

    Exact wherever the input is defined (divisors stay attached to conditions); the input as parsed
    when ``timeout`` runs out first.

    >>> from shapeproof.solver.language.terms import term_str
    >>> term_str(simplify("(T + ((16 - T % 16) % 16)) // 16", {"T": (1, None)}))
    '-((-T) // 16)'
    """
    return DEFAULT_SOLVER.simplify(expression, ranges, timeout)


def bounds(expression, ranges: Mapping | None = None, timeout: float = DEFAULT_TIMEOUT):
    """``(lo, hi)`` of a term over ``ranges`` after normalization (None for an unbounded end); the plain
    interval of the term when ``timeout`` runs out first.

    >>> bounds("T - 16*(T // 16)", {"T": (0, None)})
    (0, 15)
    """
    return DEFAULT_SOLVER.bounds(expression, ranges, timeout)
