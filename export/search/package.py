"""Check a split package and each member archive before torch reads anything from it.

``torch.export.load`` trusts its file: weights or constants marked
``use_pickle`` are unpickled with ``weights_only=False``, custom and opaque
objects too, sample inputs fall back to a full unpickle when the safe one
fails, an archive without ``archive_format`` falls back to a legacy reader
that does the same, ``data/aotinductor/`` loads a compiled library, every
symbolic ``expr_str`` goes through ``sympy.sympify`` (Python ``eval``), and
``guards_code`` is ``exec``'d when ``.module()`` is called.  So every
member is checked here first, from its bytes, with no torch deserializer:

- sizes: at most ``Caps.max_entries`` entries, each and all together at most
  ``max_entry``/``max_total`` bytes unpacked, and no entry unpacking to more
  than ``max_ratio`` times its packed size (zip bombs);
- layout: one root folder holding only the entries ``torch.export.save``
  writes (no AOTInductor, legacy or executorch entries); ``archive_format``
  is ``pt2``;
- no pickle: no weight or constant with ``use_pickle``, no custom or opaque
  object; sample inputs load with ``torch.load(weights_only=True)`` (torch's
  restricted unpickler, the call torch makes first), else the member is
  refused so that torch never falls back to the full unpickler;
- text torch evaluates: each ``expr_str`` is a sympy expression built only
  from numbers, symbols and the sympy/torch functions that shape
  expressions use (strings only as a ``Symbol`` name or ``Float`` literal);
  each ``guards_code`` line is arithmetic and comparisons over
  ``L['x'].size()[d]``-style input sizes.

What stays trusted: torch's own JSON deserializer and graph verifier (it
refuses graph nodes that are not torch operators), and the program's graph
itself, which runs when the program is called, like any model one runs.
Every refusal, and every malformed manifest, raises ``PackageError``.
"""
from __future__ import annotations

import ast
import io
import json
import re
import zipfile
import zlib
from dataclasses import dataclass

import torch
from shapeproof.tracer.torch_internals import sympy_functions
from torch.export.pt2_archive import constants as pt2

__all__ = ["Caps", "PackageError", "check_guard_code", "check_member", "check_sympy_text", "open_archive",
           "read_json"]


class PackageError(ValueError):
    """A package or member that is malformed, too large, or would run code when loaded."""


@dataclass(frozen=True)
class Caps:
    max_entries: int = 10_000
    max_entry: int = 4 << 30             # bytes of one entry, unpacked
    max_total: int = 16 << 30            # bytes of all entries of one archive, unpacked
    max_ratio: int = 100                 # unpacked / packed size of an entry over 1 MiB (torch stores, 1:1)
    max_text: int = 64 << 20             # bytes of one JSON entry (manifest, model, configs)
    max_regions: int = 256               # regions of a split package (each loads one program)


# ---------------------------------------------------------------------------- zip archives

