"""Traces side by side: one in this process, the others in processes forked from it (or Ray's).

A region search that needs several more traces picks several points at once
(``regions.py``): it traces the first itself and forks a child for each of
the others.  Forking after the model is built gives every child the model,
the first trace and the solver's answers so far (copy on write); nothing is
pickled on the way in.  Each child sends its trace back as its program
(pickled by torch's own pickler of graph modules, the model's weights by
name) and the plain data of a ``Trace``: region, sizes, terms.  Its engine
and torch's shape environment stay behind: of a later trace the search reads
only the program, its region and its input checks, and the child computes
those checks before sending.

A child's point is speculative: the search reads its trace only if the
regions found meanwhile leave the point uncovered, and ends it otherwise.  A
child that fails, overruns its time, or traces a program that does not pickle
(or load) answers nothing; the search traces on here, and only the child's
time is lost.

Where the caller asks for it (``executor="ray"``), the other traces are Ray
tasks instead (``RayTask``), answered the same way.
"""
from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import fields
from typing import TypeVar

import torch
from multiprocessing.connection import Connection
from shapeproof.tracer.torch_internals import (
    FakeTensorMode, GraphPickler, GraphPicklerOptions, GraphUnpickler, GraphUnpickleState, ShapeEnvPickleData,
    TorchShapeEnv, graph_pickling,
)

__all__ = ["Child", "RayTask", "ShippedFailure", "available_workers", "started_elsewhere",
           "plain_fields", "program_bytes", "program_from", "workers_of"]


Made = TypeVar("Made")
# a child may take this many times as long as the export's first trace, plus SLACK seconds, from its start:
# its point may be several times larger, and it shares the machine
PATIENCE, SLACK = 4.0, 30.0
# a child's scheduling priority below its parent's (its Z3 helpers inherit it)
NICENESS = 5


class ShippedFailure(Exception):
    """Why a child's trace gave no program, as its first line read in the child (exceptions need not
    pickle)."""


def available_workers() -> int:
    """Processes that may trace at once: one per core this process may run on, where ``fork`` exists and
    this process may have children (multiprocessing refuses children to a daemonic process: a worker of a
    ``multiprocessing.Pool`` or of a DataLoader)."""
    if "fork" not in multiprocessing.get_all_start_methods() or multiprocessing.current_process().daemon:
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:             # no affinity call (macOS)
        return os.cpu_count() or 1


_started = 0


def started_elsewhere() -> int:
    """Traces this process has started in forked children and Ray tasks so far (benchmarks count them)."""
    return _started


