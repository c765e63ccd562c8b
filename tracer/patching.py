"""What an engine trace changes outside itself, and the thread it changes it for.

An export runs inside the user's process, beside their other threads (a
server's, a data loader's, another export).  Every change the engine makes
to see the user's code is therefore *thread-aware*: it is installed while at
least one trace runs (``SharedPatch``), and its replacement behaves as the
original everywhere except on a thread that is running an engine trace
(``on_engine_thread``).  Nothing is installed where another thread would
observe a different value or type: Python's builtins and the ``math``
module are never patched (``user_globals`` gives the user's modules their
own names instead).

torch's tracing itself is not safe in two threads at once (``torch.fx``'s
patcher of wrapped functions is one global, ``CURRENT_PATCHER``), so engine
traces take turns (``tracing_turn``): two exports in two threads interleave
their traces and give the programs each gives alone.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Callable

__all__ = ["SharedPatch", "engine_thread", "on_engine_thread", "tracing_turn"]

_thread = threading.local()
_turn = threading.RLock()


def _new_turn() -> None:
    global _turn
    _turn = threading.RLock()       # a forked child has one thread: a turn another thread held is no one's


os.register_at_fork(after_in_child=_new_turn)


@contextmanager
def tracing_turn():
    """Within: this thread is the process's only one tracing with torch (re-entrant)."""
    turn = _turn
    with turn:
        yield


def on_engine_thread() -> bool:
    """Whether the calling thread is running an engine trace (inside ``engine_thread``)."""
    return getattr(_thread, "traces", 0) > 0


@contextmanager
def engine_thread():
    """Within: this thread runs an engine trace, and the engine's replacements act on it (re-entrant)."""
    _thread.traces = getattr(_thread, "traces", 0) + 1
    try:
        yield
    finally:
        _thread.traces -= 1


class SharedPatch:
    """``apply()`` as the first holder enters, ``undo()`` as the last one leaves (re-entrant, thread-safe)."""

    def __init__(self, apply: Callable[[], None], undo: Callable[[], None]):
        self._apply, self._undo = apply, undo
        self._lock = threading.Lock()
        self._active = 0

    @property
    def lock(self) -> threading.Lock:
        """Held while the patch is applied or undone."""
        return self._lock

    @property
    def active(self) -> bool:
        """Whether some holder is within the patch."""
        return self._active > 0

    @contextmanager
    def __call__(self):
        self.acquire()
        try:
            yield
        finally:
            self.release()

    def acquire(self) -> None:
        """Hold the patch (applied by the first holder) until ``release``."""
        with self._lock:
            if self._active == 0:
                try:
                    self._apply()
                except BaseException:       # a patch half applied is undone, not left behind
                    self._undo()
                    raise
            self._active += 1

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self._undo()
