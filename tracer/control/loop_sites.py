"""Python loops over a size, read from the user's source: which ones a trace may roll into one ``scan``.

``for t in range(x.size(1))`` over a size the declared ranges do not fix
runs a number of times that depends on the input; a trace runs it at the
example's length and so fixes the length.  When every iteration computes
the same function of what the loop carries and of the values it reads at
``t``, the loop is one ``scan`` whose trip count is the size (``loops``).
Whether the body can be such a function is decided here, from the source
(never hoped):

* the index ``t`` appears only as one whole component of an index
  ``base[..., t, ...]`` whose base the body does not bind and whose other
  components are ``:``, ``...`` or integer constants: those reads become
  the scan's inputs, sliced along that dim, so the body sees ``t`` nowhere;
* ``lst.append(value)`` (once, at the body's top level) on a list bound to
  ``[]`` and read elsewhere only as the first argument of a ``stack``/``cat``
  call makes ``value`` a stacked output of the scan;
* ``out[..., t, ...] = value`` (at the top level; ``out`` not read by the
  body) makes ``value`` a stacked output written into ``out`` after the scan;
* every other name the body binds and reads before binding it, or that is
  read after the loop, is carried from one iteration to the next;
* no statement may leave the iteration (``break``, ``continue``, ``return``,
  ``yield``) or bind names outside it (``global``, ``nonlocal``, a name a
  nested function shares, ``:=``), and no name that reads the frame itself
  (``locals``, ``super``, ...) appears.

``[value for t in range(n)]`` as the first argument of a ``stack``/``cat``
call is the same loop with ``value`` its one stacked output.  The body
becomes a function ``(carried, slices) -> (carried, outputs)`` compiled from
the user's own statements (its lines keep their numbers, so the program's
nodes point at the user's source); ``loops`` runs it under torch's ``scan``,
whose tracing (dynamo, ``fullgraph``) refuses any effect on Python state
the body could have, and proves the carried shapes a fixpoint.

``torch.tensor(list(range(n)))``, ``torch.tensor(range(n))`` and
``torch.tensor([e(i) for i in range(n)])`` (``as_tensor`` alike), with
``e`` integer arithmetic of ``i`` and constants that int64 computes as
Python does, are an ``arange`` (``ArangeSite``).
"""
from __future__ import annotations

import ast
import copy
import functools
import linecache
from dataclasses import dataclass
from types import CodeType, FrameType

from .branch_sites import Refusal
from ..user_source import function_node, instructions, names_live_after, names_live_before, names_read

__all__ = ["LoopSite", "ArangeSite", "Indexed", "loop_site", "CONSUMERS", "TENSOR_CALLS", "INDEX", "WHOLE",
           "REST", "PREFIX"]

# index components of ``Indexed.parts`` (an int stands for itself)
INDEX, WHOLE, REST = "t", ":", "..."
# calls that may consume a rolled list, by attribute name (``torch.stack(outs, dim=1)``)
CONSUMERS = ("stack", "cat", "concat", "concatenate")
# names the generated function uses; a body that uses one is not rolled
PREFIX = "_shapeproof_"
# names that read or change the frame, its class or its scope: a body compiled apart would see another one
_FRAME_NAMES = frozenset({"locals", "vars", "globals", "eval", "exec", "super", "__class__", "dir",
                          "breakpoint"})
# statements a body may hold besides assignments and expressions (whose effects dynamo checks)
_NESTED = (ast.If, ast.For, ast.While, ast.Assert, ast.Pass)


@dataclass(frozen=True)
class Indexed:
    """``base[..., t, ...]``: the loop index as one whole component of a loop-invariant tensor's index."""

    base: ast.expr
    parts: tuple                     # INDEX, WHOLE, REST or an int, in order
    text: str                        # as written, for messages


@dataclass(frozen=True)
class LoopSite:
    """A loop over ``range(...)`` that may be rolled, with the function its body becomes."""

    filename: str
    line: int                        # the ``for`` statement's (or the comprehension's) first line
    text: str                        # that line as written, for messages
    carried: tuple[str, ...]         # names carried from one iteration to the next
    free: tuple[str, ...]            # the function's own locals the body reads and does not bind
    reads: tuple[Indexed, ...]       # the scan's inputs, in the generated function's order
    appended: tuple[str, ...]        # lists the body appends to: the first stacked outputs
    writes: tuple[tuple[str, Indexed], ...]   # (tensor written at t, the index): the next stacked outputs
    consumer: ast.Call | None        # a comprehension's: the stack/cat call it is the first argument of
    factory: CodeType                # ``(*free values, fresh) -> body``; ``body(carry, xs)`` is one iteration
    stackers: tuple[ast.expr, ...]   # the functions of the stack/cat calls that read the stacked outputs

    @property
    def key(self) -> tuple[str, int]:
        return self.filename, self.line

    @property
    def outputs(self) -> int:
        return len(self.appended) + len(self.writes) + (self.consumer is not None)


