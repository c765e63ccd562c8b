"""``int(x)`` and ``math.sqrt(x)`` over sizes in the user's code, without specializing the sizes.

Python's ``int`` must return an int, so ``int(n ** 0.5)`` makes torch guard the
SymFloat's truncation to its example value (``int(float(N) ** 0.5) == 8``), and
``math.sqrt(n)`` asks the SymInt ``n`` for ``__index__``, which fixes ``n``
itself: either way the program serves one grid size (issue 39's idiom 3, a
square grid recovered from a token count).  On a thread running an engine
trace, the names ``user_globals`` gives the user's modules act instead:

* ``sqrt_of_sizes`` (``math.sqrt``), called from user code with a SymInt or
  SymFloat, is torch's symbolic sqrt (``OpaqueUnaryFn_sqrt``, correctly
  rounded as ``math.sqrt`` is), after ``torch._check(x >= 0)``: where
  Python's raises, the program asserts;
* ``SymbolicInt`` (``int``) called on a SymFloat is ``torch.sym_int``
  (``TruncToInt``: what ``int`` computes on a double), on a SymInt of integer
  arithmetic is the SymInt (``torch_int(height)`` keeps the size symbolic;
  where Python needs a real int later, ``range`` or ``__index__`` asks for it
  then) and is Python's ``int`` on anything else; ``isinstance``/``issubclass``
  read it as ``int``, and a SymInt is an instance, as its value is in eager.

On every other thread both are Python's own.
"""
from __future__ import annotations

import builtins
import math
import sys

import torch

from shapeproof.shapes import is_user_frame

from ..patching import on_engine_thread
from ..torch_internals import (
    CeilToInt, FloatPow, FloatTrueDiv, FloorToInt, IntTrueDiv, OpaqueUnaryFn_sqrt, RoundToInt, ToFloat,
    TruncToInt, check,
)

__all__ = ["SymbolicInt", "sqrt_of_sizes"]

_int = builtins.int
_sqrt = math.sqrt


def sqrt_of_sizes(x):
    """``math.sqrt(x)``; symbolic for a SymInt/SymFloat ``x`` from user code."""
    if (isinstance(x, (torch.SymInt, torch.SymFloat)) and on_engine_thread()
            and is_user_frame(sys._getframe(1))):
        check(x >= 0, lambda: "math domain error")
        return torch.sym_sqrt(x)
    return _sqrt(x)


class _IntType(type):
    def __call__(cls, *args, **kwargs):
        if not on_engine_thread():
            return _int(*args, **kwargs)
        if len(args) == 1 and not kwargs and isinstance(args[0], torch.SymFloat):
            return torch.sym_int(args[0])
        size = args[0] if len(args) == 1 and not kwargs else None
        if isinstance(size, torch.SymInt) and not _through_floats(size):
            return size
        return _int(*args, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, (_int, torch.SymInt) if on_engine_thread() else _int)

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
    """The ``int`` the user's modules see while a trace runs (see the module's docstring)."""
