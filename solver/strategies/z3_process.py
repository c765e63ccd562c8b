"""Z3 in helper processes (``z3_server``) that are ended when they overrun, so every SMT call ends on time.

A call takes an idle helper (or starts one), sends it the question as SMT-LIB text with Z3's own timeout
and ``rlimit``, and waits for the answer until the deadline plus ``grace``; a helper that has not
answered by then is killed, and the call answers unknown.  A helper still starting when its call's time
is up is kept and serves the next call (starting one, importing Z3, takes 0.1-0.3 s).  Helpers belong to
the process that started them (a forked child starts its own) and end with it.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import z3

__all__ = ["Answer", "check", "close_all"]

_SERVER = Path(__file__).with_name("z3_server.py")


def grace(seconds: float) -> float:
    """How long past its deadline a helper may take before it is killed: Z3 usually stops within a few
    milliseconds of its timeout, a loaded machine may delay the answer."""
    return 0.2 + 0.1 * seconds


@dataclass(frozen=True)
class Answer:
    result: str                                 # sat, unsat, unknown
    reason: str = ""
    model: dict = field(default_factory=dict)   # name -> int, for a sat answer


class _Helper:
    def __init__(self):
        z3_dir = str(Path(z3.__file__).resolve().parent.parent)
        self.process = subprocess.Popen([sys.executable, "-I", str(_SERVER), z3_dir], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.owner = os.getpid()
        self.ready = False
        self.asked = 0
        self._pending = b""

    def line(self, until: float) -> bytes | None:
        """The next line the helper writes, or None if none comes by ``until`` (or it ended)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._pending:
            left = until - time.monotonic()
            if left <= 0:
                return None
            if not select.select([fd], [], [], min(left, 60.0))[0]:     # an unlimited budget waits in turns
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None                     # it ended
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def started(self, until: float) -> bool:
        if not self.ready:
            self.ready = self.line(until) == b"ready"
        return self.ready

    def ask(self, request: dict, until: float) -> Answer | None:
        """The answer to ``request`` by ``until``, or None (then the helper must be killed: it may still be
        working on it, or hold an answer nobody reads)."""
        assert self.process.stdin is not None
        self.asked += 1                     # an answer read is this request's, not one left unread
        try:
            self.process.stdin.write(json.dumps({**request, "id": self.asked}).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            return None
        line = self.line(until)
        if line is None:
            return None
        try:
            data = json.loads(line)
            if data["id"] != self.asked:
                return None
            return Answer(data["result"], data["reason"], data["model"])
        except (ValueError, KeyError, TypeError):
            return None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def alive(self) -> bool:
        return self.process.poll() is None


_idle: list[_Helper] = []
_lock = threading.Lock()


def _forget_the_parents() -> None:
    """In a forked child: the parent's helpers are not the child's to use, and another thread of the
    parent may have held the lock at the fork, which no thread of the child would ever release."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


os.register_at_fork(after_in_child=_forget_the_parents)


def _take() -> _Helper:
    with _lock:
        while _idle:
            helper = _idle.pop()
            if helper.owner == os.getpid() and helper.alive():
                return helper
    return _Helper()


def _put_back(helper: _Helper) -> None:
    with _lock:
        _idle.append(helper)


def check(smt2: str, names: list[str], seconds: float, rlimit: int, logic: str | None) -> Answer:
    """Z3's answer to the SMT-LIB question ``smt2`` within ``seconds`` (plus ``grace``), with the values of
    the constants ``names`` in a model."""
    until = time.monotonic() + seconds
    helper = _take()
    if not helper.started(until):
        if helper.alive():
            _put_back(helper)                  # it will serve the next call
        return Answer("unknown", "Z3's process was still starting when the time was up")
    request = {"smt2": smt2, "names": names, "rlimit": rlimit, "logic": logic,
               "timeout_ms": max(1, int(min(until - time.monotonic(), 2 ** 31 / 1000) * 1000))}
    answer = helper.ask(request, until + grace(seconds))
    if answer is None:
        helper.kill()
        return Answer("unknown", "Z3 did not stop at its time limit, so its process was ended")
    _put_back(helper)
    return answer


def close_all() -> None:
    """End every idle helper this process started."""
    with _lock:
        helpers, _idle[:] = list(_idle), []
    for helper in helpers:
        if helper.owner == os.getpid():
            helper.kill()


atexit.register(close_all)