def open_archive(source, caps: Caps, what: str) -> tuple[zipfile.ZipFile, dict[str, zipfile.ZipInfo]]:
    """A zip archive (a path or bytes) and its entries, after the size checks; raises ``PackageError``."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PackageError(f"{what} is not a zip archive: {exc}") from None
    infos = archive.infolist()
    if len(infos) > caps.max_entries:
        raise PackageError(f"{what} has {len(infos)} entries (at most {caps.max_entries})")
    total = 0
    for info in infos:
        if info.file_size > caps.max_entry:
            raise PackageError(f"{what}: {info.filename} unpacks to {info.file_size} bytes (at most "
                               f"{caps.max_entry})")
        if info.file_size > 1 << 20 and info.file_size > caps.max_ratio * max(info.compress_size, 1):
            raise PackageError(f"{what}: {info.filename} unpacks "
                               f"{info.file_size // max(info.compress_size, 1)}"
                               f"-fold (at most {caps.max_ratio}): a zip bomb")
        total += info.file_size
    if total > caps.max_total:
        raise PackageError(f"{what} unpacks to {total} bytes (at most {caps.max_total})")
    # torch's zip reader finds an entry whatever its case (miniz), Python's zipfile by its exact name: a
    # 'MODEL.pt' beside 'model.pt' would be what torch.export.load unpickles, unchecked
    if len({i.filename.lower() for i in infos}) != len(infos):
        raise PackageError(f"{what} has duplicate entries (names that differ only in case count as one)")
    # torch compares the names' raw bytes; Python decodes them by a flag (UTF-8 or cp437), so two entries
    # with the same bytes could read as two names: torch.export.save writes ASCII names only
    if not all(i.filename.isascii() for i in infos):
        raise PackageError(f"{what} has an entry whose name is not ASCII")
    return archive, {i.filename: i for i in infos}


# bytes inflated at a time: zipfile's read() of a whole entry asks zlib for up to 1 GiB at once, whatever its
# header says, before it cuts the result to the header's size
_CHUNK = 1 << 16


def read_entry(archive: zipfile.ZipFile, name: str, what: str) -> bytes:
    """The bytes of one entry, inflated a chunk at a time up to the size its header gives (which
    ``open_archive`` checked against the caps): a deflated megabyte cannot make a gigabyte.  A damaged,
    encrypted or otherwise compressed one, or one whose bytes do not match its header, is a
    ``PackageError``."""
    try:
        info = archive.getinfo(name)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise PackageError(f"{what}: {name} is compressed with method {info.compress_type} (torch stores "
                               "entries; stored or deflated ones are read)")
        parts, left = [], info.file_size
        with archive.open(info) as stream:        # checks the CRC once the header's size is read
            while left > 0 and (chunk := stream.read(min(_CHUNK, left))):
                parts.append(chunk)
                left -= len(chunk)
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError, zlib.error,
            KeyError) as exc:
        raise PackageError(f"{what}: cannot read {name} ({type(exc).__name__}: {exc})") from None
    if left:
        raise PackageError(f"{what}: {name} holds fewer bytes than its header says ({info.file_size})")
    return b"".join(parts)


def read_json(archive: zipfile.ZipFile, entries: dict, name: str, caps: Caps, what: str):
    info = entries.get(name)
    if info is None:
        raise PackageError(f"{what} has no {name}")
    if info.file_size > caps.max_text:
        raise PackageError(f"{what}: {name} is over {caps.max_text} bytes")
    data = read_entry(archive, name, what)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise PackageError(f"{what}: {name} is not JSON ({type(exc).__name__})") from None


# ---------------------------------------------------------------------------- member archives

_ALLOWED = re.compile(r"(archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id"
                      rf"|{pt2.MODELS_DIR}\w+\.json|{pt2.WEIGHTS_DIR}[\w.]+|{pt2.CONSTANTS_DIR}[\w.]+"
                      rf"|{pt2.SAMPLE_INPUTS_DIR}\w+\.pt|{pt2.EXTRA_DIR}[\w.-]+)")
_MODEL = re.compile(rf"{pt2.MODELS_DIR}(\w+)\.json")


def check_member(data: bytes, caps: Caps, what: str) -> None:
    """Raise ``PackageError`` unless loading ``data`` with ``torch.export.load`` unpickles and evaluates
    nothing but what the module docstring allows."""
    archive, entries = open_archive(data, caps, what)
    roots = {name.split("/", 1)[0] for name in entries}
    if len(roots) != 1 or any("/" not in name for name in entries):
        raise PackageError(f"{what}: entries must sit in one folder (a torch.export.save archive)")
    root = roots.pop() + "/"
    files = {name[len(root):]: info for name, info in entries.items()}
    for name in files:
        if not _ALLOWED.fullmatch(name):
            raise PackageError(f"{what}: unexpected entry {name!r} (AOTInductor, legacy or pickled "
                               "formats are refused)")
    if (pt2.ARCHIVE_FORMAT_PATH not in files
            or read_entry(archive, root + pt2.ARCHIVE_FORMAT_PATH, what) != b"pt2"):
        raise PackageError(f"{what}: not a pt2 archive")
    models = [m.group(1) for m in map(_MODEL.fullmatch, files) if m]
    if not models:
        raise PackageError(f"{what}: no model in the archive")
    for model in models:
        for legacy in (f"{pt2.WEIGHTS_DIR}{model}.pt", f"{pt2.CONSTANTS_DIR}{model}.pt"):
            if legacy in files:
                raise PackageError(f"{what}: {legacy} is a pickle (legacy format)")
        weights, constants, graph = (read_json(archive, entries, root + name.format(model), caps, what)
                                     for name in (
            pt2.WEIGHTS_CONFIG_FILENAME_FORMAT, pt2.CONSTANTS_CONFIG_FILENAME_FORMAT,
            pt2.MODELS_FILENAME_FORMAT))
        _check_payloads(weights, what, constants=False)
        _check_payloads(constants, what, constants=True)
        _check_model(graph, what)
        inputs = root + pt2.SAMPLE_INPUTS_FILENAME_FORMAT.format(model)
        if inputs in entries and entries[inputs].file_size:
            try:
                loaded = torch.load(io.BytesIO(read_entry(archive, inputs, what)), weights_only=True)
            except Exception as exc:  # noqa: BLE001 - what the safe unpickler refuses, torch retries unsafely
                raise PackageError(f"{what}: its sample inputs need the full unpickler "
                                   f"({type(exc).__name__})") from None
            if not isinstance(loaded, (tuple, dict)):
                raise PackageError(f"{what}: its sample inputs are a {type(loaded).__name__}")


def _check_payloads(config, what: str, constants: bool) -> None:
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise PackageError(f"{what}: a payload config without 'config'")
    for fqn, meta in entries.items():
        if not isinstance(meta, dict) or meta.get("use_pickle") is not False:
            raise PackageError(f"{what}: {str(fqn)[:80]} is stored as a pickle (use_pickle)")
        path = meta.get("path_name")
        if not isinstance(path, str) or not re.fullmatch(r"\w+", path) or (
                constants and not path.startswith(pt2.TENSOR_CONSTANT_FILENAME_PREFIX)):
            raise PackageError(f"{what}: {str(fqn)[:80]} is not a plain tensor ({str(path)[:40]})")


def _check_model(model, what: str) -> None:
    if not isinstance(model, dict):
        raise PackageError(f"{what}: the model is not a JSON object")
    todo = [model]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr_str":
                    check_sympy_text(value, what)
                elif key == "guards_code":
                    if not isinstance(value, list):
                        raise PackageError(f"{what}: guards_code is not a list")
                    for line in value:
                        check_guard_code(line, what)
                else:
                    todo.append(value)
        elif isinstance(node, list):
            todo.extend(node)


# ---------------------------------------------------------------------------- text torch evaluates

_SYMPY_FUNCTIONS = frozenset(sympy_functions.__all__) | {
    "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Mod", "Max", "Min", "Abs", "floor",
    "ceiling", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan",
    "StrictGreaterThan", "LessThan", "GreaterThan", "And", "Or", "Not", "Piecewise", "ExprCondPair",
    "IntInfinity", "NegativeIntInfinity", "BooleanTrue", "BooleanFalse"}
_GUARD_FUNCTIONS = frozenset({"min", "max", "abs", "int", "float"}) | frozenset(
    name for name in torch.fx.experimental.symbolic_shapes.SYMPY_INTERP if name not in ("math", "torch"))
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd,
              ast.Not, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d{1,3})?")
_MAX_INT = 2 ** 64
_POWERS = frozenset({"Pow", "PowByNatural", "FloatPow", "LShift"})   # (base, exponent) calls sympify computes
_MAX_POWER = 1024         # literal exponents along a chain of powers multiply to at most this
_MAX_POWER_BITS = 1 << 16  # bits of all the powers of number literals in one expression
_MAX_PRECISION = 1024      # a Float's precision (mpmath computes with that many digits)
_MAX_TEXT = 100_000


def _tree(text, what: str, kind: str) -> ast.AST:
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        raise PackageError(f"{what}: a {kind} that is not a short string")
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise PackageError(f"{what}: {kind} {text[:80]!r} is not an expression") from None


def _walk(node: ast.AST, visit) -> None:
    """Visit ``node`` and the children ``visit`` does not claim (it returns the ones left to check)."""
    todo = [node]
    while todo:
        todo.extend(visit(todo.pop()))


def _operator_children(node: ast.AST) -> list | None:
    """Children of an arithmetic, comparison or logic node, or None if ``node`` is none of those."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, _OPERATORS):
        return [node.operand]
    if isinstance(node, ast.BoolOp) and isinstance(node.op, _OPERATORS):
        return list(node.values)
    if isinstance(node, ast.Compare) and all(isinstance(op, _OPERATORS) for op in node.ops):
        return [node.left, *node.comparators]
    return None