class _Refuse(Exception):
    pass


def loop_site(frame: FrameType) -> LoopSite | ArangeSite | Refusal | None:
    """The loop whose ``range(...)`` call ``frame`` is making right now; None when it is not one the source
    shows (a ``range`` outside a ``for`` or a comprehension, code without source)."""
    found = instructions(frame.f_code).get(frame.f_lasti)
    if found is None or not found[0].startswith("CALL"):
        return None
    positions = found[1]
    if positions is None or positions.lineno is None or positions.col_offset is None:
        return None
    function = function_node(frame.f_code)
    if function is None:
        return None
    return _site(function, frame.f_code, positions.lineno, positions.col_offset)


@functools.lru_cache(maxsize=256)
def _site(function: ast.AST, code: CodeType, line: int, col: int) -> LoopSite | ArangeSite | Refusal | None:
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and _tensor_call(node):
            found = _arange_site(node, code, line, col)
            if found is not None:
                return found
        if isinstance(node, ast.For) and _range_call_at(node.iter, line, col):
            return _refusing(_for_site, function, code, node)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and node.generators \
                and _range_call_at(node.generators[0].iter, line, col):
            return _refusing(_comprehension_site, function, code, node)
    return None


def _range_call_at(node: ast.expr, line: int, col: int) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and (node.lineno, node.col_offset) == (line, col))


def _refusing(build, function, code: CodeType, node) -> LoopSite | Refusal:
    try:
        return build(function, code, node)
    except _Refuse as exc:
        return Refusal(code.co_filename, node.lineno, str(exc))


# ---------------------------------------------------------------------------- a for statement

def _for_site(function: ast.AST, code: CodeType, loop: ast.For) -> LoopSite:
    if loop.orelse:
        raise _Refuse("the loop has an `else`")
    if not isinstance(loop.target, ast.Name):
        raise _Refuse("the loop's target is not one name")
    index = loop.target.id
    _check_statements(loop.body, top=True)
    appended: dict[str, ast.expr] = {}
    writes: list[tuple[str, ast.Subscript, ast.expr]] = []
    for stmt in loop.body:
        target = _appended_list(stmt)
        if target is not None:
            if target in appended:
                raise _Refuse(f"line {stmt.lineno}: `{target}` is appended to twice in one iteration")
            assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            appended[target] = stmt.value.args[0]
            continue
        write = _written(stmt, index)
        if write is not None:
            writes.append(write)
    bound = _bound(loop.body)
    if index in bound:
        raise _Refuse(f"the body binds the loop's index `{index}`")
    shared = set(code.co_cellvars) | set(code.co_freevars)
    if bound & shared:
        raise _Refuse(f"the body binds `{sorted(bound & shared)[0]}`, which a nested function shares")
    after = names_live_after(function, loop)
    if index in after:
        raise _Refuse(f"the loop's index `{index}` is read after the loop")
    exposed: set[str] = set()
    while True:                          # what an iteration reads before binding it, the next one included
        found = names_live_before(list(loop.body), exposed | after)
        if found <= exposed:
            break
        exposed |= found
    carried = tuple(sorted(bound & (exposed | after)))
    stackers = [func for name in appended for func in _check_rolled_list(function, loop, name, shared)]
    for name, place, _ in writes:
        if name in bound or name in shared:
            raise _Refuse(f"`{name}`, written at `{index}`, is bound by the body or shared")
        _check_written_unread(loop.body, name, place)
    reads = _index_reads(loop.body, index, bound, {name for name, _, _ in writes}, set(appended))
    statements = [_rewritten_statement(stmt, appended, writes) for stmt in loop.body]
    outputs = [f"{PREFIX}y{k}" for k in range(len(appended) + len(writes))]
    return _build(function, code, loop, carried, reads, statements, outputs, tuple(appended),
                  tuple((name, _indexed(sub, index)) for name, sub, _ in writes), None, bound, index,
                  tuple(stackers))


