"""Exact evaluation of terms and conditions at a point, with Python ints and floats.

This is the reference semantics every strategy is checked against: every
counterexample a strategy reports is re-evaluated here before it is returned.
Float nodes (``floats.py``) are evaluated with Python's own float operations;
where Python raises (division by zero, overflow of ``float`` or ``math.floor``,
``math.floor`` of nan) the node is undefined.
"""
from __future__ import annotations

from typing import Mapping

from sympy import Expr, Symbol

from . import formula as F
from .nodes import Kind, row_of
from .terms import symbol

__all__ = ["Undefined", "evaluate_term", "truth", "holds", "as_env"]


class Undefined(ArithmeticError):
    """The term divides by zero at this point (or a float operation raises there)."""


def as_env(point: Mapping) -> dict[Symbol, int]:
    """Accept ``{"T": 4}`` or ``{Symbol("T"): 4}``; names map to integer symbols."""
    return {(k if isinstance(k, Symbol) else symbol(k)): int(v) for k, v in point.items()}


def _eval(term: Expr, env: Mapping[Symbol, int], memo: dict):
    """An int for an integer term, a Python float for a float term: each node's ``python`` column."""
    if term.is_Integer:
        return int(term)
    if term in memo:
        return memo[term]
    if isinstance(term, Symbol):
        try:
            value = env[term]
        except KeyError:
            raise ValueError(f"no value given for symbol {term}") from None
    else:
        row = row_of(term)
        if row.kind is Kind.FLOAT_CONST:
            value = term.value
        else:
            args = [_eval(a, env, memo) for a in term.args]
            try:
                value = row.python(*args)
            except (ZeroDivisionError, OverflowError, ValueError) as exc:   # where Python raises
                raise Undefined(f"{type(exc).__name__} in {term}") from None
    memo[term] = value
    return value


def evaluate_term(term: Expr, point: Mapping) -> int:
    """The value of ``term`` at ``point``; raises ``Undefined`` on division by zero."""
    return _eval(term, as_env(point), {})


def truth(f: F.Formula, env: Mapping[Symbol, int], memo: dict | None = None) -> bool | None:
    """Python's truth value of ``f``: True, False, or None where evaluating it raises."""
    memo = {} if memo is None else memo
    if isinstance(f, F.Const):
        return f.value
    if isinstance(f, F.Rel):
        try:
            if any(_eval(d, env, memo) == 0 for d in f.divisors):
                return None
            return f.holds_for(_eval(f.lhs, env, memo) - _eval(f.rhs, env, memo))
        except Undefined:
            return None
    if not isinstance(f, (F.And, F.Or)):
        raise TypeError(f"not a condition: {f!r}")
    stop = isinstance(f, F.Or)          # ``or`` is decided by a true operand, ``and`` by a false one
    if not f.ordered:                   # sympy's: any deciding operand decides, else undefined if any is
        values = [truth(a, env, memo) for a in f.args]
        return stop if stop in values else (None if None in values else not stop)
    for a in f.args:                    # Python's: left to right, the first undefined operand raises
        value = truth(a, env, memo)
        if value is None or value is stop:
            return value
    return not stop


def holds(f: F.Formula, point: Mapping) -> bool:
    """Whether ``f`` is defined and true at ``point``."""
    return truth(f, as_env(point)) is True
