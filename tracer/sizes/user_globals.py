"""The names the user's modules see while an engine trace runs: ``range``, ``int``, ``list``, ``len``,
``math.sqrt``.

Python's ``range``, ``int`` and ``math.sqrt`` ask a size for a concrete int,
which specializes it (``symbolic_range``, ``symbolic_casts`` say where and
why the engine keeps it symbolic instead).  To reach those calls the engine
changes names in the user's modules only, never a builtin or ``math``
itself, and only where nothing can tell the difference:

* a user module (``shapes.is_user_file``, or one that declares
  ``__shapeproof_user_code__``) whose source uses ``range``, ``int``,
  ``list`` or ``len`` only as a call (``map(int, ...)`` too), in
  ``isinstance``/``issubclass`` or in an annotation gets a global of that
  name, ``SymbolicRange``, ``SymbolicInt``, ``SymbolicList`` or
  ``symbolic_len`` (``size_lists``); one that compares them by identity or passes them as a
  value keeps Python's (4 of 538 transformers modeling files);
* a module name bound to ``math`` whose every use is ``math.<name>``, with
  ``math.sqrt`` only called, is bound to a copy of ``math`` whose ``sqrt`` is
  ``sqrt_of_sizes``; a name bound to ``math.sqrt`` itself (``from math
  import sqrt``) and only called is bound to ``sqrt_of_sizes``;
* ``int`` also reaches the library modules of the functions calling ``int``
  that a user module imported from its own package (transformers'
  ``torch_int`` in ``utils/generic.py``).

Each stand-in is Python's own on every thread but one running an engine
trace (``patching.on_engine_thread``): another thread that runs the same
module meanwhile gets what Python gives, and ``builtins``/``math`` are never
touched.  Modules are read through their own ``__dict__``, never through
attribute access: a lazy module (``importlib.util.LazyLoader``, a module
``__getattr__`` as in speechbrain) stays unloaded.  Everything is removed
when the last trace ends, however it ends.
"""
from __future__ import annotations

import ast
import math
import os
import sys
import types
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType
from typing import Any

from shapeproof.shapes import is_user_file

from ..user_source import function_node

from ..patching import SharedPatch
from .symbolic_casts import SymbolicInt, sqrt_of_sizes
from .symbolic_range import SymbolicList, SymbolicRange, symbolic_len

__all__ = ["symbolic_user_names", "python_names", "only_called", "module_namespace"]

_sqrt = math.sqrt

# ``math`` as a module sees it once its name is bound to the copy: the same objects, but ``sqrt``
_MATH = types.ModuleType("math", math.__doc__)
_MATH.__dict__.update({k: v for k, v in vars(math).items() if k not in ("__name__", "__doc__")},
                      sqrt=sqrt_of_sizes)

# builtin name -> its stand-in
_BUILTINS = {"range": SymbolicRange, "int": SymbolicInt, "list": SymbolicList, "len": symbolic_len}
_STAND_INS = (SymbolicRange, SymbolicInt, SymbolicList, symbolic_len, _MATH, sqrt_of_sizes)


def module_namespace(module: Any) -> dict | None:
    """``module``'s own namespace, read without attribute access (which makes a lazy module import its
    target); None for anything in ``sys.modules`` that is not a module."""
    if not issubclass(type(module), types.ModuleType):
        return None
    try:
        namespace = object.__getattribute__(module, "__dict__")
    except Exception:  # noqa: BLE001  (a module type that hides its namespace is not one to change)
        return None
    return namespace if type(namespace) is dict else None


# -- what a module's source allows ----------------------------------------------------------------------

_TYPE_TESTS = ("isinstance", "issubclass")


