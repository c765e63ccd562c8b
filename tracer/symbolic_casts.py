"""``int(x)`` and ``math.sqrt(x)`` over sizes in the user's code, without specializing the sizes.

Python's ``int`` must return an int, so ``int(n ** 0.5)`` makes torch guard the
SymFloat's truncation to its example value (``int(float(N) ** 0.5) == 8``), and
``math.sqrt(n)`` asks the SymInt ``n`` for ``__index__``, which fixes ``n``
itself: either way the program serves one grid size (issue 39's idiom 3, a
square grid recovered from a token count).  While an engine trace runs:

* ``math.sqrt`` called from user code with a SymInt or SymFloat is torch's
  symbolic sqrt (``OpaqueUnaryFn_sqrt``, correctly rounded as ``math.sqrt``
  is), after ``torch._check(x >= 0)``: where Python's raises, the program
  asserts;
* the user's modules see a global ``int`` whose call on a SymFloat is
  ``torch.sym_int`` (``TruncToInt``: what ``int`` computes on a double), on a
  SymInt of integer arithmetic is the SymInt (``torch_int(height)`` keeps the
  size symbolic; where Python needs a real int later, ``range`` or
  ``__index__`` asks for it then) and is Python's ``int`` on anything else; ``isinstance``/``issubclass`` read
  it as ``int``, and a SymInt is an instance, as its value is in eager.  So do the
  library modules of the functions calling ``int`` that a user module
  imported (transformers' ``torch_int``, ``int(x)`` in ``utils/generic.py``).  A
  module gets it only when its source uses the name ``int`` only as a call,
  in ``isinstance``/``issubclass``, ``map`` or annotations: one that passes it as
  a dtype or compares types with ``is`` keeps Python's (4 of 538
  transformers modeling files).

``from math import sqrt`` binds Python's own and still specializes.
"""
from __future__ import annotations

import ast
import builtins
import math
import os
import sys
import types

import torch

from shapeproof.shapes import is_user_file, is_user_frame

from .patching import SharedPatch
from .torch_internals import (
    CeilToInt, FloatPow, FloatTrueDiv, FloorToInt, IntTrueDiv, OpaqueUnaryFn_sqrt, RoundToInt, ToFloat,
    TruncToInt, check,
)

__all__ = ["symbolic_casts", "SymbolicInt", "sqrt_of_sizes", "int_only_called"]

_int = builtins.int
_sqrt = math.sqrt


def sqrt_of_sizes(x):
    """``math.sqrt(x)``; symbolic for a SymInt/SymFloat ``x`` from user code."""
    if isinstance(x, (torch.SymInt, torch.SymFloat)) and is_user_frame(sys._getframe(1)):
        check(x >= 0, lambda: "math domain error")
        return torch.sym_sqrt(x)
    return _sqrt(x)


class _IntType(type):
    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], torch.SymFloat):
            return torch.sym_int(args[0])
        size = args[0] if len(args) == 1 and not kwargs else None
        if isinstance(size, torch.SymInt) and not _through_floats(size):
            return size
        return _int(*args, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, (_int, torch.SymInt))

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _int)


# A size computed through floats (``math.ceil(h / 2) * 2``) specializes under ``int`` as torch does: kept
# symbolic it reaches every later shape question as float arithmetic, which is where the solver is slow
# (MobileViT under Dim.AUTO: 75 s instead of 12 s, for a program that accepts the same sizes).
_FLOAT_NODES = (ToFloat, FloatTrueDiv, IntTrueDiv, FloorToInt, CeilToInt, TruncToInt, RoundToInt, FloatPow,
                OpaqueUnaryFn_sqrt)


def _through_floats(size: torch.SymInt) -> bool:
    return bool(size.node.expr.atoms(*_FLOAT_NODES))


class SymbolicInt(metaclass=_IntType):
    """The ``int`` the user's modules see while an engine trace runs (see the module's docstring)."""


_VERDICTS: dict[tuple[str, int], bool] = {}     # (file, mtime_ns) -> int_only_called(its source)


def int_only_called(source: str) -> bool:
    """Whether ``source`` uses the name ``int`` only as a call (``map(int, ...)`` too), in
    ``isinstance``/``issubclass``, or in an annotation: where any callable that ``isinstance`` reads as
    ``int`` stands in for it."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "int":
                allowed.add(id(node.func))
            elif node.func.id == "map" and node.args:              # map(int, ...) calls it
                allowed.add(id(node.args[0]))
            elif node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
                types_ = node.args[1]
                allowed.update(id(e) for e in (types_.elts if isinstance(types_, ast.Tuple) else [types_]))
        annotations = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            annotations = [p.annotation for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                           if p is not None] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        allowed.update(id(n) for annotation in annotations if annotation is not None
                       for n in ast.walk(annotation))
    return all(id(node) in allowed for node in ast.walk(tree)
               if isinstance(node, ast.Name) and node.id == "int")


def _takes_symbolic_int(module: types.ModuleType) -> bool:
    file = getattr(module, "__file__", None)
    if not file or not file.endswith(".py") or "int" in vars(module):
        return False
    try:
        key = (file, os.stat(file).st_mtime_ns)
        if key not in _VERDICTS:
            with open(file, encoding="utf-8") as f:
                _VERDICTS[key] = int_only_called(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    return _VERDICTS[key]


def _user_modules() -> list[types.ModuleType]:
    """The user's modules, and the modules of the same package that a function calling ``int`` that a user
    module imported comes from (transformers' ``torch_int``)."""
    user = [m for m in list(sys.modules.values())
            if isinstance(m, types.ModuleType) and is_user_file(getattr(m, "__file__", None) or "<none>")]
    found = {id(m): m for m in user}
    for m in user:
        package = m.__name__.partition(".")[0]
        for value in list(vars(m).values()):
            home_package = (getattr(value, "__module__", None) or "").partition(".")[0]
            if (isinstance(value, types.FunctionType) and home_package == package != "torch"
                    and "int" in value.__code__.co_names):
                home = sys.modules.get(value.__module__)
                if home is not None:
                    found.setdefault(id(home), home)
    return list(found.values())


_patched: list[types.ModuleType] = []


def _apply() -> None:
    math.sqrt = sqrt_of_sizes
    for module in _user_modules():
        if _takes_symbolic_int(module):
            vars(module)["int"] = SymbolicInt
            _patched.append(module)


def _undo() -> None:
    math.sqrt = _sqrt
    while _patched:
        module = _patched.pop()
        if vars(module).get("int") is SymbolicInt:
            del vars(module)["int"]


# Within: ``int(...)`` of a SymFloat and ``math.sqrt`` of a size in user code stay symbolic.
symbolic_casts = SharedPatch(_apply, _undo)
