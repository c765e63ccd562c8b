"""``with_stack_room`` calls through as if it were not there, from a frame with a large value stack."""
import sys

import pytest
from shapeproof.tracer.stack_room import with_stack_room


def test_it_returns_the_value_and_passes_every_argument():
    def f(a, /, b, *, fn=None):
        return a, b, fn
    assert with_stack_room(f, 1, b=2, fn=3) == (1, 2, 3)       # ``fn`` may be one of fn's own keywords


def test_an_exception_reaches_the_caller_unchanged():
    with pytest.raises(KeyError, match="missing"):
        with_stack_room({}.__getitem__, "missing")


def test_the_calling_frame_reserves_a_chunk_of_its_own():
    """CPython gives a frame larger than its 16 KB chunks a chunk twice its size; the callee frames fill
    the rest (a frame of 2**16 slots: 512 KB, in a 1 MB chunk)."""
    caller = with_stack_room(lambda: sys._getframe(1))
    assert caller.f_code.co_name == "_call" and caller.f_code.co_stacksize >= 1 << 16


def test_deep_recursion_below_it_still_works():
    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)
    assert with_stack_room(depth, 900) == 900                  # past the chunk's room: more chunks, as usual
