"""Process-wide patches that several engine traces (threads, nested calls) may hold at once."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable

__all__ = ["SharedPatch"]


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
        with self._lock:
            if self._active == 0:
                self._apply()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._undo()
