"""Python ``if`` statements on sizes, read from the user's source: which bodies a trace may take always.

A guard asked by an ``if`` on sizes splits the declared ranges between two
code paths.  When the body only rebinds names through ops that are
identities wherever its condition is false (a pad by 0, a slice of the whole
dim, a resize to the size a tensor has), both paths compute the same thing
and the trace may take the body for every input (``branch_merge``).  Whether
the body can do anything else is decided here, from the source, not hoped:
a body is accepted only when each of its statements binds local names to
expressions made of names, constants, attribute and item reads, arithmetic
and calls, with no store into an object, no control flow and no operator
that asks Python for a truth value.  Which calls are allowed is decided
against the running frame's values (``Effects``): methods of tensors and
functions from a table of pure ones, never the user's own code (which could
do anything).

The guard's source position comes from the frame that asked: the
conditional jump Python is executing and its position in the source
(``co_positions``, Python 3.11 and later).  The forms read:

* ``if <test>:`` with no ``else``;
* ``if``/``else`` whose one side only binds names to plain reads
  (``table = self.table``): the body is the other side (``_plain_reads``);
* ``if``/``else`` whose ``else`` is the end of the ``if`` body with other
  values in places: the body is the ``if`` body up to there
  (``_else_as_suffix``);
* ``if <test>: return <value>`` at the top of a function: the body is the
  rest of the function (``_early_return``);
* ``flag = <test>`` followed at once by ``if flag:`` (the flag read nowhere
  else), which Swin's patch merging writes: the ``or`` asks its guard on the
  assignment's line.
"""
from __future__ import annotations

import ast
import functools
import linecache
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Iterator

from ..user_source import (
    function_node, instructions, names_bound, names_live_after, names_live_before, names_read,
)

__all__ = ["BranchSite", "Refusal", "SiteAbandoned", "branch_site", "jump_position", "blocks", "within"]


class SiteAbandoned(Exception):
    """What a trace did at a site of the user's code (``key``: file, line) turned out wrong, and why: the
    trace is made again with Python's own behaviour there (each kind of site subclasses this)."""

    def __init__(self, key: tuple[str, int], reason: str):
        super().__init__(f"{key[0]}:{key[1]}: {reason}")
        self.key, self.reason = key, reason


@dataclass(frozen=True)
class Refusal:
    """An ``if`` on sizes whose body the trace must not take for every input, and why."""

    filename: str
    line: int
    reason: str

    @property
    def key(self) -> tuple[str, int]:
        return self.filename, self.line


@dataclass(frozen=True)
class BranchSite:
    """An ``if`` whose body may be taken for every input, if its ops prove to be identities."""

    filename: str
    line: int                            # the ``if`` statement's first line
    test: ast.expr                       # the condition: the if's test, or the value of the flag it tests
    flag: str | None                     # the name the ``if`` tests, when the condition is assigned to it
    asked_lines: tuple[int, int]         # first and last line on which the condition's guards are asked
    body: tuple[ast.stmt, ...]
    body_lines: tuple[int, int]          # first and last line of the body
    bound: frozenset[str]                # names the body binds
    read_elsewhere: frozenset[str]       # of those, the names that may be read after the ``if``
    text: str                            # the ``if`` line as written, for messages
    # ``substitutes``: names that must hold, where the body is skipped, what an expression reads there
    # (name, expression, partner).  An ``if``/``else`` whose other side only binds names to plain reads
    # (``pos = self.pos``) gives those; one whose ``else`` is the end of the ``if`` body with other
    # values in places gives, for each name the body above (the if body's *prefix*) binds, the
    # expression the ``else`` reads in its place (``suffix``: the statements both share) and, where the
    # name's one use is ``t = a <op> name`` opening the suffix (+ - * /), ``a`` as its partner
    suffix: tuple[ast.stmt, ...] = ()
    substitutes: tuple[tuple[str, ast.expr, str | None], ...] = ()
    # ``if <test>: return <value>`` at the top of the function: the body above is then the rest of the
    # function, taken where the test is false, and must return what ``returns`` reads where it is true
    returns: ast.expr | None = None
    runs_where_false: bool = False       # the body is the ``else``, or the rest past an early return

    @property
    def key(self) -> tuple[str, int]:
        return self.filename, self.line

    @property
    def checked(self) -> tuple[ast.stmt, ...]:
        """The statements whose effects must be seen: the body, and the suffix where the ``else`` reads
        values in places (it must leave them as they were until it reads them; else it runs on both
        sides alike)."""
        return self.body + (self.suffix if self.substitutes else ())


