"""``range()`` over sizes whose length the ranges fix, without specializing the sizes.

Python's ``range`` asks each argument for ``__index__``, which makes torch
specialize a size to its example value.  Encodec encodes its input in chunks
``for offset in range(0, input_length, stride)`` with ``stride ==
input_length`` when it does not chunk: one iteration at every length, yet
tracing fixes the length to the example's.

On a thread running an engine trace, ``range`` called from user code with a
SymInt argument (``SymbolicRange``, the name ``user_globals`` gives the
user's modules) computes its length ``ceil((stop - start) / step)`` symbolically;
when the engine proves that length constant over the declared ranges, the
call returns the tuple ``(start, start + step, ...)`` of symbolic elements
(what iterating the range yields; the sizes stay symbolic).  Otherwise a
loop over it may roll into one ``scan`` (``loops``); else it is a
``size_lists.SizeRange``, whose length, ends and ``list`` stay symbolic and
which is Python's ``range`` for anything else (iterating it specializes, as
before).  Every call from library code is Python's ``range``.
``isinstance(x, range)`` keeps working for the ranges Python makes.
"""
from __future__ import annotations

import builtins
import sys

import torch
from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw, statically_known_true

from shapeproof.shapes import is_user_frame

from ..patching import on_engine_thread
from ..torch_internals import TracingContext
from .size_lists import SizeList, SizeRange, size_length

__all__ = ["SymbolicRange", "SymbolicList", "symbolic_range", "symbolic_len"]

_range, _list = builtins.range, builtins.list


def symbolic_range(*args):
    """``range(*args)``, or the tuple of its elements when, over SymInts, its length is provably fixed."""
    if not any(isinstance(a, torch.SymInt) for a in args) or not is_user_frame(sys._getframe(2)):
        return _range(*args)
    if not 1 <= len(args) <= 3:
        return _range(*args)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args[:2], 1 if len(args) == 2 else args[2])
    if isinstance(step, int) and step == 0:
        return _range(*args)          # Python's error
    n = -((start - stop) // step)     # ceil((stop - start) / step), for either sign of step
    if not isinstance(n, torch.SymInt):
        k = max(n, 0)
    else:
        hint = guarding_hint_or_throw(n)
        k = max(hint, 0)
        if not statically_known_true(n == k if k > 0 else n <= 0):
            rolled = _roll(sys._getframe(2), start, stop, step, n)      # a loop rolled into one scan (loops)
            return SizeRange(start, stop, step) if rolled is None else rolled
    return tuple(start + i * step if i else start for i in _range(k))


def _roll(frame, start, stop, step, n):
    rolling = getattr(getattr(getattr(TracingContext.try_get(), "fake_mode", None), "shape_env", None),
                      "loop_rolling", None)
    return None if rolling is None else rolling.roll(frame, start, stop, step, n)


class _PosingAs(type):
    """A stand-in class that ``isinstance`` and ``issubclass`` read as the Python type it stands in for."""

    posing_as: type

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.posing_as)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.posing_as)


class SymbolicRange(metaclass=_PosingAs):
    """``range`` as the user's modules see it while a trace runs: ``symbolic_range`` on the thread running
    an engine trace, Python's ``range`` on every other."""

    posing_as = _range

    def __new__(cls, *args):
        return symbolic_range(*args) if on_engine_thread() else _range(*args)


class SymbolicList(metaclass=_PosingAs):
    """``list`` as the user's modules see it while a trace runs: of a ``SizeRange`` or ``SizeList`` (made
    only on the thread running an engine trace) a ``SizeList``, else Python's ``list``."""

    posing_as = _list

    def __new__(cls, *args):
        if _len(args) == 1 and isinstance(args[0], (SizeRange, SizeList)):
            return SizeList.of(args[0])
        return _list(*args)

    def __class_getitem__(cls, item):
        return _list[item]


_len = builtins.len


def symbolic_len(value, /):
    """``len`` as the user's modules see it while a trace runs: a SymInt for a ``SizeList`` or ``SizeRange``
    (``size_lists.size_length``), Python's ``len`` of anything else."""
    return size_length(value)
