"""Loop bodies run on other values at every step: the size tracker follows nothing inside them.

torch traces a ``while_loop``'s, ``scan``'s or ``map``'s body once, on the
operands of its first step (``torch.tensor(0)`` as the counter).  A value
followed there (``idx.item() == 0``) would become a runtime assert that the
next step breaks.  While an engine trace runs, calling one of these
operators puts the trace's ``SizeTracker`` in ``in_loop_body`` for the call,
so its body's integers stay unbacked, as torch leaves them.
"""
from __future__ import annotations

import functools

from ..patching import SharedPatch
from ..torch_internals import LOOP_OPERATORS, TracingContext, higher_order_operator

__all__ = ["loop_bodies_unfollowed"]


def _tracker():
    context = TracingContext.try_get()
    return getattr(getattr(context, "fake_mode", None), "size_tracker", None)


def _unfollowed(call):
    @functools.wraps(call)
    def wrapper(self, *args, **kwargs):
        tracker = _tracker()
        if tracker is None:
            return call(self, *args, **kwargs)
        with tracker.in_loop_body():
            return call(self, *args, **kwargs)
    return wrapper


_saved: dict[type, object] = {}     # operator class -> its own ``__call__`` (None: inherited)


def _install() -> None:
    for name in LOOP_OPERATORS:
        cls = type(higher_order_operator(name))
        if any(issubclass(cls, patched) for patched in _saved):     # its __call__ is a patched one already
            continue
        _saved[cls] = cls.__dict__.get("__call__")
        setattr(cls, "__call__", _unfollowed(cls.__call__))


def _restore() -> None:
    for cls, own in _saved.items():
        if own is None:
            delattr(cls, "__call__")
        else:
            setattr(cls, "__call__", own)
    _saved.clear()


# Within: loop operators' bodies are traced with the size tracker following nothing.
loop_bodies_unfollowed = SharedPatch(_install, _restore)
