"""An export leaves the rest of the process alone (issue 50).

* lazy modules in ``sys.modules`` stay unloaded, and the export works beside them;
* other threads see Python's ``range``, ``int`` and ``math.sqrt`` while an export runs, even in the module
  whose model is being exported, and two exports side by side give the programs each gives alone;
* the process state an export may touch is as it was after success, failure and an interrupt.
"""
import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import math
import os
import random
import sys
import threading
import types
import warnings

import numpy as np
import pytest
import torch
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError
from shapeproof.tracer.exact_cancel import exact_cancellation
from shapeproof.tracer.sizes.hintless import hintless_views
from shapeproof.tracer.patching import on_engine_thread
from shapeproof.tracer.sym_expr_cache import cached_sym_exprs
from shapeproof.tracer.sizes.user_globals import symbolic_user_names

PYTHON_RANGE, PYTHON_INT, PYTHON_SQRT = builtins.range, builtins.int, math.sqrt

# A model module of the user's, written to disk so that the stand-ins reach it; it also holds what its
# other threads run: plain Python that calls ``range``, ``int`` and ``math.sqrt`` (only as calls, so the
# module gets the stand-ins and its other threads meet them).
MODEL_SOURCE = '''
import math
import torch


class Grid(torch.nn.Module):
    """8x8 patches back to their square grid (int of math.sqrt of a size), cut in chunks of the whole width
    (range over a size, one iteration at every size): each specializes without the stand-ins."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 4, 8, stride=8)

    def forward(self, image):                               # (B, 3, 8g, 8g)
        tokens = self.embed(image).flatten(2).transpose(1, 2)
        b, n, d = tokens.shape
        g = int(math.sqrt(n))
        grid = tokens.transpose(1, 2).reshape(b, d, g, g)
        return torch.cat([grid[..., offset: offset + g] for offset in range(0, g, g)], dim=-1)


def plain_python():
    """What another thread of the user's runs: the values and types Python gives."""
    r = range(3)
    return type(r), list(r), int(2.5), int("7"), math.sqrt(16.0), isinstance(3, int)
'''


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user_code")
    (folder / "grid_model.py").write_text(MODEL_SOURCE)
    sys.path.insert(0, str(folder))
    try:
        import grid_model
        yield grid_model
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("grid_model", None)


def _grid_spec():
    side = 8 * Dim("G", min=1, max=16)
    return ({0: Dim("B", min=1, max=8), 2: side, 3: side},)


def _program_text(program) -> tuple[str, str]:
    ranges = sorted((str(k), str(v)) for k, v in program.range_constraints.items())
    return program.graph_module.code, str(ranges)


_IMAGE = torch.randn(2, 3, 24, 24)


def _export_grid(user_module, model=None):
    model = user_module.Grid() if model is None else model
    return shapeproof.export(model, (_IMAGE,), dynamic_shapes=_grid_spec())


# -- lazy modules -----------------------------------------------------------------------------------------

