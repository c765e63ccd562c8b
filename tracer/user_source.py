"""The user's source, read where the tracer needs it: a function's own lines, an instruction's position, the
names a statement reads and binds.

Both halves of the tracer read the code the user wrote: the sizes half to see
how a module uses ``range``, ``int`` and ``math`` (``sizes.user_globals``) and
which attribute access asked a question (``sizes.hintless``), the control half
to find the ``if`` or loop a question comes from and what it binds
(``control``).  Only the function itself is parsed, never its whole file: the
file may hold more than Python (a page of documentation run as doctests).
"""
from __future__ import annotations

import ast
import dis
import functools
import inspect
import linecache
import sys
import tokenize
from types import CodeType
from typing import Iterator

__all__ = ["instructions", "function_node", "function_made", "names_read", "names_bound", "names_live_before",
           "names_live_after"]


@functools.lru_cache(maxsize=512)
def instructions(code: CodeType) -> dict:
    if sys.version_info < (3, 11):      # no source positions per instruction
        return {}
    return {i.offset: (i.opname, i.positions) for i in dis.get_instructions(code)}


_MADE: dict[CodeType, ast.FunctionDef] = {}      # functions the tracer compiles from the user's statements


def function_made(code: CodeType, node: ast.FunctionDef) -> None:
    """Say that ``code`` was compiled by the tracer from ``node`` (statements of the user's, keeping their
    lines: a side of an ``if`` run as a cond), so that ``function_node`` reads it as its source."""
    _MADE[code] = node


def function_node(code: CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function's own source, parsed, with the positions it has in its file (only the function is
    read: the file may hold more than Python, as a page of documentation does)."""
    made = _MADE.get(code)
    if made is not None:
        return made
    if code.co_name.startswith("<"):        # comprehensions, lambdas, module code
        return None
    return _parsed_function(code.co_filename, code.co_firstlineno, code.co_name,
                            len(linecache.getlines(code.co_filename)))


@functools.lru_cache(maxsize=512)
def _parsed_function(filename: str, first: int, name: str, size: int):
    """``size``: the file's line count, so that an edited file is read again."""
    lines = linecache.getlines(filename)[first - 1:]
    if not lines:
        return None
    try:
        block = inspect.getblock(lines)
    except (SyntaxError, IndentationError, tokenize.TokenError):
        return None
    margin = block[0][:len(block[0]) - len(block[0].lstrip())]
    if not all(line.startswith(margin) or not line.strip() for line in block):
        return None           # a line less indented than the def (inside a string): columns would shift
    try:
        # a blank line keeps its newline (cutting the margin off "\n" would shift every later line up)
        tree = ast.parse("".join(line[len(margin):] if line.strip() else "\n" for line in block))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.stmt, ast.expr)):
            node.lineno += first - 1
            node.col_offset += len(margin)
            if node.end_lineno is not None:
                node.end_lineno += first - 1
            if node.end_col_offset is not None:
                node.end_col_offset += len(margin)
    function = tree.body[0] if tree.body else None
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and function.name == name:
        return function
    return None


# ---------------------------------------------------------------------------- which names are read later

def names_read(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes(stmt: ast.stmt) -> set[str]:
    """Names a simple statement surely binds (compound statements bind on some paths only)."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return set(names_bound(stmt))
    return set()


def names_live_before(stmts: list[ast.stmt], live: set[str]) -> set[str]:
    """Names that may be read, from the start of ``stmts``, before being bound (``live``: after them)."""
    for stmt in reversed(stmts):
        live = _transfer(stmt, live)
    return live


def _transfer(stmt: ast.stmt, live: set[str]) -> set[str]:
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return (live - _writes(stmt)) | names_read(stmt.value)
    if isinstance(stmt, ast.AugAssign):
        return live | names_read(stmt)
    if isinstance(stmt, (ast.Return, ast.Raise)):
        return names_read(stmt)
    if isinstance(stmt, ast.If):
        branches = names_live_before(stmt.body, live) | names_live_before(stmt.orelse, live)
        return branches | names_read(stmt.test)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return live | names_read(stmt)
    # loops, with, try, match: every name they read may be read, whatever they bind
    return live | names_read(stmt)


def names_live_after(function: ast.AST, target: ast.stmt) -> set[str]:
    """Names that may be read after ``target`` runs, before being bound again (a superset: loops and
    ``try`` count every name they read)."""
    found: set[str] = set()

    def visit(stmts: list[ast.stmt], live_out: set[str]) -> bool:
        live = set(live_out)
        after: list[set[str]] = []
        for stmt in reversed(stmts):
            after.append(live)
            live = _transfer(stmt, live)
        for stmt, live_after in zip(stmts, reversed(after)):
            if stmt is target:
                found.update(live_after)
                return True
            if isinstance(stmt, ast.If):
                inner = [stmt.body, stmt.orelse]
                out = live_after
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            else:          # a loop reads again what its body reads; try and with: anything they read
                inner = [getattr(stmt, name, []) for name in ("body", "orelse", "finalbody")]
                inner += [h.body for h in getattr(stmt, "handlers", ())]
                inner += [c.body for c in getattr(stmt, "cases", ())]
                out = live_after | names_read(stmt)
            if any(visit(block, out) for block in inner if block and isinstance(block[0], ast.stmt)):
                return True
        return False

    visit(getattr(function, "body"), set())
    return found


def names_bound(stmt: ast.stmt) -> Iterator[str]:
    """The names an assignment binds (its targets, unpacked)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for target in targets:
        if target is None:
            continue
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                yield node.id
