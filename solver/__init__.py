"""shapeproof.solver — exact integer shape logic and the procedures that decide it.

>>> from shapeproof.solver import prove
>>> prove("(1 + (L - 1) // 2) != 1", ranges={"L": (3, 4096)}).status.value
'proven'

Terms (``terms``) and conditions (``formula``) follow Python's integer
semantics; ``parse`` reads guard text safely; each strategy module decides
queries behind one interface (``strategy.Strategy``); ``prove`` is the entry
point.  No torch import anywhere in this package.
"""
from .api import DEFAULT_TIMEOUT, STRATEGIES, prove, simplify
from .evaluate import Undefined, evaluate_term, holds
from .formula import FALSE, TRUE, And, Formula, Or, Rel, conj, disj, eq, ge, gt, le, lt, ne, neg, rel
from .parse import ParseError, parse, parse_condition, parse_term
from .problem import Problem
from .terms import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv, symbol
from .verdict import Status, Verdict

__all__ = [
    "prove", "simplify", "STRATEGIES", "DEFAULT_TIMEOUT", "Verdict", "Status", "Problem",
    "parse", "parse_condition", "parse_term", "ParseError",
    "Formula", "Rel", "And", "Or", "TRUE", "FALSE", "rel", "eq", "ne", "lt", "le", "gt", "ge",
    "conj", "disj", "neg", "FloorDiv", "Mod", "CeilDiv", "TruncDiv", "Min", "Max", "symbol",
    "evaluate_term", "holds", "Undefined",
]
