"""Where the bench's jobs run: a local pool, or Ray tasks; progress with tqdm either way.

A job is one call of a function that starts one export in a fresh interpreter
with a timeout and returns its JSON row (``case_runner._one``); the driver only
starts jobs and collects rows.  ``local`` runs ``--jobs`` of them at a time from
threads (each job is its own process: exports hold the GIL and torch's global
state).  ``ray`` submits the same function as ``@ray.remote(num_cpus=1)`` tasks
to the Ray instance ``ray.init()`` connects to (``RAY_ADDRESS``, else a local
one with ``--jobs`` CPUs), so a cluster whose nodes have this checkout and
torch 2.13 at the same path runs the same subprocesses there.  Rows come back
as jobs finish and are returned in job order, so both executors give the same
files.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

__all__ = ["EXECUTORS", "run_jobs"]

EXECUTORS = ("local", "ray")
REPO = Path(__file__).resolve().parents[1]


def run_jobs(function: Callable[..., dict], jobs: Sequence[tuple], *, executor: str = "local",
             workers: int = 2, describe: Callable[[dict], str] = str, desc: str = "exports") -> list[dict]:
    """``[function(*job) for job in jobs]``, ``workers`` at a time on ``executor``, with a progress bar.

    ``describe(row)`` is the line written above the bar as each job finishes.
    """
    from tqdm import tqdm      # imported here: the per-export child processes import this module's callers

    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}: one of {', '.join(EXECUTORS)}")
    rows: list[dict | None] = [None] * len(jobs)
    finished = _ray(function, jobs, workers) if executor == "ray" else _local(function, jobs, workers)
    with tqdm(total=len(jobs), desc=desc, unit="export", file=sys.stderr, dynamic_ncols=True) as bar:
        for index, row in finished:
            rows[index] = row
            bar.write(describe(row), file=sys.stderr)
            bar.update()
    return rows


def _local(function, jobs, workers):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(function, *job): k for k, job in enumerate(jobs)}
        for future in as_completed(futures):
            yield futures[future], future.result()


def _ray(function, jobs, workers):
    try:
        import ray
    except ImportError:
        raise SystemExit('--executor ray needs Ray: pip install "ray>=2.40" (extra: -e ".[ray]")') from None
    if not ray.is_initialized():
        # Workers import the job function from this checkout (bench/ is a folder, not an installed package).
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        local = {} if os.environ.get("RAY_ADDRESS") else {"num_cpus": workers, "include_dashboard": False}
        ray.init(runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False, **local)
    task = ray.remote(num_cpus=1, max_retries=0)(function)
    pending = {task.remote(*job): k for k, job in enumerate(jobs)}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        yield pending.pop(done[0]), ray.get(done[0])
