"""The sides of a ``torch.cond`` as the engine's ShapeEnv sees them: questions asked inside one, and one size
for an output where the sides differ (``control/cond.py`` asks these while torch traces each side).

Inside a side (``assuming``) a question is decided under the side's condition;
one it leaves open is answered where the side runs (the engine's witness,
``shapes.ShapeEnv.assuming``), and its guard is recorded as the condition
implying it, in torch's list (the program's input checks) and the engine's
alike: nothing learned inside a side is learned for the inputs at large.
A condition the engine cannot read leaves the side to torch's own tracing.

``env`` is the tracer's ``EngineShapeEnv`` (this module is its part for
``torch.cond``; the class delegates here).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import sympy
import torch

from shapeproof import solver as S

from .control.cond import indicator
from .questions import has_symbols, provenance
from .sympy_bridge import UnsupportedExpression
from .torch_internals import ShapeGuard

__all__ = ["assuming", "answer_in_side", "equal_on_side", "unified_size"]


@contextmanager
def assuming(env: Any, condition, taken: bool):
    """Within: the side that ``condition`` (torch's sympy) takes when ``taken`` is traced."""
    cond = env._convert(condition)
    if cond is None:
        yield
        return
    env.sides.append(condition if taken else sympy.Not(condition))
    try:
        with env.engine.assuming(cond if taken else S.neg(cond)):
            yield
    finally:
        env.sides.pop()


def answer_in_side(env: Any, expr, size_oblivious: bool):
    """The answer to a question asked inside a side; None leaves it to torch (a question on data, or one
    the engine cannot read)."""
    static = env._maybe_evaluate_static(expr)
    if static is not None:
        return static
    if not env._backed(expr) or not has_symbols(expr):
        return None
    if not env.engine.side_runs:          # no input takes this side: nothing it asks needs a guard
        return env._maybe_evaluate_static(expr, compute_hint=True)
    boolean = isinstance(expr, sympy.logic.boolalg.Boolean)
    try:
        engine_expr = env._convert(expr) if boolean else env.conversions().term(expr)
    except UnsupportedExpression:
        return None
    if engine_expr is None:
        return None
    value = env.engine.value_here(engine_expr)
    if value is None:
        return None
    if boolean:
        guard, engine_guard = (expr, engine_expr) if value else (sympy.Not(expr), S.neg(engine_expr))
    else:
        guard, engine_guard = sympy.Eq(expr, value), S.eq(engine_expr, value)
    if not env._suppress_guards_tls():
        implied = sympy.Or(sympy.Not(sympy.And(*env.sides)), guard)
        env.guards.append(ShapeGuard(implied, env._get_sloc(), size_oblivious=size_oblivious))
        if env.engine.record_guard(engine_guard, where=provenance(), size_oblivious=size_oblivious):
            env.mirrored.add(len(env.guards) - 1)
    if boolean:
        return sympy.true if value else sympy.false
    return sympy.Integer(value)


def _expr(size) -> sympy.Expr:
    return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)


def _equal_terms(env: Any, a: sympy.Expr, b: sympy.Expr):
    try:
        return S.eq(env.conversions().term(a), env.conversions().term(b))
    except UnsupportedExpression:
        return None


def equal_on_side(env: Any, condition, taken: bool, a, b) -> bool:
    """Whether sizes ``a`` and ``b`` are equal wherever ``condition`` is ``taken`` (proven; no guard)."""
    a_expr, b_expr = _expr(a), _expr(b)
    if a_expr == b_expr:
        return True
    cond, same = env._convert(condition), _equal_terms(env, a_expr, b_expr)
    return cond is not None and same is not None and env.engine.proven(
        same, assuming=(cond if taken else S.neg(cond),))


def unified_size(env: Any, condition, on_true, on_false):
    """One size that is ``on_true`` where ``condition`` holds and ``on_false`` where not, for an output of a
    ``torch.cond`` whose sides differ: one side's own where the other's equals it under its condition,
    else ``on_false + indicator(condition) * (on_true - on_false)``; None where the engine cannot read
    them."""
    true_expr, false_expr = _expr(on_true), _expr(on_false)
    if true_expr == false_expr:
        return on_true
    cond, same = env._convert(condition), _equal_terms(env, true_expr, false_expr)
    if cond is None or same is None:
        return None
    if env.engine.proven(same, assuming=(S.neg(cond),)):
        return on_true
    if env.engine.proven(same, assuming=(cond,)):
        return on_false
    holds = indicator(condition)
    if holds is None:
        return None
    size = false_expr + holds * (true_expr - false_expr)
    hint = size.xreplace(env.backed_var_to_val)
    return env.create_symintnode(size, hint=int(hint) if hint.is_number else None)
