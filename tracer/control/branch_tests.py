"""An ``if``'s test read from the user's source and evaluated on the running frame's values.

A branch whose guard the engine is asked about (``branch_merge``,
``short_circuits``) is read as a tree of comparisons computed without asking
Python for a truth value (``test_tree``), from which follow the values of
its comparisons that steer Python to one side (``steer``), the test as a
0/1 size (``indicator``) and as an engine formula (``formula_of``).  Only
sizes, constants, attributes of plain data and the "are we tracing"
predicates libraries test are read; anything else is ``Unreadable``.
"""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

from shapeproof import solver as S

from .effects import Effects, Unseen, plain_attribute

__all__ = ["Leaf", "Not", "All", "AnyOf", "Unreadable", "test_tree", "value_of", "steer", "leaves",
           "indicator", "formula_of"]


@dataclass(frozen=True)
class Leaf:
    """One comparison (or plain value) of the test, as Python computes it."""

    value: Any                   # a SymBool, or a Python bool
    op: str | None = None        # the comparison, for the condition's 0/1 indicator
    left: Any = None
    right: Any = None


@dataclass(frozen=True)
class Not:
    child: object


@dataclass(frozen=True)
class All:
    children: tuple


@dataclass(frozen=True)
class AnyOf:
    children: tuple


_COMPARE = {ast.Eq: ("==", operator.eq), ast.NotEq: ("!=", operator.ne), ast.Lt: ("<", operator.lt),
            ast.LtE: ("<=", operator.le), ast.Gt: (">", operator.gt), ast.GtE: (">=", operator.ge)}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
# calls a test may make: size queries and the "are we tracing" predicates libraries test
_TEST_CALLS = {torch.jit.is_tracing, torch.jit.is_scripting, torch.compiler.is_compiling}
_TEST_METHODS = ("size", "dim")


class Unreadable(Exception):
    pass


def test_tree(node: ast.expr, frame: FrameType, effects: Effects):
    """The test as a tree of comparisons, computed on the frame's values without asking for truth values."""
    if isinstance(node, ast.BoolOp):
        children = tuple(test_tree(v, frame, effects) for v in node.values)
        return All(children) if isinstance(node.op, ast.And) else AnyOf(children)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return Not(test_tree(node.operand, frame, effects))
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
            raise Unreadable("a chained or identity comparison")
        op, apply = _COMPARE[type(node.ops[0])]
        left, right = value_of(node.left, frame, effects), value_of(node.comparators[0], frame, effects)
        return Leaf(apply(left, right), op, left, right)
    value = value_of(node, frame, effects)
    if isinstance(value, (bool, torch.SymBool)):
        return Leaf(value)
    if isinstance(value, torch.SymInt):          # ``if x.shape[1] % 2:`` is Python's ``!= 0``
        return Leaf(value != 0, "!=", value, 0)
    raise Unreadable(f"a test on a {type(value).__name__}")


