"""Run work in child processes that are stopped when their time is up, and killed if they do not stop.

A thread cannot be stopped in Python, and the solver's own timeouts are soft
(a huge ``sympy.expand`` does not look at the clock), so work that must end
at a deadline runs in a worker process.  At the call's due time the worker
gets SIGUSR1, which raises ``_Stop`` in its Python code and makes it answer
"stopped"; a worker that has not answered ``grace`` seconds later (stuck in
C code) is killed.  So the deadline is enforced by the process boundary,
and the kill returns all of the worker's memory.

Workers are forked from multiprocessing's fork server (a clean,
single-threaded process that imported ``preload`` once): a replacement
costs a fork (30 ms measured on this project's 2-core machine) instead of a
fresh interpreter's seconds, and a background thread keeps ``min_idle``
spares so that a request seldom waits for one.

A call that has used ``heavy_after`` CPU is heavy: it drops to the lowest
priority and runs only while it holds one of ``heavy_slots`` (1), paused
with SIGSTOP until one is free; so expensive calls, however many, use at
most that many CPUs and cheap calls keep the rest.  (Sharing the slot among
heavy calls by least CPU used measured worse for cheap calls.)  A worker serves again only if its
priority could be restored (which needs privileges: elsewhere a demoted
worker is replaced) and its memory grew less than ``retire_growth``.
A worker idle for ``idle_seconds`` leaves, a used one even within
``min_idle`` (a fresh fork replaces it): the pages it dirtied are its own
copies, which a fresh fork shares with the fork server again.

Requests and replies are JSON over the pipe, never pickle.  POSIX only.
"""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, cast

__all__ = ["Reply", "WorkerPool"]

_LOWEST = 19                                # the nice value of heavy calls
_CHECK_EVERY = 0.05                         # seconds between looks at a busy worker's CPU time
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Reply:
    """``kind``: "answer" (``body`` is the handler's result), "busy" (no worker before the due time),
    "timeout" (killed at the deadline), "memory" (hit its memory cap) or "died" (ended on its own)."""

    kind: str
    body: dict | None = None


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    idle_since: float = field(default_factory=time.monotonic)
    nice: int = 0                           # _LOWEST while its call is heavy
    ready: bool = False                     # it said so: its signal handlers are in place
    calls: int = 0                          # calls it served: its copy-on-write pages are its own now