def _appended_list(stmt: ast.stmt) -> str | None:
    """``lst`` of a statement ``lst.append(value)``."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if isinstance(call.func, ast.Attribute) and call.func.attr == "append" \
            and isinstance(call.func.value, ast.Name) and len(call.args) == 1 and not call.keywords \
            and not isinstance(call.args[0], ast.Starred):
        return call.func.value.id
    return None


def _written(stmt: ast.stmt, index: str) -> tuple[str, ast.Subscript, ast.expr] | None:
    """``(out, the subscript, value)`` of a statement ``out[..., t, ...] = value``."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Subscript)):
        return None
    target = stmt.targets[0]
    if not isinstance(target.value, ast.Name):
        raise _Refuse(f"line {stmt.lineno}: a store into `{ast.unparse(target.value)}`")
    if _parts(target, index) is None:
        raise _Refuse(f"line {stmt.lineno}: a store into `{ast.unparse(target)}`, not at `{index}` alone")
    return target.value.id, target, stmt.value


# what a body may read of a tensor it writes at the index: its metadata, never its values (they change as the
# loop writes them, and the scan writes them all after the last iteration)
_METADATA = frozenset({"dtype", "device", "shape", "ndim", "layout", "size", "dim"})


def _check_written_unread(stmts: list[ast.stmt], name: str, target: ast.Subscript) -> None:
    parents = {id(child): node for stmt in stmts for node in ast.walk(stmt)
               for child in ast.iter_child_nodes(node)}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if not (isinstance(node, ast.Name) and node.id == name) or node is target.value:
                continue
            parent = parents.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.attr in _METADATA):
                raise _Refuse(f"line {node.lineno}: the body reads `{name}`, which it writes at the index")


def _check_statements(stmts: list[ast.stmt], top: bool) -> None:
    """Refuse statements that leave the iteration or bind names outside it; expressions' effects on Python
    state are dynamo's to refuse when it traces the body."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            for target in targets:
                if target is None or (top and isinstance(stmt, ast.Assign)
                                      and isinstance(target, ast.Subscript)):
                    continue       # a write at the index (``_written`` checks it)
                if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Store))
                           for n in ast.walk(target)):
                    raise _Refuse(f"line {stmt.lineno}: a store into an object")
        elif isinstance(stmt, _NESTED):
            if isinstance(stmt, (ast.For, ast.While)):
                _check_nested_loop(stmt)
            else:
                for name in ("body", "orelse"):
                    _check_statements(getattr(stmt, name, []), top=False)
        else:
            raise _Refuse(f"line {stmt.lineno}: a `{type(stmt).__name__}` statement")
        _check_expressions(stmt)


def _check_nested_loop(loop: ast.For | ast.While) -> None:
    """A loop inside the body: its own ``break``/``continue`` are its business, its other statements ours."""
    for stmt in loop.body + loop.orelse:
        if isinstance(stmt, (ast.Break, ast.Continue)):
            continue
        _check_statements([stmt], top=False)


def _check_expressions(stmt: ast.stmt) -> None:
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)):
            raise _Refuse(f"line {node.lineno}: `{type(node).__name__}` in the body")
        if isinstance(node, ast.Name) and (node.id in _FRAME_NAMES or node.id.startswith(PREFIX)):
            raise _Refuse(f"line {node.lineno}: the body uses `{node.id}`")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__") and not node.attr.endswith("__"):
            raise _Refuse(f"line {node.lineno}: the private attribute `{node.attr}` (name mangling)")


def _bound(stmts: list[ast.stmt]) -> set[str]:
    """Names the statements bind in the function's scope (not in nested comprehensions or lambdas)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in stmts:
        visit(stmt)
    return out


def _check_rolled_list(function: ast.AST, loop: ast.For, name: str, shared: set[str]) -> list[ast.expr]:
    """``name`` is bound only to ``[]`` and read only by the loop's append and as the first argument of
    stack/cat calls: after the loop it holds one marker for all the iterations' values (``loops``).  The
    functions of those calls, which ``loops`` checks are torch's (a method of the user's named ``stack``
    would get the marker)."""
    if name in shared:
        raise _Refuse(f"the list `{name}` is shared with a nested function")
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr in CONSUMERS and node.args
             and isinstance(node.args[0], ast.Name) and node.args[0].id == name]
    consumers = {id(node.args[0]) for node in calls}
    in_body = {id(n) for stmt in loop.body for n in ast.walk(stmt)}
    for node in ast.walk(function):
        if not (isinstance(node, ast.Name) and node.id == name):
            continue
        if isinstance(node.ctx, ast.Load) and (id(node) in in_body or id(node) in consumers):
            continue
        if isinstance(node.ctx, ast.Store) and _bound_to_empty_list(function, node):
            continue
        raise _Refuse(f"line {node.lineno}: the list `{name}` is used other than by `{name}.append` in "
                      "the loop and as the first argument of stack/cat")
    reads_in_body = sum(1 for stmt in loop.body for n in ast.walk(stmt)
                        if isinstance(n, ast.Name) and n.id == name)
    if reads_in_body != 1:
        raise _Refuse(f"the body reads the list `{name}` other than to append to it")
    return [node.func for node in calls]