class Child:
    """``ship(run())`` under way in a process forked from this one.

    Its answer is plain data pickled between this process and its own child
    only; it is read when the caller needs it, so a child whose work turned
    out not to be needed is ended without being waited for.
    """

    def __init__(self, run: Callable[[], Made], ship: Callable[[Made], dict]):
        global _started
        context = multiprocessing.get_context("fork")
        self.reader, writer = context.Pipe(duplex=False)
        self.process = context.Process(target=_child_main, args=(run, ship, writer), daemon=True)
        self.started = time.perf_counter()
        try:
            self.process.start()
        except BaseException:
            self.reader.close()
            raise
        finally:
            writer.close()
        _started += 1

    def answer(self, until: float) -> dict | None:
        """The shipped data; None if the child failed or has not answered by ``until`` (a
        ``time.perf_counter()`` value; it is ended then)."""
        data = b""
        try:
            if self.reader.poll(max(0.0, until - time.perf_counter())):
                data = self.reader.recv_bytes()
        except (EOFError, OSError):
            pass
        self.end()
        return pickle.loads(data) if data else None

    def end(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.reader.close()


class RayTask:
    """``function(*args)`` as a task of the Ray cluster ``ray.init()`` connects to (one started on this
    machine unless ``RAY_ADDRESS`` names one or the caller started Ray), answered like a ``Child``.

    Ray's workers share no memory with this process: the arguments (the model
    too) are pickled by Ray, and ``function`` must be importable there.
    """

    def __init__(self, function: Callable[..., dict], *args):
        global _started
        ray = ray_module()
        _started += 1
        self.started = time.perf_counter()
        self.ref = ray.remote(num_cpus=1, max_retries=0)(function).remote(*args)

    def answer(self, until: float) -> dict | None:
        ray = ray_module()
        done, _ = ray.wait([self.ref], timeout=max(0.0, until - time.perf_counter()))
        if not done:
            self.end()
            return None
        try:
            return ray.get(self.ref)
        except Exception:              # noqa: BLE001 -- a task that failed answers nothing
            return None

    def end(self) -> None:
        ray = ray_module()
        done, _ = ray.wait([self.ref], timeout=0)
        if not done:
            ray.cancel(self.ref, force=True)


def ray_module():
    """Ray, started on this machine if nothing started it (its workers import what this process can)."""
    try:
        import ray
    except ImportError:
        raise ImportError('executor="ray" needs Ray: pip install "ray>=2.40" (or shapeproof[ray])') from None
    if not ray.is_initialized():
        path = os.pathsep.join(p for p in sys.path if p)
        here = not os.environ.get("RAY_ADDRESS")
        ray.init(runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False,
                 include_dashboard=False if here else None)
    return ray


def workers_of(executor: str) -> int:
    """Traces side by side an executor allows by default: the cores here, or the CPUs of Ray's cluster."""
    if executor == "ray":
        return max(1, int(ray_module().cluster_resources().get("CPU", 1)))
    return available_workers()


def _child_main(run, ship, writer: Connection) -> None:
    torch.set_num_threads(1)           # the machine's cores are the pool's; a trace computes little
    os.nice(NICENESS)                  # speculative: the search's own trace goes first where cores are short
    try:
        data = pickle.dumps(ship(run()), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:              # noqa: BLE001 -- the child answers nothing; the search goes on
        data = b""
    writer.send_bytes(data)
    writer.close()


# ---------------------------------------------------------------------------- programs as bytes

# The attributes of torch's own ShapeEnv: a program's symbolic sizes point at the trace's shape environment,
# which is shipped with them, without what the engine keeps in it (its solver, the model's frames) and
# without torch's records of the trace (tracked fakes, caches, the constraint solver fixes come from).
_SHAPE_ENV_STATE = frozenset(TorchShapeEnv().__dict__) - {"tracked_fakes", "fake_tensor_cache",
                                                           "dim_constraints"}


class _ProgramPickler(GraphPickler):
    """torch's pickler of graph modules (fake tensors, symbolic sizes), for a whole ``ExportedProgram``:
    the model's own parameters and buffers go by name, and a shape environment as torch's own state.

    ``torch.export.save`` and ``load`` would do, but ``load`` parses every symbolic size from text with
    sympy: 6 s for MobileViT's program, longer than its trace (this: 0.5 s to pickle, 1.1 s to load)."""

    def __init__(self, stream: io.BytesIO, model: torch.nn.Module):
        super().__init__(stream, GraphPicklerOptions(ops_filter=None))
        self.names = {id(t): name for name, t in _tensors(model).items()}

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor) and id(obj) in self.names:
            return ("model", self.names[id(obj)])
        return super().persistent_id(obj)

    def reducer_override(self, obj):
        if isinstance(obj, TorchShapeEnv):
            state = ShapeEnvPickleData.__new__(ShapeEnvPickleData)
            state.data = {k: v for k, v in obj.__dict__.items() if k in _SHAPE_ENV_STATE}
            return ShapeEnvPickleData.unpickle, (state, self._unpickle_state)
        return super().reducer_override(obj)


class _ProgramUnpickler(GraphUnpickler):
    def __init__(self, stream: io.BytesIO, model: torch.nn.Module):
        super().__init__(stream, GraphUnpickleState(FakeTensorMode(shape_env=TorchShapeEnv())))
        self.tensors = _tensors(model)

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and pid[0] == "model":
            return self.tensors[pid[1]]
        return super().persistent_load(pid)


def _tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(model.named_parameters(remove_duplicate=False)),
            **dict(model.named_buffers(remove_duplicate=False))}


@contextmanager
def _pickling_programs():
    """torch's pickling of graph modules, without the FutureWarning its own pytree specs raise as they are
    pickled and unpickled (``isinstance(treespec, LeafSpec)``: torch's code, not the user's)."""
    with graph_pickling(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
        yield


def program_bytes(program: torch.export.ExportedProgram, model: torch.nn.Module) -> bytes:
    with _pickling_programs(), io.BytesIO() as stream:
        _ProgramPickler(stream, model).dump(program)
        return stream.getvalue()


def program_from(data: bytes, model: torch.nn.Module) -> torch.export.ExportedProgram:
    """A shipped program; it holds ``model``'s own parameters and buffers, as torch.export's program does
    (the model in the process that reads it, matched by name)."""
    with _pickling_programs():
        program = _ProgramUnpickler(io.BytesIO(data), model).load()
    assert isinstance(program, torch.export.ExportedProgram), "a program was shipped"
    return program


def plain_fields(record, leave: set[str]) -> dict:
    """A dataclass's fields by name, without those in ``leave``."""
    return {f.name: getattr(record, f.name) for f in fields(record) if f.name not in leave}
