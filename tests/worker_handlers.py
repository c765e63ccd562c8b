"""Handlers for ``tests/test_workers.py``, imported by name inside worker processes."""
from __future__ import annotations

import signal
import time


def echo(request: dict, seconds: float) -> dict:
    return {"echo": request, "seconds_left": seconds}


def python_loop(request: dict, seconds: float) -> dict:
    """Busy in Python past its due time: SIGUSR1 stops it."""
    while True:
        sum(range(1000))


def stuck_in_c(request: dict, seconds: float) -> dict:
    """Deaf to SIGUSR1, like a call stuck in C code: only the kill ends it."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    while True:
        time.sleep(0.01)


def grow(request: dict, seconds: float) -> dict:
    """Keeps ``request["mb"]`` MB alive in the worker after answering."""
    global _KEPT
    _KEPT = bytearray(request["mb"] << 20)
    _KEPT[::4096] = b"x" * len(_KEPT[::4096])
    return {"kept": request["mb"]}


_KEPT = None
