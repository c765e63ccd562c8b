"""A Python ``if`` on sizes whose sides differ, run as one ``torch.cond``: both sides kept, each traced under
its condition (``cond``), the right one taken at run time.

Branch merging takes an ``if``'s body for every input where it is an identity
on the other side (``branch_merge``); where it is not (a side that resizes,
reshapes by other sizes, or calls a layer), the ``if`` is read from the
user's source and each side becomes a function of the values it reads, which
returns the names it binds that are read after the ``if``:

* the test must be comparisons of sizes joined by ``and``, ``or`` and ``not``,
  whose SymBool is the cond's predicate, or a boolean of data (``if mask.any():``, ``if
  durations.sum() == 0:``), which the program computes at run time;
* each side must be straight-line code binding local names (assignments,
  nested ``if``s, a log call): a ``return`` (but an early one, rewritten by
  ``early_returns``), a loop, a ``raise``, a store into an object, another
  call made for its effect (a print, an append) or a ``global`` keeps
  today's behaviour, with the reason;
* a name read after the ``if`` must be bound by both sides, or before the
  ``if`` (the side that does not bind it passes it through).

The trace then calls ``torch.cond(pred, true_side, false_side, ())``, binds
the names it returns in the user's frame (``frame_locals``), answers the
jump so that Python runs neither side (its ``else``, if any, is stepped over
by a line event of the frame), and goes on.  Calls inside a side run at trace
time on both sides (a layer called on the side an example does not take).  A
conversion that fails raises ``BranchNotConverted`` into the trace, which
export makes again with that ``if`` a guard, as before (``refused_after``).
"""
from __future__ import annotations

import ast
import copy
import functools
import logging
import math
import operator
import sys
import types
import warnings
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import NoReturn

import torch

from ..sizes.symbolic_casts import SymbolicInt, sqrt_of_sizes
from ..user_source import function_made, function_node, names_bound, names_live_after, names_read
from .branch_merge import no_new_frames
from .branch_sites import SiteAbandoned, blocks, jump_position, within
from .branch_tests import All, Leaf, Not, Unreadable, indicator, leaves, steer, test_tree, value_of
from .early_returns import EarlyReturn, NotRewritten, earlier_rewrites, returns_early, rewrite, rewritten
from .effects import EFFECTS
from .frame_locals import set_locals

__all__ = ["BranchConds", "BranchNotConverted", "ConvertedBranch"]

# statements a side may hold: straight-line code binding local names (``if``s nest)
_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Pass, ast.If)


class BranchNotConverted(SiteAbandoned):
    """An ``if`` being run as a cond could not be: the trace is made again with it a guard."""


@dataclass(frozen=True)
class ConvertedBranch:
    """An ``if`` run as one ``torch.cond``: where, and the names its sides bind."""

    key: tuple[str, int]
    text: str
    outputs: tuple[str, ...]


class _NotConvertible(Exception):
    pass