def _called_positions(tree: ast.AST) -> set[int]:
    """ids of the Name and Attribute nodes in positions where any callable that ``isinstance`` reads as the
    original stands in for it: called, mapped, a type of ``isinstance``/``issubclass``, an annotation."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            allowed.add(id(node.func))
            func = node.func
            if isinstance(func, ast.Name) and func.id == "map" and node.args:
                allowed.add(id(node.args[0]))
            elif isinstance(func, ast.Name) and func.id in _TYPE_TESTS and len(node.args) > 1:
                types_ = node.args[1]
                allowed.update(id(e) for e in (types_.elts if isinstance(types_, ast.Tuple) else [types_]))
        annotations: list[ast.expr | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            annotations = [p.annotation for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                           if p is not None] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        allowed.update(id(n) for annotation in annotations if annotation is not None
                       for n in ast.walk(annotation))
    return allowed


@dataclass(frozen=True)
class _NameUses:
    """How a module's source uses its names."""

    used: frozenset[str]
    not_only_called: frozenset[str]     # used elsewhere than in a call, map, isinstance, an annotation
    not_only_module: frozenset[str]     # used elsewhere than as ``name.<attribute>``; or name.sqrt not called

    @staticmethod
    def of(tree: ast.AST) -> "_NameUses":
        allowed = _called_positions(tree)
        read_as_module = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        used, not_called, not_module = set(), set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                used.add(node.id)
                if id(node) not in allowed:
                    not_called.add(node.id)
                if id(node) not in read_as_module:
                    not_module.add(node.id)
            elif (isinstance(node, ast.Attribute) and node.attr == "sqrt" and isinstance(node.value, ast.Name)
                  and id(node) not in allowed):
                not_module.add(node.value.id)
        return _NameUses(frozenset(used), frozenset(not_called), frozenset(not_module))

    def only_called(self, name: str) -> bool:
        return name in self.used and name not in self.not_only_called

    def only_module_with_sqrt_called(self, name: str) -> bool:
        return name in self.used and name not in self.not_only_module

    def only(self, name: str) -> "_NameUses":
        """These uses, for ``name`` alone."""
        return _NameUses(self.used & {name}, self.not_only_called, self.not_only_module)

    @staticmethod
    def union(parts: "list[_NameUses]") -> "_NameUses":
        return _NameUses(*(frozenset().union(*(getattr(p, f) for p in parts))
                           for f in ("used", "not_only_called", "not_only_module")))


def only_called(source: str, name: str) -> bool:
    """Whether ``source`` uses ``name``, and only as a call (``map(name, ...)`` too), in
    ``isinstance``/``issubclass`` or in an annotation: where any callable that ``isinstance`` reads as
    the original stands in for it."""
    return _NameUses.of(ast.parse(source)).only_called(name)


_FILE_USES: dict[tuple[str, int], _NameUses] = {}     # (file, mtime_ns) -> how its source uses its names


def _file_uses(file: str) -> _NameUses | None:
    try:
        key = (file, os.stat(file).st_mtime_ns)
        if key not in _FILE_USES:
            with open(file, encoding="utf-8") as f:
                _FILE_USES[key] = _NameUses.of(ast.parse(f.read()))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return _FILE_USES[key]


def _functions_defined_in(namespace: dict) -> list[types.FunctionType]:
    """The functions whose globals are ``namespace``: its own, and its classes' methods."""
    found = []
    for value in list(namespace.values()):
        members = [value]
        if issubclass(type(value), type):
            members = [m.__func__ if isinstance(m, (staticmethod, classmethod)) else m
                       for m in type.__dict__["__dict__"].__get__(value).values()]
            members += [f for m in members if isinstance(m, property) for f in (m.fget, m.fset, m.fdel)]
        found += [f for f in members if type(f) is types.FunctionType and f.__globals__ is namespace]
    return found