def value_of(node: ast.expr, frame: FrameType, effects: Effects):
    """A sub-expression of the test, evaluated: sizes, constants, attributes of plain data."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in scope:
                return scope[node.id]
        raise Unreadable(f"the unbound name `{node.id}`")
    if isinstance(node, ast.Attribute):
        base = value_of(node.value, frame, effects)
        if isinstance(base, torch.Tensor):
            if node.attr not in ("shape", "ndim"):
                raise Unreadable(f"the tensor attribute `{node.attr}`")
            return getattr(base, node.attr)
        return _attribute(base, node.attr, effects)
    if isinstance(node, ast.Subscript):
        base, index = value_of(node.value, frame, effects), value_of(node.slice, frame, effects)
        if not isinstance(base, (tuple, list, torch.Size)) or not isinstance(index, (int, slice)):
            raise Unreadable("an item of something other than a tuple")
        return base[index]
    if isinstance(node, ast.Slice):
        ends = (node.lower, node.upper, node.step)
        return slice(*[None if p is None else value_of(p, frame, effects) for p in ends])
    if isinstance(node, ast.Tuple):
        return tuple(value_of(e, frame, effects) for e in node.elts)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        binary: Any = _BINARY[type(node.op)]
        return binary(value_of(node.left, frame, effects), value_of(node.right, frame, effects))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        unary: Any = _UNARY[type(node.op)]
        return unary(value_of(node.operand, frame, effects))
    if isinstance(node, ast.Call) and not node.keywords:
        args = [value_of(a, frame, effects) for a in node.args]
        if isinstance(node.func, ast.Attribute) and node.func.attr in _TEST_METHODS:
            base = value_of(node.func.value, frame, effects)
            if isinstance(base, torch.Tensor):
                return getattr(base, node.func.attr)(*args)
        func = value_of(node.func, frame, effects)
        if func is len and len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
            return len(args[0])
        if func in _TEST_CALLS or getattr(func, "__name__", "") == "is_torchdynamo_compiling":
            return func(*args)
    raise Unreadable(f"`{ast.unparse(node)}`")


def _attribute(obj, name: str, effects: Effects):
    try:
        return plain_attribute(obj, name, effects.is_module, functions=True)
    except Unseen as exc:
        raise Unreadable(str(exc)) from None


def steer(node, want: bool, fixed: dict) -> dict | None:
    """Values of the symbolic comparisons under which Python, evaluating the test left to right, finds it
    ``want``; None when none do.  ``fixed``: comparisons whose value is already known."""
    if isinstance(node, Leaf):
        if isinstance(node.value, bool):
            return {} if node.value == want else None
        expr = node.value.node.expr
        if expr in fixed:
            return {} if fixed[expr] == want else None
        return {expr: want}
    if isinstance(node, Not):
        return steer(node.child, not want, fixed)
    conjunction = isinstance(node, All)
    if want == conjunction:                 # every child must agree: and -> all true, or -> all false
        return _together([steer(c, want, fixed) for c in node.children])
    for i, child in enumerate(node.children):   # the first child that can decide, the ones before it passing
        before = [steer(c, conjunction, fixed) for c in node.children[:i]]
        found = _together(before + [steer(child, want, fixed)])
        if found is not None:
            return found
    return None


def _together(parts: list) -> dict | None:
    out: dict = {}
    for part in parts:
        if part is None or any(out.get(k, v) != v for k, v in part.items()):
            return None
        out.update(part)
    return out


def leaves(node):
    if isinstance(node, Leaf):
        yield node
    elif isinstance(node, Not):
        yield from leaves(node.child)
    else:
        for child in node.children:
            yield from leaves(child)


def indicator(node):
    """The test as a SymInt that is 1 where it holds and 0 where not (min/max of the comparisons' sides);
    None when a comparison is not between integers."""
    if isinstance(node, Leaf):
        if isinstance(node.value, bool):
            return int(node.value)
        if node.op is None or not all(isinstance(v, (int, torch.SymInt)) for v in (node.left, node.right)):
            return None
        a, b = node.left, node.right
        clamp = lambda d: torch.sym_min(torch.sym_max(d, 0), 1)      # noqa: E731
        return {"!=": lambda: torch.sym_min(torch.sym_max(a - b, b - a), 1),
                "==": lambda: 1 - torch.sym_min(torch.sym_max(a - b, b - a), 1),
                ">": lambda: clamp(a - b), ">=": lambda: clamp(a - b + 1),
                "<": lambda: clamp(b - a), "<=": lambda: clamp(b - a + 1)}[node.op]()
    if isinstance(node, Not):
        inner = indicator(node.child)
        return None if inner is None else 1 - inner
    parts = [indicator(c) for c in node.children]
    if any(p is None for p in parts):
        return None
    combine = torch.sym_min if isinstance(node, All) else torch.sym_max
    out = parts[0]
    for p in parts[1:]:
        out = combine(out, p)
    return out




def formula_of(node, parts: dict) -> S.Formula:
    if isinstance(node, Leaf):
        if isinstance(node.value, bool):
            return S.TRUE if node.value else S.FALSE
        return parts[node.value.node.expr]
    if isinstance(node, Not):
        return S.neg(formula_of(node.child, parts))
    children = [formula_of(c, parts) for c in node.children]
    return S.conj(*children) if isinstance(node, All) else S.disj(*children)