class BranchConds:
    """The ``if``s of one trace run as ``torch.cond`` (``EngineShapeEnv.branch_conds``).  ``refused``:
    sites (file, line) an earlier attempt could not convert; ``enabled`` False converts none."""

    def __init__(self, env, unmerged: frozenset = frozenset(), enabled: bool = True):
        self.env, self.enabled = env, enabled
        # (file, line) -> why an earlier attempt could not convert it
        self.refused = {(k[1], k[2]): k[3] for k in unmerged if isinstance(k, tuple) and k and k[0] == "cond"}
        found = (rewritten(k[3]) for k in unmerged if isinstance(k, tuple) and k and k[0] == "early return")
        asked = [r for r in found if r is not None]
        # functions this trace runs rewritten: those an earlier trace asked for, and earlier exports' own
        self.rewrites = asked + [r for r in earlier_rewrites() if r not in asked] if enabled else asked
        self.rewritten_now: list[EarlyReturn] = []              # early returns found by this trace
        self.converted: list[ConvertedBranch] = []
        self.refusals: dict[tuple[str, int], str] = {}
        self.failed: dict[tuple[str, int], str] = {}
        self._steering: tuple[FrameType, dict] | None = None   # the converted test Python is still evaluating

    def convert(self, frame: FrameType, expr=None, data: torch.SymBool | None = None) -> bool | None:
        """Run the ``if`` whose test ``frame`` is asking ``expr`` of as one cond; the answer to give the
        jump, or None to leave the question a guard.  ``data``: the truth asked where it is a boolean read
        from a tensor (``if mask.any():``); else the test is read from the source (sizes)."""
        steering = self._steering
        if steering is not None and steering[0] is frame:     # a later operand of a converted test
            return steering[1].get(expr)
        found = _if_statement(frame) if self.enabled else None
        if found is None:
            return None
        stmt, function, key, next_line = found
        if key in self.refused:
            self._refuse(key, self.refused[key])
            return None
        try:
            if returns_early(stmt):
                self._rewrite(stmt, function, key, frame, data)
            if data is None:
                pred, answers, tree = self._steered(stmt, frame)
                swap = False
            else:
                pred, swap, tree = data, _negations(stmt.test), None
                answers = {expr: swap}
            if expr not in answers:
                raise _NotConvertible("the question is not one of the test's comparisons")
            true_fn, false_fn, inputs, outputs = _sides(stmt, function, frame)
        except _NotConvertible as exc:
            self._refuse(key, str(exc))
            return None
        except Unreadable as exc:
            self._refuse(key, f"`{exc}` is not read as sizes, data or a known call")
            return None
        values = tuple(frame.f_locals[name] for name in inputs)
        sides = (lambda: false_fn(*values), lambda: true_fn(*values)) if swap else \
            (lambda: true_fn(*values), lambda: false_fn(*values))
        try:
            if tree is not None and _size_arithmetic(stmt, frame, values):
                result = self._piecewise(pred, tree, *sides)
            else:
                result = torch.cond(pred, *sides, ())  # type: ignore[arg-type]
        except BranchNotConverted:
            raise
        except Exception as exc:  # noqa: BLE001  (the next attempt makes this if a guard)
            self.fail(key, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        self._steering = (frame, answers)
        self._after_test(frame, stmt, next_line, dict(zip(outputs, result)))
        self.converted.append(ConvertedBranch(key, f"if {ast.unparse(stmt.test)}:", outputs))
        return answers[expr]

    def _piecewise(self, pred: torch.SymBool, tree, true_side, false_side) -> tuple:
        """The names an ``if`` of size arithmetic binds (TF's "SAME" padding: ``pad = max(k - s, 0)`` or
        ``max(k - h % s, 0)``), each one size that is its true side's where the test holds and its false
        side's where not: no cond, no guard.  Each side runs in Python under its condition, and what it
        binds is read as the constant it is there where it is one (proven); one side's value serves where
        the engine proves the other equal to it on its side, else the size is ``false + holds * (true -
        false)`` (``holds``: the test's 0/1 indicator), in SymInt arithmetic the program computes."""
        condition = pred.node.expr
        with self.env.assuming(condition, True):
            on_true = [self._constant_on_side(condition, True, v) for v in true_side()]
        with self.env.assuming(condition, False):
            on_false = [self._constant_on_side(condition, False, v) for v in false_side()]
        merged, holds = [], None
        for a, b in zip(on_true, on_false):
            if not all(isinstance(v, (int, torch.SymInt)) and not isinstance(v, bool) for v in (a, b)):
                raise _NotConvertible("a side of size arithmetic binds something other than a size")
            if self.env.equal_on_side(condition, False, a, b):
                merged.append(a)
            elif self.env.equal_on_side(condition, True, a, b):
                merged.append(b)
            else:
                holds = _indicator(self.env, tree) if holds is None else holds      # once per if
                if holds is None:
                    raise _NotConvertible("the test has no 0/1 indicator in sizes")
                merged.append(b + holds * (a - b))
        return tuple(merged)

    def _constant_on_side(self, condition, taken: bool, value):
        """``value`` (a size a side binds, within ``assuming``) as the constant it is wherever the side
        runs, where it is one: ``max(3 - h % 2, 0)`` is 2 where ``h`` is odd."""
        point = self.env.engine.side_point
        if not isinstance(value, torch.SymInt) or not point:
            return value
        at = {s: point[e] for s, e in self.env.symbol_map.items() if e in point}
        there = value.node.expr.xreplace(at)
        if not there.is_number or not self.env.equal_on_side(condition, taken, value, int(there)):
            return value
        return int(there)

    def _rewrite(self, stmt: ast.If, function, key: tuple[str, int], frame: FrameType, data) -> NoReturn:
        """End this trace so that the next runs the function with the ``if`` that returns early made an
        ``if``/``else`` (``early_returns``), where its test and sides are ones a cond takes."""
        if data is None:
            self._steered(stmt, frame)
        else:
            _negations(stmt.test)
        try:
            found = rewrite(frame, function, stmt, key)
        except NotRewritten as exc:
            raise _NotConvertible(str(exc)) from None
        rest = function.body[function.body.index(stmt) + 1:]
        for node in (*stmt.body, *stmt.orelse, *rest):
            if not isinstance(node, ast.Return):
                _check_statement(node, frame)
        self.rewritten_now.append(found)
        raise BranchNotConverted(key, "the if returns early: the next trace runs it as an if/else")

    def _steered(self, stmt: ast.If, frame: FrameType) -> tuple[torch.SymBool, dict, object]:
        """The test's predicate, the answers to its comparisons that lead Python past the body, and the
        test's tree."""
        tree = test_tree(stmt.test, frame, EFFECTS)
        pred = _truth(tree)
        if not isinstance(pred, torch.SymBool):
            raise _NotConvertible("the test is not a comparison of sizes")
        fixed = {}
        for leaf in leaves(tree):
            if isinstance(leaf.value, torch.SymBool):
                known = self.env._maybe_evaluate_static(leaf.value.node.expr)
                if known is not None:
                    fixed[leaf.value.node.expr] = bool(known)
        answers = steer(tree, False, fixed)
        if answers is None:
            raise _NotConvertible("no answer to the test's comparisons passes the body")
        return pred, answers, tree

    def _after_test(self, frame: FrameType, stmt: ast.If, next_line: int, bound: dict) -> None:
        """Once Python has left the test (its jump past the body answered): bind the cond's outputs in the
        frame and, where the jump lands in the ``else``, go on at the statement after the ``if`` instead."""
        test_lines = range(stmt.test.lineno, (stmt.test.end_lineno or stmt.test.lineno) + 1)
        end = max((n.end_lineno or n.lineno for n in stmt.orelse), default=0)
        else_lines = range(stmt.orelse[0].lineno, end + 1) if stmt.orelse else range(0)
        previous_global, previous_local = sys.gettrace(), frame.f_trace

        def restore():
            frame.f_trace = previous_local
            sys.settrace(previous_global)
            self._steering = None

        def watch(watched, event, arg):
            if event == "line" and watched.f_lineno in test_lines:
                return watch                    # the test goes on (over several lines)
            if event == "line":
                set_locals(watched, bound)
                if watched.f_lineno in else_lines:
                    watched.f_lineno = next_line
            restore()
            return None

        sys.settrace(previous_global if previous_global is not None else no_new_frames)
        frame.f_trace = watch
        frame.f_trace_lines = True

    def _refuse(self, key: tuple[str, int], reason: str) -> None:
        """The ``if`` stays a guard; its fix in an error says why (``shapes.ShapeEnv.branch_notes``)."""
        self.refusals.setdefault(key, reason)
        self.env.engine.branch_notes.setdefault(key, reason)

    def fail(self, key: tuple[str, int], reason: str) -> NoReturn:
        self.failed.setdefault(key, reason)
        raise BranchNotConverted(key, reason)

    def refused_after(self, suspect: bool) -> frozenset:
        """The ``if``s the next attempt must leave as guards: those whose conversion failed and, when
        ``suspect`` (the trace failed, and not because a site refused), every one it converted (it may be
        what broke it)."""
        failed = dict(self.failed)
        if suspect:
            for branch in self.converted:
                failed.setdefault(branch.key, "the trace failed after the if was run as a cond")
        return frozenset({*(("cond", *key, reason) for key, reason in failed.items()),
                          *(("early return", *r.key, r.token) for r in self.rewritten_now)})


def _if_statement(frame: FrameType) -> tuple[ast.If, ast.AST, tuple[str, int], int] | None:
    """The ``if`` statement whose test ``frame`` is jumping on, its function, its key and the first line of
    the statement after it (None where there is none: the ``if`` ends its block)."""
    position = jump_position(frame.f_code, frame.f_lasti)
    function = function_node(frame.f_code) if position is not None else None
    if function is None or position is None:
        return None
    line, col = position
    for block in blocks(function.body):
        for index, stmt in enumerate(block):
            if isinstance(stmt, ast.If) and within(stmt, line, col, until=stmt.test):
                if index + 1 == len(block):
                    return None
                return stmt, function, (frame.f_code.co_filename, stmt.lineno), block[index + 1].lineno
    return None


def _negations(test: ast.expr) -> bool:
    """Whether a test on data is the ``not`` of its boolean (an odd number of them); one that joins it with
    others by ``and``/``or`` is not converted (its other operands would be asked too)."""
    odd = False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, odd = test.operand, not odd
    if isinstance(test, ast.BoolOp):
        raise _NotConvertible("a test on data joined with others by and/or")
    return odd


def _truth(tree) -> bool | torch.SymBool:
    """The tree's truth as Python would find it, every comparison evaluated (they are sizes: no effects)."""
    if isinstance(tree, Leaf):
        if not isinstance(tree.value, (bool, torch.SymBool)):
            raise _NotConvertible("the test is not a comparison of sizes")
        return tree.value
    if isinstance(tree, Not):
        inner = _truth(tree.child)
        return torch.sym_not(inner) if isinstance(inner, torch.SymBool) else not inner
    conjunction = isinstance(tree, All)
    symbolic: list[torch.SymBool] = []
    for child in tree.children:
        value = _truth(child)
        if isinstance(value, torch.SymBool):
            symbolic.append(value)
        elif value != conjunction:                  # a False in an ``and``, a True in an ``or``
            return value
    if not symbolic:
        return conjunction
    return functools.reduce(operator.and_ if conjunction else operator.or_, symbolic)


def _sides(stmt: ast.If, function: ast.AST, frame: FrameType):
    """``(true side, false side, inputs, outputs)``: each side a function of the ``inputs`` (locals it reads)
    returning the ``outputs`` (names bound in either side and read after the ``if``)."""
    for side in (stmt.body, stmt.orelse):
        for node in side:
            _check_statement(node, frame)
    binds = [{n for node in side for n in _bound_names(node)} for side in (stmt.body, stmt.orelse)]
    outputs = tuple(sorted((binds[0] | binds[1]) & names_live_after(function, stmt)))
    if not outputs:
        raise _NotConvertible("neither side binds a name read after the if")
    for name in outputs:
        if name not in frame.f_locals and not (name in binds[0] and name in binds[1]):
            raise _NotConvertible(f"`{name}`, read after the if, is bound by one side only")
    read = {n for side in (stmt.body, stmt.orelse) for node in side for n in names_read(node)}
    statements = (*stmt.body, *stmt.orelse)
    if any(_zero_argument_super(n) for node in statements for n in ast.walk(node)):
        read |= set(_super_arguments(frame))
    inputs = tuple(sorted((read | set(outputs)) & set(frame.f_locals)))
    sides = [_function(side, stmt, inputs, outputs, frame) for side in (stmt.body, stmt.orelse)]
    return sides[0], sides[1], inputs, outputs


# calls a side of size arithmetic may make: Python's own, on ints (SymInts make them symbolic), and the
# stand-ins a trace gives the user's modules for int() and math.sqrt() (``tracer/sizes/user_globals``)
_SIZE_FUNCTIONS = {max, min, abs, int, divmod, len, math.ceil, math.floor, math.sqrt, torch.sym_max,
                   torch.sym_min, torch.sym_int, SymbolicInt, sqrt_of_sizes}


def _indicator(env, tree):
    """The test as a 0/1 size: a comparison with 0 of a size that is 0 or 1 (``h % 2 == 0``: ``1 - h % 2``)
    is read directly; any other test by ``branch_tests.indicator`` (min/max of its comparisons)."""
    if isinstance(tree, Leaf) and tree.op in ("==", "!=") and isinstance(tree.left, torch.SymInt) \
            and isinstance(tree.right, int) and tree.right == 0:
        bounds = env.bound_sympy(tree.left.node.expr)
        if bounds.lower >= 0 and bounds.upper <= 1:
            return 1 - tree.left if tree.op == "==" else tree.left
    return indicator(tree)


def _size_arithmetic(stmt: ast.If, frame: FrameType, values: tuple) -> bool:
    """Whether both sides of the ``if`` only compute sizes: no tensor among what they read, and no call but
    to Python's arithmetic (``max``, ``min``, ``abs``, ``math.ceil``, ...)."""
    if any(isinstance(v, torch.Tensor) for v in values):
        return False
    for node in (n for side in (stmt.body, stmt.orelse) for s in side for n in ast.walk(s)):
        if isinstance(node, ast.Call):
            try:
                called = value_of(node.func, frame, EFFECTS)
            except Unreadable:
                return False
            if isinstance(called, functools.partial):   # torch.export's max/min over tensors or sizes
                called = called.keywords.get("real_callable", called)
            if called not in _SIZE_FUNCTIONS:
                return False
    return True


def _zero_argument_super(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
            and not node.args and not node.keywords)


def _super_arguments(frame: FrameType) -> tuple[str, str]:
    """What ``super()`` reads of the frame: its ``__class__`` cell and its first argument (a side is a
    function of its own, where ``super()`` is given them: ``_ExplicitSuper``)."""
    code = frame.f_code
    if not code.co_argcount or "__class__" not in frame.f_locals or code.co_varnames[0] not in frame.f_locals:
        raise _NotConvertible("a side calls super() outside a method")
    return "__class__", code.co_varnames[0]


class _ExplicitSuper(ast.NodeTransformer):
    def __init__(self, first: str):
        self.first = first

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if _zero_argument_super(node):
            node.args = [ast.Name("__class__", ast.Load()), ast.Name(self.first, ast.Load())]
        return self.generic_visit(node)


def _check_statement(node: ast.stmt, frame: FrameType) -> None:
    if not isinstance(node, _STATEMENTS):
        raise _NotConvertible(f"line {node.lineno}: a `{type(node).__name__}` statement in a side")
    if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant) and not _a_log(node, frame):
        # a call for its effect (a print, a list's append) would run as each side is traced
        raise _NotConvertible(f"line {node.lineno}: a call made for its effect in a side")
    if isinstance(node, ast.If):
        for inner in (*node.body, *node.orelse):
            _check_statement(inner, frame)
        return
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    for target in targets:
        if target is not None and not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store))
                                          for n in ast.walk(target)):
            in_place = any(isinstance(n, ast.Subscript) for n in ast.walk(target))
            what = "writes into an item in place" if in_place else "stores into an attribute (module state)"
            raise _NotConvertible(f"line {node.lineno}: `{ast.unparse(node)}` {what}, which a side of a "
                                  "torch.cond cannot do")


