"""Exact evaluation of terms and conditions at a point, with Python ints and floats.

This is the reference semantics every strategy is checked against: every
counterexample a strategy reports is re-evaluated here before it is returned.
Float nodes (``floats.py``) are evaluated with Python's own float operations;
where Python raises (division by zero, overflow of ``float`` or ``math.floor``,
``math.floor`` of nan) the node is undefined.
"""
from __future__ import annotations

from typing import Mapping

import sympy
from sympy import Expr, Symbol

import math
import operator

from . import floats as FL
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


_FLOAT_OPS = {FL.FAdd: operator.add, FL.FSub: operator.sub, FL.FMul: operator.mul, FL.FDiv: operator.truediv,
              FL.FFloorDiv: operator.floordiv, FL.FMod: operator.mod, FL.IntTrueDiv: operator.truediv}
_ROUND = {FL.FloorToInt: math.floor, FL.CeilToInt: math.ceil, FL.TruncToInt: math.trunc}
_COMPARE = {FL.FloatLt: operator.lt, FL.FloatLe: operator.le, FL.FloatEq: operator.eq}


def _number(e: Expr, env, memo):
    """An int for integer terms, a Python float for float terms."""
    return _float(e, env, memo) if isinstance(e, FL.FloatTerm) else _eval(e, env, memo)


def _float(f: Expr, env, memo) -> float:
    if f in memo:
        return memo[f]
    try:
        if isinstance(f, FL.FloatConst):
            value = f.value
        elif isinstance(f, FL.ToFloat):
            value = float(_eval(f.args[0], env, memo))
        elif isinstance(f, FL.FNeg):
            value = -_float(f.args[0], env, memo)
        elif type(f) in _FLOAT_OPS:
            value = _FLOAT_OPS[type(f)](_number(f.args[0], env, memo), _number(f.args[1], env, memo))
        else:
            raise TypeError(f"not a float term: {f} ({type(f).__name__})")
    except (ZeroDivisionError, OverflowError) as exc:
        raise Undefined(f"{type(exc).__name__} in {f}") from None
    memo[f] = value
    return value


def _wrapper(node: Expr, env, memo) -> int:
    if isinstance(node, FL.Defined):
        _number(node.args[0], env, memo)
        return 1
    if type(node) in _COMPARE:
        return int(_COMPARE[type(node)](_number(node.args[0], env, memo), _number(node.args[1], env, memo)))
    try:
        return _ROUND[type(node)](_float(node.args[0], env, memo))
    except (OverflowError, ValueError) as exc:               # inf and nan have no integer value
        raise Undefined(f"{type(exc).__name__} in {node}") from None


for _cls in FL.FLOAT_WRAPPERS:
    _NODE_EVAL[_cls] = _wrapper


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
    elif isinstance(term, FL.FloatTerm):       # a float operand (what explanations show)
        return _float(term, env, memo)
    else:
        raise TypeError(f"not an integer term: {term} ({type(term).__name__})")
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
    stop = isinstance(f, F.Or)          # Python's left-to-right ``or`` stops at True, ``and`` at False
    for a in f.args:
        value = truth(a, env, memo)
        if value is None or value is stop:
            return value
    return not stop


def holds(f: F.Formula, point: Mapping) -> bool:
    """Whether ``f`` is defined and true at ``point``."""
    return truth(f, as_env(point)) is True