class WorkerPool:
    """At most ``size`` worker processes, each running ``handler`` ("module:function") on one request at a
    time.

    ``handler(request: dict, seconds: float) -> dict`` gets the seconds left
    until its answer is due; it is killed ``grace`` seconds after that.
    """

    def __init__(self, handler: str, preload: list[str], size: int = 32, min_idle: int = 8,
                 memory_bytes: int | None = 512 << 20, retire_growth: int = 64 << 20,
                 idle_seconds: float = 10.0, heavy_after: tuple = (0.06, 0.3), heavy_slots: int = 1):
        self.handler, self.size, self.min_idle = handler, size, min_idle
        self.memory_bytes, self.retire_growth = memory_bytes, retire_growth
        self.idle_seconds, self.heavy_after = idle_seconds, heavy_after
        self._heavy = threading.BoundedSemaphore(heavy_slots)
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        self._ctx: Any = multiprocessing.get_context(method)     # a forkserver or spawn context
        if method == "forkserver":
            self._ctx.set_forkserver_preload(preload)
        self._idle: list[_Worker] = []
        self._live = 0                      # workers started and not yet killed, idle or busy
        self._cond = threading.Condition()
        self._wake = threading.Event()          # a worker left, or a request waits: start one
        self._waiting = 0                       # requests waiting for an idle worker
        self._closed = False

    # -- calls ------------------------------------------------------------------------------
    def call(self, request: dict, due: float, grace: float) -> Reply:
        """Run ``request`` on a worker; ``due`` is a ``time.monotonic()`` instant.

        Waits for a free worker until ``due`` ("busy" after that), then for
        the answer: at ``due`` the worker is told to stop ("timeout"), and at
        ``due + grace`` it is killed if it has not.
        """
        worker = self._acquire(due)
        if worker is None:
            return Reply("busy")
        reply, keep = Reply("died"), False
        try:
            reply, keep = self._exchange(worker, request, due, grace)
        finally:
            self._release(worker, keep)
        return reply

    def _exchange(self, worker: _Worker, request: dict, due: float, grace: float) -> tuple[Reply, bool]:
        """The reply, and whether the worker may serve again."""
        deadline = due + grace
        try:
            if not _await_ready(worker, due):    # still starting (a busy machine): healthy, keep it
                return Reply("timeout"), True
            worker.conn.send_bytes(json.dumps({"request": request,
                                               "seconds": due - time.monotonic()}).encode())
            if not self._wait(worker, due, deadline):
                return Reply("timeout"), False
            message = json.loads(worker.conn.recv_bytes())
        except (EOFError, OSError, ValueError):
            return Reply("died"), False
        worker.calls += 1
        keep = _restore(worker) and message["grown"] <= self.retire_growth
        if "answer" in message:
            return Reply("answer", message["answer"]), keep
        return Reply("timeout" if message.get("stopped") else "memory"), keep

    def _wait(self, worker: _Worker, due: float, deadline: float) -> bool:
        """Wait for the worker's answer until ``deadline``, asking it to stop at ``due``.

        Once the call has used ``heavy_after`` CPU (user, or user + system) it
        is heavy: it drops to the lowest priority and runs only while it holds
        one of ``heavy_slots``, paused (SIGSTOP) until one is free; so expensive
        calls, however many, use at most that many CPUs and cheap calls keep
        the rest.  CPU, not wall time: on a busy machine a cheap call waits for
        the CPU too.
        """
        pid = _pid(worker)
        start, asked, heavy, holds, paused = _cpu_seconds(pid), False, False, False, False
        try:
            while True:
                now = time.monotonic()
                if not asked and now >= due:
                    if paused:
                        _signal(worker, signal.SIGCONT)
                        paused = False
                    _restore(worker)               # it stops sooner at normal priority
                    _signal(worker, signal.SIGUSR1)
                    asked = True
                step = min(deadline - now, _CHECK_EVERY) if asked else min(due - now, _CHECK_EVERY)
                if worker.conn.poll(max(0.0, step)):
                    return True
                if time.monotonic() >= deadline:
                    return False
                if asked:
                    continue
                if not heavy:
                    user, total = (now_ - then for now_, then in zip(_cpu_seconds(pid), start))
                    heavy = user >= self.heavy_after[0] or total >= self.heavy_after[1]
                    if heavy:
                        _renice(worker, _LOWEST)
                if heavy and not holds:
                    holds = self._heavy.acquire(blocking=False)
                    if holds == paused:            # a slot while paused, or none while running
                        paused = not paused
                        _signal(worker, signal.SIGSTOP if paused else signal.SIGCONT)
        finally:
            if paused:
                _signal(worker, signal.SIGCONT)
            if holds:
                self._heavy.release()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        """Start ``min_idle`` workers and wait until they are ready (the first also starts the fork
        server: seconds), then keep spares in a background thread, off the request path."""
        self.tidy()
        until = time.monotonic() + timeout
        with self._cond:
            starting = list(self._idle)
        for worker in starting:
            _await_ready(worker, until)
        threading.Thread(target=self._housekeeping, name="worker-pool", daemon=True).start()

    def _housekeeping(self) -> None:
        while not self._closed:
            self._wake.wait(0.5)
            self._wake.clear()
            self.tidy()

    def tidy(self) -> None:
        """Retire workers idle for ``idle_seconds`` (beyond ``min_idle``, or used), and start spares up
        to ``min_idle``."""
        now = time.monotonic()
        with self._cond:
            spare = len(self._idle) - self.min_idle
            idle = [w for w in self._idle if now - w.idle_since > self.idle_seconds]
            # beyond min_idle, or used: a fresh fork replaces it, and the pages it dirtied go back
            stale = idle[:max(0, spare)] + [w for w in idle[max(0, spare):] if w.calls]
            for worker in stale:
                self._idle.remove(worker)
            self._live -= len(stale)
            # spares, and one for each request waiting
            missing = 0 if self._closed else min(self.min_idle + self._waiting - len(self._idle),
                                                 self.size - self._live)
            self._live += max(0, missing)
        for worker in stale:
            _kill(worker)
        multiprocessing.active_children()       # reaps the workers that have finished dying
        for _ in range(missing):
            spawned: _Worker | None = None
            try:
                spawned = self._spawn()
            finally:
                self._release(spawned, keep=spawned is not None)

    def stats(self) -> dict:
        with self._cond:
            return {"workers": self._live, "idle": len(self._idle), "max": self.size}

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._wake.set()
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            _kill(worker)

    # -- internals --------------------------------------------------------------------------
    def _acquire(self, until: float) -> _Worker | None:
        """An idle worker, waiting until ``until`` for one.  Requests never fork (a fork can take long
        on a busy machine): the housekeeping thread does, for the requests waiting here."""
        with self._cond:
            self._waiting += 1
            try:
                while not self._idle:
                    left = until - time.monotonic()
                    if left <= 0 or self._closed:
                        return None
                    self._wake.set()
                    self._cond.wait(left)
            finally:
                self._waiting -= 1
            # the most recently used ready one (its pages are warm); one still starting only if none is
            ready = [i for i, w in enumerate(self._idle) if w.ready or _poll_ready(w)]
            return self._idle.pop(ready[-1] if ready else -1)

    def _release(self, worker: _Worker | None, keep: bool) -> None:
        with self._cond:
            keep = keep and not self._closed
            if keep and worker is not None:
                worker.idle_since = time.monotonic()
                self._idle.append(worker)
            else:
                self._live -= 1
                self._wake.set()
            self._cond.notify()
        if worker is not None and not keep:
            _kill(worker)

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child, self.handler, self.memory_bytes), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)


