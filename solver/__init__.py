"""shapeproof.solver — exact integer shape logic and the procedures that decide it.

>>> from shapeproof.solver import prove
>>> prove("(1 + (L - 1) // 2) != 1", ranges={"L": (3, 4096)}).status.value
'proven'

This namespace is the solver's public facade, and the only thing the upper
layers import from it (``tests/test_layers.py`` checks):

* questions: ``prove``, ``simplify``, ``bounds``, ``evaluate``,
  ``classify_fact``, ``divisibility_candidates``, on a ``Solver`` (one per shape environment) or on the
  default one;
* the language: terms (``symbol``, the node classes, float constructors in
  ``floats``), conditions (``Rel``, ``conj``, ``neg``, ...), the safe parser,
  printing and guard code;
* for strategies written elsewhere (torch's own, in ``tracer``): ``Strategy``,
  ``Problem``, ``Outcome`` and the checks around them.

What each node means is its row of ``language/nodes.TABLE``.  No torch import anywhere in this package.
Rooms, bottom to top (``tests/test_layers.py`` checks that imports point down): ``language/`` (terms,
conditions, their meaning), ``problems/`` (a question in normal form and what every strategy knows of
one), ``strategies/`` (the decision procedures) and the top (``Solver``, ``api``).
"""
from .language import floats
from .api import DEFAULT_SOLVER, STRATEGIES, bounds, prove, simplify
from .problems.bounds import Bounds
from .problems.closed_form import affine_floor, nested_divisions
from .problems.classify import Learned, LearnedKind, classify_fact, divisibility_candidates
from .strategies.enumerate import EnumerateStrategy, holding_grid, holds_along
from .language.evaluate import Undefined, evaluate_term, holds, truth
from .language.formula import (
    FALSE, TRUE, And, Const, Formula, Or, Rel, conj, disj, eq, formula_str, ge, gt, iff, le, lt, ne, neg,
    rebuilt, rel, relations, substitute,
)
from .language.guard_code import guard_code
from .problems.ranges import tighten
from .language.nodes import TABLE, Kind, Rounding, Row, Unmodelled, row_of, rows_named
from .language.parse import Limits, ParseError, parse, parse_condition, parse_term
from .problems.deadline import Deadline
from .problems.problem import Problem
from .solver import DEFAULT_TIMEOUT, Solver
from .problems.strategy import (
    Outcome, Strategy, check_counterexample, proven, refuted, sample_points, unknown,
)
from .language.terms import (
    CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv, constant_divisors, divisors, symbol, term_str,
)
from .problems.verdict import Status, Verdict, Vocabulary

evaluate = evaluate_term

__all__ = [
    # questions
    "prove", "simplify", "bounds", "evaluate", "classify_fact", "divisibility_candidates", "Solver",
    "DEFAULT_SOLVER", "STRATEGIES",
    "DEFAULT_TIMEOUT", "Verdict", "Status", "Vocabulary", "Learned", "LearnedKind", "holds", "truth",
    "evaluate_term", "Undefined", "holds_along", "holding_grid", "tighten", "Bounds", "affine_floor",
    "nested_divisions",
    # the language
    "parse", "parse_condition", "parse_term", "ParseError", "Limits",
    "Formula", "Rel", "And", "Or", "Const", "TRUE", "FALSE", "rel", "eq", "ne", "lt", "le", "gt", "ge",
    "conj", "disj", "rebuilt", "neg", "iff", "substitute", "relations", "formula_str",
    "FloorDiv", "Mod", "CeilDiv", "TruncDiv", "Min", "Max", "symbol", "divisors", "constant_divisors",
    "term_str", "floats",
    "guard_code", "TABLE", "Kind", "Rounding", "Row", "Unmodelled", "row_of", "rows_named",
    # for strategies written elsewhere
    "Strategy", "Outcome", "Problem", "Deadline", "EnumerateStrategy", "proven", "refuted", "unknown",
    "check_counterexample", "sample_points",
]
