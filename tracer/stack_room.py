"""Room on CPython's frame stack for a trace, so that its calls stop mapping and unmapping memory.

CPython (3.11 on) keeps frames in a stack of chunks of 16 KB and frees a
chunk as soon as the frame that opened it returns.  A call tree that goes
back and forth across a chunk's end maps a chunk and unmaps it each time:
torch's dispatch does so thousands of times per trace (measured with strace
on one ``torch.export`` of a small relative-position attention model: 8,900
``mmap``/``munmap`` pairs of 16 KB, about a sixth of its time).  A frame too
large for a chunk opens one of twice its size (sizes double from 16 KB); the
calls it makes fill the other half, so a whole trace runs in one chunk.

The frame below is ``_call`` with a value stack of ``_SLOTS`` slots it never
uses: its pages are reserved, not touched, so they cost address space only.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["with_stack_room"]

R = TypeVar("R")

# 2**16 slots of 8 bytes: a 512 KB frame in a 1 MB chunk, leaving ~512 KB (a thousand or more frames
# of torch's tracing) before another chunk is needed
_SLOTS = 1 << 16


def _call(fn, args, kwargs):
    return fn(*args, **kwargs)


_call.__code__ = _call.__code__.replace(co_stacksize=_SLOTS)


def with_stack_room(fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
    """``fn(*args, **kwargs)``, called from a frame whose chunk has room for the frames below it."""
    return _call(fn, args, kwargs)
