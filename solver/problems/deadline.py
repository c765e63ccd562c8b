"""A wall-clock budget shared by the strategies working on one question, and what running out of it raises."""
from __future__ import annotations

import gc
import time

__all__ = ["Deadline", "OutOfTime", "PAUSES"]


class OutOfTime(Exception):
    """Work stopped at its deadline; the caller answers unknown."""


class _Pauses:
    """Seconds the garbage collector has stopped the interpreter, in all (``gc.callbacks``).

    A full collection of a process that holds sympy's caches and the solver's takes 50-200 ms (measured:
    3 of them in 5,000 fuzz questions, 68, 115 and 169 ms; 225 ms in 20,000), however small the question it
    falls in: with a budget of 0.1 s such a question ran out before any strategy had started."""

    def __init__(self):
        self.total = 0.0
        self._since: float | None = None

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._since = time.perf_counter()
        elif self._since is not None:
            self.total += time.perf_counter() - self._since
            self._since = None


PAUSES = _Pauses()
PAUSE_CREDIT = 0.5
gc.callbacks.append(PAUSES)


class Deadline:
    """A wall-clock budget shared by the strategies working on one query.

    Time the garbage collector stops the interpreter for does not count against it, up to the budget and
    half a second more (``PAUSE_CREDIT``): a call still ends within twice its budget, half a second and
    what a strategy overruns."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.start = time.perf_counter()
        self.end = self.start + seconds
        self._paused = PAUSES.total

    def _end(self) -> float:
        paused = PAUSES.total - self._paused
        return self.end + (min(paused, self.seconds + PAUSE_CREDIT) if paused else 0.0)

    def remaining(self) -> float:
        return max(0.0, self._end() - time.perf_counter())

    def expired(self) -> bool:
        return time.perf_counter() >= self._end()

    def check(self) -> None:
        """Raise ``OutOfTime`` once the deadline has passed."""
        if time.perf_counter() >= self._end():
            raise OutOfTime

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def share(self, fraction: float) -> "Deadline":
        """A deadline ending after ``fraction`` of the time left here (the rest kept for later work)."""
        return Deadline(self.remaining() * fraction)