class _Unloadable(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise ImportError("this lazy module's target cannot be imported")


def _lazy_loader_module(name: str) -> types.ModuleType:
    """A module of ``importlib.util.LazyLoader`` whose target raises when anything reads it."""
    spec = importlib.machinery.ModuleSpec(name, importlib.util.LazyLoader(_Unloadable()), origin=__file__)
    spec.has_location = True
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _GetattrLazy(types.ModuleType):
    """A module whose attributes import a missing package on first read, as speechbrain's lazy exports do."""

    reads: list = []

    def __getattr__(self, name):
        self.reads.append(name)
        raise ImportError("Please install k2 to use k2")


class Plus(torch.nn.Module):
    def forward(self, x):
        return x + 1


def test_an_export_beside_lazy_modules_leaves_them_unloaded():
    loader_module = _lazy_loader_module("shapeproof_test_lazy_loader")
    getattr_module = _GetattrLazy("shapeproof_test_lazy_getattr")
    sys.modules["shapeproof_test_lazy_loader"] = loader_module
    sys.modules["shapeproof_test_lazy_getattr"] = getattr_module
    globals()["lazy_reference"] = getattr_module                # a user module holding one as a value
    try:
        spec = ({0: Dim("B", min=1, max=64)},)
        program = shapeproof.export(Plus(), (torch.randn(3, 4),), dynamic_shapes=spec)
        assert torch.equal(program.module()(torch.ones(5, 4)), torch.full((5, 4), 2.0))
        assert type(loader_module) is importlib.util._LazyModule          # never loaded
        assert _GetattrLazy.reads == []
    finally:
        del sys.modules["shapeproof_test_lazy_loader"], sys.modules["shapeproof_test_lazy_getattr"]
        del globals()["lazy_reference"]


# -- other threads ----------------------------------------------------------------------------------------

def _what_python_gives():
    return PYTHON_RANGE, [0, 1, 2], 2, 7, 4.0, True


def test_other_threads_see_pythons_names_while_an_export_runs(user_module):
    alone = _export_grid(user_module)
    assert alone.module()(torch.randn(3, 3, 40, 40)).shape == (3, 4, 5, 5)     # the grid is symbolic
    stop, wrong, rounds = threading.Event(), [], [0]
    eager_model, eager_input = user_module.Grid(), torch.randn(2, 3, 16, 16)
    expected = eager_model(eager_input)

    def watch():
        while not stop.is_set():
            rounds[0] += 1
            names = (builtins.range, builtins.int, math.sqrt, type(range(3)))
            if names != (PYTHON_RANGE, PYTHON_INT, PYTHON_SQRT, PYTHON_RANGE) or on_engine_thread():
                wrong.append(("names", rounds[0]))
            if user_module.plain_python() != _what_python_gives():
                wrong.append(("model's module", rounds[0]))
            # torch.export itself turns mkldnn off process-wide while it traces (torch/export/_trace.py,
            # _ignore_backend_decomps): another thread's convolutions then differ in the last bits
            if rounds[0] % 50 == 0 and not torch.allclose(eager_model(eager_input), expected, atol=1e-5):
                wrong.append(("eager", rounds[0]))

    watchers = [threading.Thread(target=watch) for _ in range(2)]
    for w in watchers:
        w.start()
    try:
        during = _export_grid(user_module)
    finally:
        stop.set()
        for w in watchers:
            w.join()
    assert rounds[0] > 100 and wrong == []
    assert _program_text(during) == _program_text(alone)


class Halves(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1, 2).sum(-1)


def test_two_exports_side_by_side_give_the_programs_each_gives_alone(user_module):
    halves_spec = ({0: Dim("B", min=1, max=32), 1: 2 * Dim("T", min=1, max=64)},)
    alone = [_program_text(_export_grid(user_module)),
             _program_text(shapeproof.export(Halves(), (torch.randn(3, 8),), dynamic_shapes=halves_spec))]
    together: list = [None, None]
    errors: list = []

    def run(i):
        try:
            program = (_export_grid(user_module) if i == 0 else
                       shapeproof.export(Halves(), (torch.randn(3, 8),), dynamic_shapes=halves_spec))
            together[i] = _program_text(program)
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and together == alone


def test_torch_export_on_a_thread_without_a_trace_is_torchs_own_while_the_patches_are_in(user_module):
    """torch.export on a thread that runs no engine trace, while another's patches are in (as they are while
    a shapeproof export runs elsewhere), gives the program (or failure) it gives alone.  torch.export itself
    cannot run beside another export in a second thread (torch.fx's patcher is one global): only the
    patches' effect is checked here, on this thread."""
    def torch_program():
        try:
            program = torch.export.export(user_module.Grid(), (torch.randn(2, 3, 24, 24),),
                                          dynamic_shapes=_grid_spec())
        except Exception as e:  # noqa: BLE001  (torch's failure is its answer, to compare)
            return type(e).__name__, str(e)
        return _program_text(program)

    alone = torch_program()
    with exact_cancellation(), cached_sym_exprs(), symbolic_user_names(), hintless_views():
        assert vars(user_module)["range"] is not PYTHON_RANGE and vars(user_module)["math"] is not math
        beside = torch_program()
    assert beside == alone


# -- process state before and after -----------------------------------------------------------------------

def _loggers():
    loggers = [logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                      if isinstance(v, logging.Logger))]
    return {id(lg): (lg.name, lg.level, tuple(map(id, lg.handlers)), tuple(map(id, lg.filters)), lg.propagate,
                     lg.disabled) for lg in loggers}


def _configs():
    import torch._dynamo.config
    import torch._functorch.config
    import torch.fx.experimental._config
    import torch._export.config
    return {name: module.get_config_copy() for name, module in (
        ("dynamo", torch._dynamo.config), ("fx", torch.fx.experimental._config),
        ("functorch", torch._functorch.config), ("export", torch._export.config))}