def _names_in(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names_in(const)
    return names


def _functions_uses(functions: list[types.FunctionType]) -> _NameUses:
    """How the functions' own sources use names (a module with no file: a notebook's, a page of docs run as
    doctests); a function whose source cannot be read uses every name it mentions in an unknown way."""
    parts = []
    for function in functions:
        node = function_node(function.__code__)
        if node is not None:
            parts.append(_NameUses.of(node))
        else:
            unknown = frozenset(_names_in(function.__code__))
            parts.append(_NameUses(unknown, unknown, unknown))
    return _NameUses.union(parts)


def _user_code_uses(namespace: dict) -> _NameUses | None:
    """How a user module's source uses its names; None for a module that is not the user's, or whose source
    cannot be read."""
    declared = namespace.get("__shapeproof_user_code__") is True
    file = namespace.get("__file__")
    if isinstance(file, str):
        return _file_uses(file) if file.endswith(".py") and (declared or is_user_file(file)) else None
    functions = _functions_defined_in(namespace)
    if not declared and not any(is_user_file(f.__code__.co_filename) for f in functions):
        return None
    return _functions_uses(functions)


def _stand_ins(namespace: dict, uses: _NameUses) -> dict[str, Any]:
    """The names of a module to bind while a trace runs, and their stand-ins."""
    names: dict[str, Any] = {name: stand_in for name, stand_in in _BUILTINS.items()
                             if uses.only_called(name) and name not in namespace}
    for name, value in list(namespace.items()):
        if value is math and uses.only_module_with_sqrt_called(name):
            names[name] = _MATH
        elif value is _sqrt and uses.only_called(name):
            names[name] = sqrt_of_sizes
    return names


# -- which modules ----------------------------------------------------------------------------------------

def _user_namespaces() -> list[tuple[dict, _NameUses]]:
    """The namespaces of the user's modules, with how their sources use names."""
    found = []
    for module in list(sys.modules.values()):
        namespace = module_namespace(module)
        uses = None if namespace is None else _user_code_uses(namespace)
        if namespace is not None and uses is not None:
            found.append((namespace, uses))
    return found


def _int_libraries(users: list[dict]) -> list[dict]:
    """The namespaces of the library modules of the functions calling ``int`` that a user module imported from
    its own package (transformers' ``torch_int``)."""
    found: dict[int, dict] = {}
    for namespace in users:
        package = str(namespace.get("__name__", "")).partition(".")[0]
        for value in list(namespace.values()):
            if type(value) is not types.FunctionType or "int" not in value.__code__.co_names:
                continue
            home = value.__module__ or ""
            if home.partition(".")[0] == package != "torch":
                library = module_namespace(sys.modules.get(home))
                if library is not None:
                    found.setdefault(id(library), library)
    return list(found.values())


# -- binding and unbinding --------------------------------------------------------------------------------

_bound: list[tuple[dict, str, Any]] = []       # (namespace, name, what it held: _UNBOUND for nothing)
_UNBOUND = object()


def _bind_all() -> None:
    users = _user_namespaces()
    seen = {id(n) for n, _ in users}
    for library in _int_libraries([n for n, _ in users]):
        file = library.get("__file__")
        uses = _file_uses(file) if isinstance(file, str) and file.endswith(".py") else None
        if id(library) not in seen and uses is not None:
            users.append((library, uses.only("int")))
    for namespace, uses in users:
        for name, stand_in in _stand_ins(namespace, uses).items():
            _bound.append((namespace, name, namespace.get(name, _UNBOUND)))
            namespace[name] = stand_in


def _unbind_all() -> None:
    while _bound:
        namespace, name, held = _bound.pop()
        if any(namespace.get(name) is s for s in _STAND_INS):     # unless the module rebound the name
            if held is _UNBOUND:
                del namespace[name]
            else:
                namespace[name] = held


# Within: ``range``, ``int``, ``math.sqrt`` of sizes in the user's code keep them symbolic (engine threads).
symbolic_user_names = SharedPatch(_bind_all, _unbind_all)


@contextmanager
def python_names():
    """Within: the user's modules hold Python's own names, for dynamo, which traces a rolled loop's body
    (``loops``) and cannot follow a stand-in (it reads the caller's frame); the loops and casts of the body
    and of the code it calls are dynamo's to unroll or refuse.  Another thread's trace meanwhile sees
    Python's names too: it specializes, as without the stand-ins."""
    with symbolic_user_names.lock:
        _unbind_all()
    try:
        yield
    finally:
        with symbolic_user_names.lock:            # bound again only while a trace still holds the names
            if symbolic_user_names.active:
                _bind_all()

