"""Exact evaluation of terms and conditions at a point, with Python ints.

This is the reference semantics every strategy is checked against: every
counterexample a strategy reports is re-evaluated here before it is returned.
"""
from __future__ import annotations

from typing import Mapping

import sympy
from sympy import Expr, Symbol

from . import formula as F
from .terms import CeilDiv, FloorDiv, Max, Min, Mod, TruncDiv, trunc_div

__all__ = ["Undefined", "evaluate_term", "truth", "holds", "as_env"]


class Undefined(ArithmeticError):
    """The term divides by zero at this point."""


def as_env(point: Mapping) -> dict[Symbol, int]:
    """Accept ``{"T": 4}`` or ``{Symbol("T"): 4}``; names map to integer symbols."""
    from .terms import symbol
    return {(k if isinstance(k, Symbol) else symbol(k)): int(v) for k, v in point.items()}


def _div_args(node: Expr, env, memo):
    a = _eval(node.args[0], env, memo)
    b = _eval(node.args[1], env, memo)
    if b == 0:
        raise Undefined(f"division by zero in {node}")
    return a, b


_NODE_EVAL = {
    FloorDiv: lambda n, env, memo: (lambda a, b: a // b)(*_div_args(n, env, memo)),
    Mod: lambda n, env, memo: (lambda a, b: a % b)(*_div_args(n, env, memo)),
    CeilDiv: lambda n, env, memo: (lambda a, b: -((-a) // b))(*_div_args(n, env, memo)),
    TruncDiv: lambda n, env, memo: trunc_div(*_div_args(n, env, memo)),
    Min: lambda n, env, memo: min(_eval(a, env, memo) for a in n.args),
    Max: lambda n, env, memo: max(_eval(a, env, memo) for a in n.args),
}


def _eval(term: Expr, env: Mapping[Symbol, int], memo: dict) -> int:
    if term.is_Integer:
        return int(term)
    if term in memo:
        return memo[term]
    if isinstance(term, Symbol):
        try:
            value = env[term]
        except KeyError:
            raise ValueError(f"no value given for symbol {term}") from None
    elif isinstance(term, sympy.Add):
        value = sum(_eval(a, env, memo) for a in term.args)
    elif isinstance(term, sympy.Mul):
        value = 1
        for a in term.args:
            value *= _eval(a, env, memo)
    elif isinstance(term, sympy.Pow):
        exponent = term.args[1]
        if not (exponent.is_Integer and exponent >= 0):
            raise TypeError(f"not an integer term: {term}")
        value = _eval(term.args[0], env, memo) ** int(exponent)
    elif type(term) in _NODE_EVAL:
        value = _NODE_EVAL[type(term)](term, env, memo)
    else:
        raise TypeError(f"not an integer term: {term} ({type(term).__name__})")
    memo[term] = value
    return value


def evaluate_term(term: Expr, point: Mapping) -> int:
    """The value of ``term`` at ``point``; raises ``Undefined`` on division by zero."""
    return _eval(term, as_env(point), {})


def truth(f: F.Formula, env: Mapping[Symbol, int], memo: dict | None = None) -> bool | None:
    """Kleene truth value of ``f``: True, False, or None where it is undefined."""
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
    values = [truth(a, env, memo) for a in f.args]
    if isinstance(f, F.And):
        return False if False in values else (True if all(values) else None)
    if isinstance(f, F.Or):
        return True if True in values else (False if all(v is False for v in values) else None)
    raise TypeError(f"not a condition: {f!r}")


def holds(f: F.Formula, point: Mapping) -> bool:
    """Whether ``f`` is defined and true at ``point``."""
    return truth(f, as_env(point)) is True