def _bound_to_empty_list(function: ast.AST, target: ast.Name) -> bool:
    return any(isinstance(node, ast.Assign) and node.targets == [target] and isinstance(node.value, ast.List)
               and not node.value.elts for node in ast.walk(function))


# ---------------------------------------------------------------------------- the index

def _parts(node: ast.Subscript, index: str) -> tuple | None:
    """The components of ``node``'s index when ``index`` is one of them alone and the others are ``:``,
    ``...`` or integer constants; None otherwise."""
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    parts: list = []
    for element in elements:
        if isinstance(element, ast.Name) and element.id == index:
            parts.append(INDEX)
        elif isinstance(element, ast.Slice) and element.lower is None and element.upper is None \
                and element.step is None:
            parts.append(WHOLE)
        elif isinstance(element, ast.Constant) and element.value is Ellipsis:
            parts.append(REST)
        elif _integer(element) is not None:
            parts.append(_integer(element))
        else:
            return None
    if parts.count(INDEX) != 1 or parts.count(REST) > 1:
        return None
    return tuple(parts)


def _integer(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _indexed(node: ast.Subscript, index: str) -> Indexed:
    parts = _parts(node, index)
    assert parts is not None, "only subscripts with the index alone are indexed"
    return Indexed(node.value, parts, ast.unparse(node))


def _invariant_base(node: ast.expr, bound: set[str]) -> bool:
    """A name, or attributes of one, that the body does not bind."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id not in bound


def _index_reads(stmts: list[ast.stmt], index: str, bound: set[str], written: set[str],
                 appended: set[str]) -> tuple[Indexed, ...]:
    """Every read ``base[..., t, ...]`` of the body (one per text), after checking that the index appears
    nowhere else (a write's target is not a read)."""
    targets = {id(stmt.targets[0]) for stmt in stmts
               if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
               and isinstance(stmt.targets[0], ast.Subscript) and isinstance(stmt.targets[0].value, ast.Name)
               and stmt.targets[0].value.id in written}
    reads: dict[str, Indexed] = {}
    allowed: set[int] = set()
    for stmt in stmts:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Subscript) or _parts(node, index) is None:
                continue
            if id(node) in targets:
                allowed.add(id(_index_name(node, index)))
                continue
            if isinstance(node.ctx, ast.Load) and _invariant_base(node.value, bound):
                base_names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
                if base_names & (written | appended):
                    raise _Refuse(f"line {node.lineno}: the body reads `{ast.unparse(node)}`, which it "
                                  "writes")
                item = _indexed(node, index)
                reads.setdefault(item.text, item)
                allowed.add(id(_index_name(node, index)))
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and node.id == index and id(node) not in allowed:
                raise _Refuse(f"line {node.lineno}: the index `{index}` is used other than as a whole index "
                              "of a tensor the loop does not change (`x[:, t]`)")
    return tuple(reads.values())


def _index_name(node: ast.Subscript, index: str) -> ast.Name:
    elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return next(e for e in elements if isinstance(e, ast.Name) and e.id == index)


# ---------------------------------------------------------------------------- a comprehension

def _comprehension_site(function: ast.AST, code: CodeType, comp: ast.ListComp | ast.GeneratorExp) -> LoopSite:
    generator = comp.generators[0]
    if len(comp.generators) != 1 or generator.ifs or generator.is_async:
        raise _Refuse("a comprehension with conditions or several `for`s")
    if not isinstance(generator.target, ast.Name):
        raise _Refuse("the comprehension's target is not one name")
    consumer = next((node for node in ast.walk(function) if isinstance(node, ast.Call)
                     and isinstance(node.func, ast.Attribute) and node.func.attr in CONSUMERS
                     and node.args and node.args[0] is comp), None)
    if consumer is None:
        raise _Refuse("the comprehension is not the first argument of a stack/cat call")
    index = generator.target.id
    value = ast.Expr(comp.elt, lineno=comp.elt.lineno, col_offset=comp.elt.col_offset)
    _check_expressions(value)
    reads = _index_reads([value], index, set(), set(), set())
    statement = ast.Assign([ast.Name(f"{PREFIX}y0", ast.Store())], copy.deepcopy(comp.elt))
    ast.copy_location(statement, comp.elt)
    return _build(function, code, comp, (), reads, [statement], [f"{PREFIX}y0"], (), (), consumer, set(),
                  index, (consumer.func,))


# ---------------------------------------------------------------------------- a range made a tensor

@dataclass(frozen=True)
class ArangeSite:
    """``torch.tensor(list(range(...)))`` (or ``range(...)`` itself, or ``[e(i) for i in range(...)]`` with
    ``e`` integer arithmetic of ``i`` and constants), or the same with ``as_tensor``: an ``arange``."""

    filename: str
    line: int
    text: str
    consumer: ast.Call                   # the tensor/as_tensor call
    element: CodeType | None             # ``i -> e(i)`` of a comprehension

    @property
    def key(self) -> tuple[str, int]:
        return self.filename, self.line


# calls that turn a range into a tensor, by attribute name (``torch.tensor(list(range(n)))``)
TENSOR_CALLS = ("tensor", "as_tensor")
# integer arithmetic a comprehension's element may do, with Python's meaning for ints (and torch's for
# int64 tensors: ``//`` floors, ``%`` takes the divisor's sign); ``//`` and ``%`` by positive constants only
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


def _tensor_call(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_CALLS and len(node.args) >= 1 \
        and not any(isinstance(a, ast.Starred) for a in node.args)


def _arange_site(call: ast.Call, code: CodeType, line: int, col: int) -> ArangeSite | Refusal | None:
    """The site when the range call at (line, col) is ``call``'s data, as a range, a list of it or a
    comprehension over it; None when it is not."""
    data = call.args[0]
    if isinstance(data, ast.Call) and isinstance(data.func, ast.Name) and data.func.id == "list" \
            and len(data.args) == 1 and not data.keywords:
        data = data.args[0]
    element = None
    if isinstance(data, ast.ListComp) and data.generators \
            and _range_call_at(data.generators[0].iter, line, col):
        generator = data.generators[0]
        if len(data.generators) != 1 or generator.ifs or not isinstance(generator.target, ast.Name):
            return Refusal(code.co_filename, call.lineno, "a comprehension with conditions or several `for`s")
        if not _integer_arithmetic(data.elt, generator.target.id):
            return Refusal(code.co_filename, call.lineno, f"`{ast.unparse(data.elt)}` is not integer "
                                                          f"arithmetic of `{generator.target.id}`")
        element = _element(code.co_filename, generator.target.id, data.elt)
    elif not _range_call_at(data, line, col):
        return None
    return ArangeSite(code.co_filename, call.lineno, linecache.getline(code.co_filename, call.lineno).strip(),
                      call, element)


def _integer_arithmetic(node: ast.expr, index: str) -> bool:
    """Whether ``node`` is integer arithmetic of ``index`` and constants that int64 computes as Python
    does: no value beyond 2**62 for any index below 2**40 (a size is far below)."""
    bound = _bound_of(node, index)
    return bound is not None and bound < 2 ** 62


def _bound_of(node: ast.expr, index: str) -> int | None:
    """A bound on ``|node|`` for ``|index| < 2**40``; None when ``node`` is not such arithmetic."""
    if isinstance(node, ast.Name):
        return 2 ** 40 if node.id == index else None
    constant = _integer(node)
    if constant is not None:
        return abs(constant)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _bound_of(node.operand, index)
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC)):
        return None
    if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
        divisor = _integer(node.right)
        left = _bound_of(node.left, index)
        if divisor is None or divisor <= 0 or left is None:
            return None
        return left + 1 if isinstance(node.op, ast.FloorDiv) else divisor
    left, right = _bound_of(node.left, index), _bound_of(node.right, index)
    if left is None or right is None:
        return None
    return left * right if isinstance(node.op, ast.Mult) else left + right