_JUMPS = ("POP_JUMP", "JUMP_IF_", "TO_BOOL")
# Statements and expression nodes a body may hold.  ``not``, ``and``/``or``, comparisons and conditional
# expressions ask Python for a truth value (a guard inside the body); comprehensions and lambdas run code
# of their own.
_EXPRESSIONS = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List,
                ast.BinOp, ast.UnaryOp, ast.Call, ast.keyword, ast.Load, ast.operator, ast.unaryop,
                ast.expr_context)


def branch_site(frame: FrameType) -> BranchSite | Refusal | None:
    """The ``if`` whose condition ``frame`` is testing right now; None when it is not testing one."""
    position = jump_position(frame.f_code, frame.f_lasti)
    if position is None:
        return None
    function = function_node(frame.f_code)
    if function is None:
        return None
    line, col = position
    return _site_in(function, frame.f_code.co_filename, line, col, frame.f_code)


def jump_position(code: CodeType, offset: int) -> tuple[int, int] | None:
    """Where in the source the instruction at ``offset`` is, if it is a conditional jump (or its truth
    test)."""
    found = instructions(code).get(offset)
    if found is None:
        return None
    opname, positions = found
    if not opname.startswith(_JUMPS) and "JUMP_IF_" not in opname:
        return None
    if positions is None or positions.lineno is None or positions.col_offset is None:
        return None
    return positions.lineno, positions.col_offset


def blocks(statements: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """Every statement list of a function body, nested ones included (not those of nested functions)."""
    yield statements
    for stmt in statements:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from blocks(inner)
        for handler in getattr(stmt, "handlers", ()):
            yield from blocks(handler.body)
        for case in getattr(stmt, "cases", ()):
            yield from blocks(case.body)


def within(node: ast.stmt | ast.expr, line: int, col: int, until: ast.expr | None = None) -> bool:
    """Whether (line, col) lies in ``node``'s span (ending where ``until`` ends, if given)."""
    end = until or node
    start = (node.lineno, node.col_offset)
    stop = (end.end_lineno or end.lineno, end.end_col_offset or 0)
    return start <= (line, col) <= stop


def _site_in(function, filename: str, line: int, col: int, code: CodeType) -> BranchSite | Refusal | None:
    for block in blocks(function.body):
        for index, stmt in enumerate(block):
            if isinstance(stmt, ast.If) and within(stmt, line, col, until=stmt.test):
                if block is function.body and _is_early_return(stmt):
                    return _early_return(filename, stmt, block[index + 1:])
                return _checked(function, filename, stmt, stmt.test, None, code)
            if isinstance(stmt, ast.Assign) and within(stmt.value, line, col):
                following = block[index + 1] if index + 1 < len(block) else None
                flag = _flag_of(stmt, following)
                if flag is None:
                    return None
                assert isinstance(following, ast.If)
                return _checked(function, filename, following, stmt.value, flag, code, stmt)
    return None


def _only_tested(function: ast.AST, name: str) -> bool:
    """Whether ``name`` is bound once in the function and read only as the whole test of ``if`` statements
    (a flag tested again later: ``if padded: pad ... if padded: crop``)."""
    tests = {id(n.test) for n in ast.walk(function) if isinstance(n, ast.If) and isinstance(n.test, ast.Name)}
    uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
    stores = [n for n in uses if not isinstance(n.ctx, ast.Load)]
    return len(stores) == 1 and all(id(n) in tests for n in uses if isinstance(n.ctx, ast.Load))


def _flag_of(assign: ast.Assign, following: ast.stmt | None) -> str | None:
    """The name of ``flag = <test>`` when the next statement is ``if flag:``."""
    if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name):
        return None
    if not isinstance(assign.value, (ast.BoolOp, ast.Compare, ast.UnaryOp)):
        return None
    name = assign.targets[0].id
    if isinstance(following, ast.If) and isinstance(following.test, ast.Name) and following.test.id == name:
        return name
    return None