def _pid(worker: _Worker) -> int:
    """The worker's process id (it has one: workers are started before they are handed out)."""
    return cast(int, worker.process.pid)


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """User and user + system CPU seconds a process has used (Linux ``/proc``; zeros elsewhere, and then
    nothing counts as heavy).  A fresh fork's first call spends tens of ms of system time in copy-on-write
    page faults, which says little about how expensive the call is: hence two thresholds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) / _TICKS, (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def _renice(worker: _Worker, nice: int) -> None:
    worker.nice = nice
    try:
        os.setpriority(os.PRIO_PROCESS, _pid(worker), nice)
    except (AttributeError, OSError):       # no setpriority here, or the process is gone
        pass


def _poll_ready(worker: _Worker) -> bool:
    """Whether the worker is ready, without waiting."""
    return _await_ready(worker, 0.0)


def _await_ready(worker: _Worker, until: float) -> bool:
    """Whether the worker has said it is ready (its SIGUSR1 handler is set: a signal no longer kills it)."""
    if not worker.ready and worker.conn.poll(max(0.0, until - time.monotonic())):
        worker.ready = json.loads(worker.conn.recv_bytes()) == "ready"
    return worker.ready


def _signal(worker: _Worker, signum: int) -> None:
    try:
        os.kill(_pid(worker), signum)
    except OSError:                           # already gone
        pass


def _restore(worker: _Worker) -> bool:
    """Whether the worker runs at normal priority again (raising it back needs privileges most lack)."""
    if worker.nice:
        try:
            os.setpriority(os.PRIO_PROCESS, _pid(worker), 0)
        except (AttributeError, OSError):
            return False
        worker.nice = 0
    return True


def _kill(worker: _Worker) -> None:
    """SIGKILL without waiting for the exit.  A process exits at its own priority, so a demoted one is
    restored first where that is allowed: at the lowest it takes seconds to die on a busy machine."""
    worker.conn.close()
    _restore(worker)
    try:
        worker.process.kill()
    except (OSError, ValueError):             # already gone
        pass


# ---------------------------------------------------------------------------- in the worker

class _Stop(BaseException):
    """Raised in a worker's call when its due time has come (a BaseException: ``except Exception``
    handlers in the work must not swallow it)."""


_busy = False                                 # a call is running: SIGUSR1 stops it; otherwise it is late


def _on_stop(signum, frame):
    if _busy:
        raise _Stop


def _serve(conn, handler: str, memory_bytes: int | None) -> None:
    global _busy
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is for the server, which kills its workers
    signal.signal(signal.SIGUSR1, _on_stop)
    module, _, name = handler.partition(":")
    function = getattr(importlib.import_module(module), name)
    _cap_memory(memory_bytes)
    start = _peak_rss()
    conn.send_bytes(b'"ready"')
    while True:
        try:
            message = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            _busy = True
            reply = {"answer": function(message["request"], message["seconds"])}
        except _Stop:
            reply = {"stopped": True}
        except MemoryError:
            reply = {}
        finally:
            _busy = False
        reply["grown"] = _peak_rss() - start
        conn.send_bytes(json.dumps(reply).encode())


def _cap_memory(extra: int | None) -> None:
    """Let this process map at most ``extra`` bytes beyond what it has now (Linux ``/proc``; else no cap)."""
    if extra is None:
        return
    try:
        import resource

        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = mapped + extra
        if hard == resource.RLIM_INFINITY or limit <= hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        pass


def _peak_rss() -> int:
    """Peak resident memory of this process in bytes (0 where ``resource`` is missing)."""
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024
    except ImportError:
        return 0