def _element(filename: str, index: str, elt: ast.expr) -> CodeType:
    """``lambda index: elt``, compiled at the element's line."""
    tree = ast.Expression(ast.Lambda(ast.arguments([], [ast.arg(index)], None, [], [], None, []),
                                     copy.deepcopy(elt)))
    ast.copy_location(tree.body, elt)
    code = compile(ast.fix_missing_locations(tree), filename, "eval")
    return next(c for c in code.co_consts if isinstance(c, CodeType))


# ---------------------------------------------------------------------------- the generated function

def _rewritten_statement(stmt: ast.stmt, appended: dict, writes: list) -> ast.stmt:
    """A statement of the body with its append or write replaced by a binding of an output."""
    for k, name in enumerate(appended):
        if _appended_list(stmt) == name:
            assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            return ast.copy_location(ast.Assign([ast.Name(f"{PREFIX}y{k}", ast.Store())],
                                                copy.deepcopy(stmt.value.args[0])), stmt)
    for k, (_, target, value) in enumerate(writes, start=len(appended)):
        if isinstance(stmt, ast.Assign) and stmt.targets[0] is target:
            return ast.copy_location(ast.Assign([ast.Name(f"{PREFIX}y{k}", ast.Store())],
                                                copy.deepcopy(value)), stmt)
    return copy.deepcopy(stmt)