def _precise(node: ast.AST) -> bool:
    """A number above ``_MAX_PRECISION`` (as a ``Float``'s precision, mpmath computes with that many)."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and node.value > _MAX_PRECISION)


def _powers_bounded(tree: ast.AST, what: str, text: str) -> None:
    """Refuse powers that sympify or the check itself would compute for hours (``0*10**10**8``): each
    exponent (of ``**``, ``Pow``, ``PowByNatural``, ``FloatPow``; a shift of ``LShift``) is a number
    literal or a size symbol, the literal exponents along a chain of powers multiply to at most
    ``_MAX_POWER``, and the powers of number literals have at most ``_MAX_POWER_BITS`` bits in all (a
    product of 300 ``(2**64 - 1)**1024`` took minutes)."""
    bits = 0
    todo: list[tuple[ast.AST, int]] = [(tree, 1)]
    while todo:
        node, scale = todo.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base, exponent = node.left, node.right
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _POWERS
              and len(node.args) == 2):
            base, exponent = node.args
        else:
            todo.extend((child, scale) for child in ast.iter_child_nodes(node))
            continue
        literal = _integer_literal(exponent)
        if literal is None and not (_size_symbol(exponent) or _float_literal(exponent)):
            raise PackageError(f"{what}: an exponent that is neither a number nor a size in {text[:80]!r}")
        scale *= max(1, abs(literal or 1))
        base_literal = _integer_literal(base)
        if base_literal is not None:
            bits += scale * max(1, abs(base_literal).bit_length())
        if scale > _MAX_POWER or bits > _MAX_POWER_BITS:
            raise PackageError(f"{what}: a power too large to compute in {text[:80]!r}")
        todo.append((base, scale))


def _integer_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _integer_literal(node.operand)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Integer":
        return _integer_literal(node.args[0]) if len(node.args) == 1 else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _float_literal(node: ast.AST) -> bool:
    """``0.5``, ``Float('0.5', ...)``: a float power is computed at the float's precision, in no time."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _float_literal(node.operand)
    return ((isinstance(node, ast.Constant) and type(node.value) is float)
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Float"))


def _size_symbol(node: ast.AST) -> bool:
    """A name, ``Symbol('s0', ...)``, or an input size as guard code reads it (``L['x'].size()[1]``)."""
    return (isinstance(node, ast.Name) or _input_size(node)
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Symbol"))


def _number(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and type(node.value) in (int, float, bool)
            and (not isinstance(node.value, int) or abs(node.value) <= _MAX_INT))


def check_sympy_text(text, what: str = "package") -> None:
    """Refuse ``expr_str`` text that sympify could use to run code: only numbers, names and calls of
    shape-expression functions; a string only as a ``Symbol`` name or a ``Float`` literal."""
    def visit(node):
        children = _operator_children(node)
        if children is not None:
            return children
        if _number(node) or (isinstance(node, ast.Name) and _NAME.fullmatch(node.id)):
            return []
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _SYMPY_FUNCTIONS):
            args = list(node.args)
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                pattern = {"Symbol": _NAME, "Float": _FLOAT}.get(node.func.id)
                if pattern is None or not pattern.fullmatch(args[0].value):
                    raise PackageError(f"{what}: a string argument in {text[:80]!r}")
                args = args[1:]
            if not all(kw.arg and _number(kw.value) for kw in node.keywords):
                raise PackageError(f"{what}: a keyword that is not a number in {text[:80]!r}")
            settings = (*args, *(k.value for k in node.keywords))
            if node.func.id == "Float" and any(_precise(n) for n in settings):
                raise PackageError(f"{what}: a float precision above {_MAX_PRECISION} in {text[:80]!r}")
            return args
        raise PackageError(f"{what}: {type(node).__name__} in a symbolic expression {text[:80]!r}")

    tree = _tree(text, what, "symbolic expression")
    _walk(tree, visit)
    _powers_bounded(tree, what, text)


def check_guard_code(text, what: str = "package") -> None:
    """Refuse ``guards_code`` that is more than arithmetic and comparisons over input sizes such as
    ``L['x'].size()[1]``, numbers, and a few numeric functions."""
    def visit(node):
        children = _operator_children(node)
        if children is not None:
            return children
        if _number(node) or _input_size(node):
            return []
        if isinstance(node, ast.Call) and not node.keywords and (
                (isinstance(node.func, ast.Name) and node.func.id in _GUARD_FUNCTIONS)
                or (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "math" and node.func.attr in ("floor", "ceil", "trunc"))):
            return list(node.args)
        raise PackageError(f"{what}: {type(node).__name__} in an input check {text[:80]!r}")

    tree = _tree(text, what, "input check")
    _walk(tree, visit)
    _powers_bounded(tree, what, text)


def _input_size(node: ast.AST) -> bool:
    """``L['x'].size()[1]``, ``L['x']['y'].stride()[0]``, ``L['x'].storage_offset()``: keys are names."""
    if isinstance(node, ast.Subscript):
        if not (isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
            return False
        node = node.value
    if not (isinstance(node, ast.Call) and not node.args and not node.keywords
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("size", "stride", "storage_offset")):
        return False
    node = node.func.value
    while isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and (
            type(node.slice.value) is int
            or (isinstance(node.slice.value, str) and _NAME.fullmatch(node.slice.value))):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "L"