def _checked(function, filename: str, stmt: ast.If, test: ast.expr, flag: str | None, code: CodeType,
             assign: ast.Assign | None = None) -> BranchSite | Refusal:
    refuse = functools.partial(Refusal, filename, stmt.lineno)
    body, suffix, substitutes, references, runs_where_false = list(stmt.body), [], {}, {}, False
    if stmt.orelse:
        plain_else, plain_then = _plain_reads(stmt.orelse), _plain_reads(stmt.body)
        if plain_else is not None:                  # if different: resize; else: the cached one
            references = plain_else
        elif plain_then is not None and flag is None:   # if the same: the cached one; else: resize
            body, references, runs_where_false = list(stmt.orelse), plain_then, True
        else:
            found = _else_as_suffix(stmt.body, stmt.orelse)
            if isinstance(found, str):
                return refuse(found)
            body, suffix, substitutes = found
    # the suffix runs on both sides alike: it is checked only when the else reads values in places
    # (``BranchSite.checked``, which the call check reads too)
    for node in body + (suffix if substitutes else []):
        reason = _statement_refusal(node)
        if reason is not None:
            return refuse(reason)
    bound = _bound(body)
    live = names_live_after(function, stmt)
    shared = set(code.co_cellvars) | set(code.co_freevars)
    if flag is not None and ((flag in live and not _only_tested(function, flag)) or flag in shared):
        return refuse(f"the flag `{flag}` is read after the `if` other than by `if {flag}:`")
    if substitutes:
        reason = _substitution_refusal(substitutes, suffix, bound, live | shared)
        if reason is not None:
            return refuse(reason)
    if any(names_read(expr) & bound for expr in references.values()):
        return refuse("the body rebinds a name the other side reads")
    references = {name: expr for name, expr in references.items() if name in live | shared}
    live_after_body = names_live_before(suffix, set(live)) - set(substitutes) - set(references)
    first = assign.lineno if assign is not None else stmt.lineno
    text = linecache.getline(filename, stmt.lineno).strip()
    last = body[-1]
    return BranchSite(filename, stmt.lineno, test, flag, (first, stmt.test.end_lineno or stmt.lineno),
                      tuple(body), (body[0].lineno, last.end_lineno or last.lineno),
                      bound, frozenset(bound & (live_after_body | shared)), text, tuple(suffix),
                      tuple((name, expr, _elementwise_partner(name, suffix, bound))
                            for name, expr in substitutes.items())
                      + tuple((name, expr, None) for name, expr in references.items()),
                      runs_where_false=runs_where_false)


