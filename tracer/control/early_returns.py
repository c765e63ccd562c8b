"""An ``if`` that returns early, made an ``if``/``else`` so that it runs as one cond.

``if test: ...; return a`` followed by the rest of the function computes the
same as ``if test: ...; r = a`` / ``else: <the rest>; r = b`` / ``return r``:
each side binds the value it returns, and ``branch_cond`` runs that ``if`` as
a cond like any other.  A frame already running cannot change its code, so an
``if`` found in one trace is rewritten for the next (``rewrite``): the
functions running that code get the rewritten code for the length of each
later trace (``swapped``) and their own back at its end.  The rewritten code
keeps the user's lines and does in plain Python what the original does, so
another thread that calls the function meanwhile sees the same behaviour.

Only a plain function (not a generator or a coroutine) whose ``if`` is one of
its top-level statements, and whose other returns are the last statement of
either side, is rewritten; the reason is given for any other.
"""
from __future__ import annotations

import ast
import copy
import gc
import itertools
import os
import types
import weakref
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import TypeGuard

from ..user_source import function_made

__all__ = ["EarlyReturn", "NotRewritten", "rewrite", "rewritten", "earlier_rewrites", "swapped",
           "returns_early"]

RETURNED = "shapeproof_returned"       # the local the rewritten sides bind to the value they return
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200     # generator, coroutine, iterable coroutine, async gen.
_SIGNATURE = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_freevars")


class NotRewritten(Exception):
    pass


# the rewrites made in this process, by token, the latest few: an export's later traces name them (a trace
# in another process, a Ray task, does not find the token and finds the if again)
_MADE: OrderedDict[str, EarlyReturn] = OrderedDict()
_KEPT = 256
_TOKENS = itertools.count()


@dataclass(frozen=True, eq=False)
class EarlyReturn:
    """A function's code with one early-returning ``if`` made an ``if``/``else``, and the functions running
    it (held weakly: the export does not keep the user's functions alive)."""

    key: tuple[str, int]
    token: str
    original: CodeType
    rewritten: CodeType
    functions: tuple[weakref.ref, ...]


def returns_early(stmt: ast.If) -> bool:
    return bool(stmt.body) and isinstance(stmt.body[-1], ast.Return)


def rewrite(frame: FrameType, function: ast.FunctionDef | ast.AsyncFunctionDef, stmt: ast.If,
            key: tuple[str, int]) -> EarlyReturn:
    """The function ``frame`` runs, with ``stmt`` (an ``if`` whose body ends in ``return``) and the rest of
    the function as its two sides; ``NotRewritten`` with the reason where the function is not of that form."""
    code = frame.f_code
    if code.co_flags & _GENERATOR_FLAGS or isinstance(function, ast.AsyncFunctionDef):
        raise NotRewritten("the if returns early from a generator or a coroutine")
    index = next((i for i, s in enumerate(function.body) if s is stmt), None)
    if index is None:
        raise NotRewritten("the if that returns early is not a top-level statement of its function")
    rest = [*stmt.orelse, *function.body[index + 1:]]
    if not rest or not isinstance(rest[-1], ast.Return):
        rest = [*rest, ast.copy_location(ast.Return(None), stmt)]
    for side in (stmt.body, rest):
        for node in side[:-1]:
            if any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await)) for n in _walk_own(node)):
                raise NotRewritten(f"line {node.lineno}: a return inside a side of the if that returns early")
    end = (function.end_lineno or stmt.lineno) + 1
    new = copy.deepcopy(function)
    new.decorator_list = []
    two_sided = ast.copy_location(ast.If(copy.deepcopy(stmt.test), _binding(stmt.body), _binding(rest)), stmt)
    two_sided.end_lineno = max(n.end_lineno or n.lineno for n in (*two_sided.body, *two_sided.orelse))
    new.body = [*copy.deepcopy(function.body[:index]), two_sided,
                ast.Return(ast.Name(RETURNED, ast.Load()), lineno=end, col_offset=0, end_lineno=end,
                           end_col_offset=0)]
    rewritten = _compiled(new, code)
    function_made(rewritten, new)
    functions = tuple(weakref.ref(f) for f in dict.fromkeys(_functions_running(frame)))
    if not functions:
        raise NotRewritten("the function that returns early was not found")
    found = EarlyReturn(key, f"{os.getpid()}.{next(_TOKENS)}", code, rewritten, functions)
    _MADE[found.token] = found
    while len(_MADE) > _KEPT:
        _MADE.popitem(last=False)
    return found