class _Slices(ast.NodeTransformer):
    """Replace each read ``base[..., t, ...]`` by the scan input that holds it."""

    def __init__(self, index: str, names: dict[str, str]):
        self.index, self.names = index, names

    def visit_Subscript(self, node: ast.Subscript):
        if isinstance(node.ctx, ast.Load) and _parts(node, self.index) is not None:
            name = self.names.get(ast.unparse(node))
            if name is not None:
                return ast.copy_location(ast.Name(name, ast.Load()), node)
        return self.generic_visit(node)


def _build(function: ast.AST, code: CodeType, node: ast.For | ast.ListComp | ast.GeneratorExp,
           carried: tuple[str, ...], reads: tuple[Indexed, ...], statements: list[ast.stmt],
           outputs: list[str], appended: tuple[str, ...], writes: tuple, consumer: ast.Call | None,
           bound: set[str], index: str, stackers: tuple[ast.expr, ...]) -> LoopSite:
    slices = {item.text: f"{PREFIX}x{k}" for k, item in enumerate(reads)}
    transformer = _Slices(index, slices)
    body = [transformer.visit(stmt) for stmt in statements]
    reads_left = set().union(*(names_read(stmt) for stmt in body)) if body else set()
    own = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    free = tuple(sorted((reads_left - bound - {index}) & own))
    filename = code.co_filename
    factory = _factory(filename, node.lineno, free, carried or (f"{PREFIX}unused",),
                       tuple(slices.values()) or (f"{PREFIX}steps",), body, outputs)
    text = linecache.getline(filename, node.lineno).strip()
    return LoopSite(filename, node.lineno, text, carried, free, reads, appended, writes, consumer, factory,
                    stackers)


def _factory(filename: str, line: int, free: tuple[str, ...], carried: tuple[str, ...],
             slices: tuple[str, ...], body: list[ast.stmt], outputs: list[str]) -> CodeType:
    """``def _shapeproof_loop(*free, fresh)`` returning the body as ``(carry, xs) -> (carry, ys)``."""
    def names(items) -> str:
        return "(" + "".join(f"{n}, " for n in items) + ")"

    template = ast.parse(
        f"def {PREFIX}loop({''.join(f'{n}, ' for n in free)}{PREFIX}fresh):\n"
        f"    def {PREFIX}body({PREFIX}carry, {PREFIX}xs):\n"
        f"        {names(carried)} = {PREFIX}carry\n"
        f"        {names(slices)} = {PREFIX}xs\n"
        f"        return {PREFIX}fresh({names(carried)}, {names(outputs)}, {PREFIX}carry, {PREFIX}xs)\n"
        f"    return {PREFIX}body\n")
    outer = template.body[0]
    assert isinstance(outer, ast.FunctionDef)
    inner = outer.body[0]
    assert isinstance(inner, ast.FunctionDef)
    inner.body[2:2] = body
    users = {id(n) for stmt in body for n in ast.walk(stmt)}
    for node in ast.walk(template):      # the wrapper's own lines are the loop's; the user's keep theirs
        if isinstance(node, (ast.stmt, ast.expr)) and id(node) not in users:
            node.lineno, node.end_lineno = line, line
    module = compile(ast.fix_missing_locations(template), filename, "exec")
    return next(c for c in module.co_consts if isinstance(c, CodeType))