def snapshot(user_module=None) -> dict:
    """Everything of the process an export may touch, by value or identity."""
    from torch.utils._sympy import functions as sympy_functions
    from torch.fx.experimental.sym_node import SymNode
    import sympy
    state = {
        "builtins": {k: id(v) for k, v in vars(builtins).items()},
        "math": {k: id(v) for k, v in vars(math).items()},
        "torch_sympy": sympy_functions.sympy is sympy,
        "sym_node_expr": id(SymNode.__dict__["expr"]),
        "configs": _configs(),
        "default_dtype": torch.get_default_dtype(),
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "threads": torch.get_num_threads(),
        "exporting": torch.compiler.is_exporting(),
        "compiling": torch.compiler.is_compiling(),
        "function_modes": torch._C._len_torch_function_stack(),
        "dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "warnings": list(warnings.filters),
        "showwarning": warnings.showwarning,
        "loggers": _loggers(),
        "logging_disable": logging.root.manager.disable,
        "environ": dict(os.environ),
        "random": random.getstate(),
        "numpy_random": repr(np.random.get_state()),
        "torch_random": torch.get_rng_state(),
        "trace": sys.gettrace(),
        "profile": sys.getprofile(),
        "recursion": sys.getrecursionlimit(),
        "cwd": os.getcwd(),
        "sys_path": list(sys.path),
        "engine_thread": on_engine_thread(),
        "stand_ins": symbolic_user_names.active,
        "model_code": {m.__name__: m.forward.__code__ for m in _MODELS},
    }
    if user_module is not None:
        state["user_module"] = {k: id(v) for k, v in vars(user_module).items()}
    return state


def _same(before: dict, after: dict):
    for key in before:
        b, a = before[key], after[key]
        same = torch.equal(b, a) if isinstance(b, torch.Tensor) else b == a
        assert same, f"{key} changed by the export"


class Interrupted(torch.nn.Module):
    """Raises KeyboardInterrupt in the middle of its trace (with the stand-ins and patches in)."""

    seen: list = []

    def forward(self, x):
        y = x.reshape(x.shape[0], -1, 2)
        if on_engine_thread():
            self.seen.append(symbolic_user_names.active)
            raise KeyboardInterrupt
        return y


class Branches(torch.nn.Module):
    """Sides that differ: a search would trace again, past a tiny budget."""

    def forward(self, x):
        if x.shape[1] > 32:
            return x[:, :32] * 2
        return x.reshape(x.shape[0], -1, 2)


class Odd(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1, 2)      # T odd fails: the export fails


def _interrupted_in_a_side(x):
    if sys._getframe(1).f_code.co_name == "side_of_if":
        raise KeyboardInterrupt
    return x


class InterruptedAfterARewrite(torch.nn.Module):
    """An early return run as a cond (its function's code swapped), interrupted while a side is traced."""

    def forward(self, x):
        if x.shape[1] % 2 != 0:
            return torch.nn.functional.pad(x, (0, 1)).reshape(x.shape[0], -1, 2)
        y = _interrupted_in_a_side(x)
        return y.reshape(x.shape[0], -1, 2)


_MODELS = (Interrupted, Branches, Odd, InterruptedAfterARewrite)


@pytest.mark.parametrize("outcome",
                         ["success", "failure", "interrupt", "interrupt after a rewrite", "budget"])
def test_the_process_is_as_it_was_after_an_export(outcome, user_module):
    _export_grid(user_module)                  # first-use caches and imports are not the export's changes
    x, model = torch.randn(2, 8), user_module.Grid()
    before = snapshot(user_module)
    if outcome == "success":
        _export_grid(user_module, model)
    elif outcome == "failure":
        with pytest.raises(ExportError):
            shapeproof.export(Odd(), (x,), dynamic_shapes=({1: Dim("T", min=2, max=64)},))
    elif outcome == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            shapeproof.export(Interrupted(), (x,), dynamic_shapes=({0: Dim("B", max=64)},))
        assert Interrupted.seen == [True]
    elif outcome == "interrupt after a rewrite":
        with pytest.raises(KeyboardInterrupt):
            shapeproof.export(InterruptedAfterARewrite(), (x,),
                              dynamic_shapes=({1: Dim("T", min=2, max=64)},))
    else:
        try:
            shapeproof.export(Branches(), (x,), dynamic_shapes=({1: 2 * Dim("T", min=1, max=64)},),
                              time_budget=0.01)
        except ExportError:
            pass
    _same(before, snapshot(user_module))