def earlier_rewrites() -> list[EarlyReturn]:
    """The rewrites earlier exports of this process made whose functions still run the original code: a
    later export runs them from its first trace (the rewrite is pure), instead of finding each ``if``
    again in a trace that then ends."""
    return [r for r in _MADE.values()
            if any(f is not None and f.__code__ is r.original for f in (ref() for ref in r.functions))]


def rewritten(token: str) -> EarlyReturn | None:
    """The rewrite ``token`` names, where this process made it and it is still held."""
    return _MADE.get(token)


@contextmanager
def swapped(rewrites):
    """Within: each function of ``rewrites`` runs its rewritten code."""
    done = []
    try:
        for found in rewrites:
            for ref in found.functions:
                function = ref()
                if function is not None and function.__code__ is found.original:
                    function.__code__ = found.rewritten
                    done.append((function, found.original))
        yield
    finally:
        for function, original in reversed(done):
            function.__code__ = original


def _binding(side: list[ast.stmt]) -> list[ast.stmt]:
    """The side with its closing ``return v`` made ``RETURNED = v``."""
    *body, returned = side
    assert isinstance(returned, ast.Return), "each side of an early return ends in its return"
    value = returned.value if returned.value is not None else ast.Constant(None)
    assign = ast.Assign([ast.Name(RETURNED, ast.Store())], copy.deepcopy(value))
    return [*copy.deepcopy(body), ast.copy_location(assign, returned)]


def _walk_own(node: ast.AST):
    """``ast.walk`` that does not enter nested functions, lambdas and classes (their returns are theirs)."""
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _walk_own(child)


def _compiled(function: ast.FunctionDef | ast.AsyncFunctionDef, original: CodeType) -> CodeType:
    """``function`` compiled as ``original`` was: inside a function that binds its free variables (a
    closure's cells, ``__class__`` for ``super()``), so the code takes the same closure."""
    cells: list[ast.stmt] = [ast.Assign([ast.Name(v, ast.Store())], ast.Constant(None))
                             for v in original.co_freevars]
    outer = ast.FunctionDef(name="shapeproof_outer", args=_no_arguments(), decorator_list=[], returns=None,
                            body=[*cells, function, ast.Return(ast.Constant(None))])
    module = ast.Module(body=[ast.copy_location(outer, function)], type_ignores=[])
    ast.fix_missing_locations(module)
    try:
        compiled = compile(module, original.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise NotRewritten(f"the rewritten function does not compile: {exc}") from None
    outer_code = next(c for c in compiled.co_consts if isinstance(c, CodeType))
    inner = next((c for c in outer_code.co_consts if isinstance(c, CodeType) and c.co_name == function.name),
                 None)
    if inner is None or any(getattr(inner, a) != getattr(original, a) for a in _SIGNATURE):
        raise NotRewritten("the rewritten function does not take the original's arguments and closure")
    return inner.replace(co_name=original.co_name, co_qualname=original.co_qualname)


def _no_arguments() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])


def _functions_running(frame: FrameType) -> list[types.FunctionType]:
    """The functions whose code ``frame`` runs: a module's function, or a method of its first argument's
    class (or of the class itself); else any the collector finds (objects a ``gc.freeze`` kept from it are
    not searched)."""
    code = frame.f_code
    candidates = [frame.f_globals.get(code.co_name)]
    first = frame.f_locals.get(code.co_varnames[0]) if code.co_argcount else None
    if first is not None:
        owner = first if isinstance(first, type) else type(first)
        candidates += [vars(c).get(code.co_name) for c in owner.__mro__]
    found = [f for f in (getattr(c, "__func__", c) for c in candidates) if _runs(f, code)]
    return found or [f for f in gc.get_referrers(code) if _runs(f, code)]


def _runs(function, code: CodeType) -> TypeGuard[types.FunctionType]:
    return isinstance(function, types.FunctionType) and function.__code__ is code
