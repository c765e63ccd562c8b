"""Rebinding local variables of a running frame (CPython).

A rolled loop (``loops``) never runs its body in the user's frame: after the
``scan``, the values the loop carried are bound in that frame as if the last
iteration had bound them.  Python 3.13 and later write through
``frame.f_locals`` (PEP 667); before, the ``f_locals`` dictionary is a
snapshot that ``PyFrame_LocalsToFast`` copies back into the frame's fast
locals and cells (what debuggers do to let a user edit a variable).
"""
from __future__ import annotations

import ctypes
import sys
from types import FrameType

__all__ = ["set_locals"]


def set_locals(frame: FrameType, values: dict[str, object]) -> None:
    """Bind each name of ``values`` in ``frame`` (a local, or a cell of one), as an assignment there would."""
    if sys.version_info >= (3, 13):
        for name, value in values.items():
            frame.f_locals[name] = value
        return
    snapshot = frame.f_locals              # synchronised from the fast locals on access
    snapshot.update(values)
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