def _is_plain_read(expr: ast.expr) -> bool:
    """Names and attributes only (``self.position_embeddings``): read where the body ends, it runs no code."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Load)) for n in ast.walk(expr))


def _bound(stmts) -> frozenset[str]:
    return frozenset(name for node in stmts for name in names_bound(node))


def _plain_reads(stmts: list[ast.stmt]) -> dict[str, ast.expr] | None:
    """``{name: expression}`` when every statement binds one name to a plain read (names and attributes:
    ``pos = self.position_embeddings``), the side of a branch that keeps a cached value; else None."""
    found: dict[str, ast.expr] = {}
    for stmt in stmts:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and _is_plain_read(stmt.value)):
            return None
        if names_read(stmt.value) & set(found):
            return None                              # reads a name the side itself bound
        found[stmt.targets[0].id] = stmt.value
    return found


def _is_early_return(stmt: ast.If) -> bool:
    return not stmt.orelse and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return) \
        and stmt.body[0].value is not None


def _early_return(filename: str, stmt: ast.If, rest: list[ast.stmt]) -> BranchSite | Refusal:
    """``if <test>: return <value>`` followed by the rest of the function, which ends in a ``return``
    (ViT-style tables: ``return self.position_embeddings`` when the grid is the configured one, else
    resize it).  The rest is the body taken for every input."""
    refuse = functools.partial(Refusal, filename, stmt.lineno)
    early = stmt.body[0]
    assert isinstance(early, ast.Return) and early.value is not None
    value = early.value
    if not _is_plain_read(value):
        return refuse(f"the early return of `{ast.unparse(value)}`, not a plain name or attribute")
    if not rest or not isinstance(rest[-1], ast.Return) or rest[-1].value is None:
        return refuse("the rest of the function does not end in a `return`")
    for node in rest[:-1]:
        reason = _statement_refusal(node)
        if reason is not None:
            return refuse(reason)
    reason = _expression_refusal(rest[-1].value, rest[-1].lineno)
    if reason is not None:
        return refuse(reason)
    bound = _bound(rest)
    if names_read(value) & bound:
        return refuse(f"the rest of the function rebinds a name `{ast.unparse(value)}` reads")
    last = rest[-1]
    asked = (stmt.lineno, stmt.test.end_lineno or stmt.lineno)
    return BranchSite(filename, stmt.lineno, stmt.test, None, asked,
                      tuple(rest), (rest[0].lineno, last.end_lineno or last.lineno), bound, frozenset(),
                      linecache.getline(filename, stmt.lineno).strip(), returns=value, runs_where_false=True)


def _else_as_suffix(then: list[ast.stmt], orelse: list[ast.stmt]):
    """``(prefix, suffix, substitutes)`` when ``orelse`` is the last statements of ``then`` with, in places
    where ``then`` reads a name its prefix binds, another expression (TimeSformer: ``embeddings =
    embeddings + new_pos_embed`` against ``embeddings = embeddings + self.position_embeddings``); else
    why not."""
    if len(orelse) >= len(then):
        return "the `else` is not the end of the `if` body"
    prefix, suffix = then[:len(then) - len(orelse)], then[len(then) - len(orelse):]
    bound = set(_bound(prefix))
    substitutes: dict[str, ast.expr] = {}
    direct: set[str] = set()
    for mine, theirs in zip(suffix, orelse):
        if not _alike(mine, theirs, bound, substitutes, direct):
            return "the `else` differs from the end of the `if` body other than by a value the body computes"
    if direct & set(substitutes):
        return "the `else` reads a name the body binds both as it was and replaced"
    return prefix, suffix, substitutes


_POSITIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset", "ctx")


def _alike(mine: ast.AST, theirs: ast.AST, bound: set[str], substitutes: dict, direct: set[str]) -> bool:
    """The same tree, but where ``mine`` reads a name of ``bound`` and ``theirs`` holds an expression
    (the same expression for every read of the name).  A name of ``bound`` read on both sides goes to
    ``direct``: the ``else`` reads its value from before the ``if`` (checked as any name read later)."""
    if isinstance(mine, ast.Name) and isinstance(mine.ctx, ast.Load) and mine.id in bound:
        if isinstance(theirs, ast.Name) and theirs.id == mine.id:
            direct.add(mine.id)
            return True
        if not isinstance(theirs, ast.expr):
            return False
        seen = substitutes.setdefault(mine.id, theirs)
        return ast.dump(seen) == ast.dump(theirs)
    if type(mine) is not type(theirs):
        return False
    for name, value in ast.iter_fields(mine):
        if name in _POSITIONS:
            continue
        other = getattr(theirs, name, None)
        if isinstance(value, list):
            if not isinstance(other, list) or len(value) != len(other):
                return False
            if not all(_alike(a, b, bound, substitutes, direct) if isinstance(a, ast.AST) else a == b
                       for a, b in zip(value, other)):
                return False
        elif isinstance(value, ast.AST):
            if not isinstance(other, ast.AST) or not _alike(value, other, bound, substitutes, direct):
                return False
        elif value != other:
            return False
    return True


_ELEMENTWISE = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _elementwise_partner(name: str, suffix: list[ast.stmt], bound: frozenset) -> str | None:
    """``a`` when the suffix opens with ``t = a <op> name`` (+ - * /), its one read of ``name``, and the
    prefix does not bind ``a``: then ``a`` alone lays out the result (see ``branch_merge``)."""
    first = suffix[0]
    if not (isinstance(first, ast.Assign) and len(first.targets) == 1
            and isinstance(first.targets[0], ast.Name)
            and isinstance(first.value, ast.BinOp) and isinstance(first.value.op, _ELEMENTWISE)):
        return None
    left, right = first.value.left, first.value.right
    if not (isinstance(left, ast.Name) and isinstance(right, ast.Name) and right.id == name
            and left.id != name and left.id not in bound):
        return None
    reads = sum(1 for stmt in suffix for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))
    return left.id if reads == 1 else None


def _substitution_refusal(substitutes: dict, suffix: list[ast.stmt], bound: frozenset,
                          live_after: set[str]) -> str | None:
    """Why the ``else`` side's expressions may not stand for the prefix's names.  Each is read where the
    prefix ends, so it must be a plain read (names and attributes) of values neither the prefix nor the
    suffix rebinds; each name it stands for is read only in its places, and not after the ``if``."""
    suffix_bound = _bound(suffix)
    for name, expr in substitutes.items():
        if not _is_plain_read(expr):
            return f"the `else` reads `{ast.unparse(expr)}`, which is not a plain name or attribute"
        if names_read(expr) & (bound | suffix_bound):
            return f"`{ast.unparse(expr)}` reads a name the `if` body rebinds"
        if name in live_after or name in suffix_bound:
            return f"`{name}` is read after the `if`"
    return None


def _statement_refusal(stmt: ast.stmt) -> str | None:
    """Why a body statement may have effects the trace cannot see; None when it only binds local names."""
    if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
        return None
    if isinstance(stmt, ast.Assign):
        targets, value = stmt.targets, stmt.value
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) and stmt.value is not None:
        targets, value = [stmt.target], stmt.value
    else:
        return f"line {stmt.lineno}: a `{type(stmt).__name__}` statement"
    for target in targets:
        if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store)) for n in ast.walk(target)):
            return f"line {stmt.lineno}: a store into an object"
    return _expression_refusal(value, stmt.lineno)


def _expression_refusal(value: ast.expr, line: int) -> str | None:
    for node in ast.walk(value):
        if not isinstance(node, _EXPRESSIONS) or isinstance(node, ast.Not):
            return f"line {line}: `{type(node).__name__}` in an expression"
        if isinstance(node, ast.Call) and not isinstance(node.func, (ast.Name, ast.Attribute)):
            return f"line {line}: a call of a computed function"
    return None
