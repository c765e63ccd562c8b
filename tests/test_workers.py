"""Worker processes: an answer, a cooperative stop at the due time, a kill when the worker does not stop."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from shapeproof.shapes.apps.workers import WorkerPool

HANDLERS = "worker_handlers"


@pytest.fixture(scope="module")
def pool():
    sys.path.insert(0, str(Path(__file__).parent))      # the workers import the handlers by name
    pools = []

    def make(name: str, **options):
        p = WorkerPool(f"{HANDLERS}:{name}", preload=["shapeproof.shapes.apps.workers", HANDLERS], size=2,
                       min_idle=1, **options)
        p.start()
        pools.append(p)
        return p

    yield make
    for p in pools:
        p.close()
    sys.path.remove(str(Path(__file__).parent))


def _call(p: WorkerPool, request: dict, budget: float, grace: float = 0.5):
    start = time.monotonic()
    reply = p.call(request, due=start + budget, grace=grace)
    return reply, time.monotonic() - start


def test_answer_and_seconds_left(pool):
    reply, _ = _call(pool("echo"), {"x": 1}, budget=5.0)
    assert reply.kind == "answer" and reply.body["echo"] == {"x": 1} and 0 < reply.body["seconds_left"] <= 5.0


def test_work_in_python_is_stopped_at_its_due_time_and_the_worker_serves_again(pool):
    p = pool("python_loop")
    first = {w.process.pid for w in p._idle}
    reply, seconds = _call(p, {}, budget=0.5)
    assert reply.kind == "timeout" and 0.5 <= seconds < 0.5 + 0.5 + 0.3
    assert first <= {w.process.pid for w in p._idle if w.process.is_alive()}   # stopped, not killed
    reply, seconds = _call(p, {}, budget=0.3)
    assert reply.kind == "timeout" and seconds < 0.3 + 0.5 + 0.3


def test_a_worker_that_does_not_stop_is_killed_at_due_plus_grace(pool):
    p = pool("stuck_in_c")
    (worker,) = p._idle
    reply, seconds = _call(p, {}, budget=0.3, grace=0.4)
    assert reply.kind == "timeout" and 0.7 <= seconds < 0.7 + 0.5
    worker.process.join(timeout=10)
    assert worker.process.exitcode == -9                  # SIGKILL
    assert worker not in p._idle


def test_a_worker_that_grew_past_retire_growth_is_replaced(pool):
    p = pool("grow", retire_growth=32 << 20)
    reply, _ = _call(p, {"mb": 4}, budget=5.0)
    small = next(iter(p._idle)).process.pid if p._idle else None
    assert reply.kind == "answer" and small is not None
    reply, _ = _call(p, {"mb": 64}, budget=5.0)
    assert reply.kind == "answer" and reply.body == {"kept": 64}
    assert small not in {w.process.pid for w in p._idle}  # it grew by 64 MB: killed, not kept