def _a_log(node: ast.Expr, frame: FrameType) -> bool:
    """Whether the statement is a call of a logger's method or ``warnings.warn``: it runs at trace time, as
    torch.export runs it (here once per side traced), and is no effect of the program."""
    if not isinstance(node.value, ast.Call):
        return False
    try:
        called = value_of(node.value.func, frame, EFFECTS)
    except Unreadable:
        return False
    return called is warnings.warn or isinstance(getattr(called, "__self__", None), logging.Logger)


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.If):
        return {n for inner in (*node.body, *node.orelse) for n in _bound_names(inner)}
    return set(names_bound(node))


def _function(statements: list[ast.stmt], stmt: ast.If, inputs: tuple[str, ...], outputs: tuple[str, ...],
              frame: FrameType) -> types.FunctionType:
    """``statements`` as a function of ``inputs`` returning ``outputs``, compiled with their own lines of the
    user's file (so a guard asked there names that line), resolving globals in the user's module."""
    at = statements[0] if statements else stmt
    body = [copy.deepcopy(s) for s in statements] or [ast.copy_location(ast.Pass(), at)]
    if "__class__" in inputs:
        body = [_ExplicitSuper(frame.f_code.co_varnames[0]).visit(s) for s in body]
    names = ast.Tuple([ast.Name(o, ast.Load()) for o in outputs], ast.Load())
    # on a line of its own (after the last statement), so that stepping over an inner if's else lands on it
    line = (body[-1].end_lineno or body[-1].lineno) + 1
    returned = ast.Return(names, lineno=line, col_offset=0, end_lineno=line, end_col_offset=0)
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in inputs], kwonlyargs=[],
                              kw_defaults=[], defaults=[])
    side = ast.copy_location(ast.FunctionDef(name="side_of_if", args=arguments, body=[*body, returned],
                                             decorator_list=[], returns=None), at)
    module = ast.Module(body=[side], type_ignores=[])
    ast.fix_missing_locations(module)
    compiled = compile(module, frame.f_code.co_filename, "exec")
    inner = next(c for c in compiled.co_consts if isinstance(c, CodeType))
    function_made(inner, side)                 # an if inside the side is read from these statements
    return types.FunctionType(inner, frame.f_globals, "side_of_if")
