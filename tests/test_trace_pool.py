"""Traces side by side: a region search traces several points at once, the others in forked children."""
from __future__ import annotations

import io
import multiprocessing
import os
import time

import pytest
import shapeproof
import torch
from shapeproof.export.search import regions, trace_pool
from shapeproof.export.settings import ExportSettings
from shapeproof.export.search.traces import LocalTrace, Trace, trace
from torch.export import Dim

__shapeproof_user_code__ = True

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="children are forked")


class EvenOrOdd(torch.nn.Module):
    """Four code paths by the parity of H and W, four programs (the bodies differ in value)."""

    def forward(self, x):
        h, w = x.shape[1], x.shape[2]
        y = x * 2 if h % 2 == 0 else x + 1
        return y - 3 if w % 2 == 0 else y * 5


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4))
        self.register_buffer("shift", torch.randn(4))

    def forward(self, x):
        if x.shape[1] % 2 == 0:
            return x * self.weight + self.shift
        return x * self.weight - self.shift


SPEC = ({1: Dim("H", min=2, max=16), 2: Dim("W", min=2, max=16)},)
SCALED_SPEC = ({1: Dim("H", min=2, max=16)},)


@pytest.fixture
def always_side_by_side(monkeypatch):
    """Trace side by side however short the first trace was (the models here trace in milliseconds)."""
    monkeypatch.setattr(regions, "SIDE_BY_SIDE_WORTH", 0.0)


def _sizes():
    return [(h, w) for h in (2, 3, 8, 15, 16) for w in (2, 5, 12, 16)]


def _ship(made) -> dict:
    return {"made": made}


def test_a_child_runs_in_another_process_and_ships_its_answer_back():
    child = trace_pool.Child(os.getpid, _ship)
    answer = child.answer(time.perf_counter() + 30)
    assert answer is not None and answer["made"] != os.getpid()
    assert not child.process.is_alive()


def _fails():
    raise RuntimeError("a trace that fails in the child")


def test_a_child_that_fails_or_overruns_answers_nothing():
    assert trace_pool.Child(_fails, _ship).answer(time.perf_counter() + 30) is None
    start = time.perf_counter()
    slow = trace_pool.Child(lambda: time.sleep(60), _ship)
    assert slow.answer(time.perf_counter() + 1) is None
    assert time.perf_counter() - start < 10 and not slow.process.is_alive()


def test_a_search_side_by_side_finds_the_programs_a_search_alone_does(always_side_by_side):
    alone = shapeproof.export_with_report(EvenOrOdd(), (torch.randn(2, 4, 6),), dynamic_shapes=SPEC,
                                          split=True, workers=1)
    together = shapeproof.export_with_report(EvenOrOdd(), (torch.randn(2, 4, 6),), dynamic_shapes=SPEC,
                                             split=True, workers=2)
    assert alone.regions is not None and together.regions is not None
    assert alone.regions.covered and together.regions.covered
    assert len(alone.regions.regions) == len(together.regions.regions) == 4
    shipped = [t for t in together.regions.traces if not isinstance(t, LocalTrace)]
    assert shipped, "some trace was made in a child"
    assert all(isinstance(t, Trace) and t.program is not None for t in shipped)
    module = together.program.module()
    for h, w in _sizes():
        x = torch.randn(2, h, w)
        assert torch.equal(module(x), EvenOrOdd()(x)), (h, w)


def test_a_search_goes_on_when_every_child_fails(always_side_by_side, monkeypatch):
    parent = os.getpid()
    original = regions.trace

    def failing_in_children(*args, **kwargs):
        if os.getpid() != parent:
            os._exit(3)                     # a child that dies without a word
        return original(*args, **kwargs)

    monkeypatch.setattr(regions, "trace", failing_in_children)
    result = shapeproof.export_with_report(EvenOrOdd(), (torch.randn(2, 4, 6),), dynamic_shapes=SPEC,
                                           split=True, workers=2)
    assert result.regions is not None and result.regions.covered
    assert all(isinstance(t, LocalTrace) for t in result.regions.traces)
    assert len(result.regions.regions) == 4


def test_a_shipped_trace_reads_as_the_trace_it_was(always_side_by_side):
    model = Scaled()
    first = trace(model, (torch.randn(2, 4, 4),), None, SCALED_SPEC, ExportSettings(timeout=1.0))
    assert first.program is not None
    back = regions._unshipped(regions._shipped(first, model), model, first.started_from)
    assert type(back) is Trace
    assert back.fingerprint == first.fingerprint
    assert back.region == first.region and back.point == first.point and back.sizes == first.sizes
    assert back.symbols == first.symbols and back.torch_checks == first.torch_checks
    assert back.program is not None
    assert getattr(back.program, "_guards_code") == getattr(first.program, "_guards_code")
    # it holds the model's own weights, as torch.export's program does
    assert back.program.state_dict["weight"] is model.weight
    assert back.program.state_dict["shift"] is model.shift
    x = torch.randn(2, 6, 4)
    assert torch.equal(back.program.module()(x), model(x))
    # and it is torch's program in every other way: it saves, loads and decomposes
    buffer = io.BytesIO()
    torch.export.save(back.program, buffer)
    buffer.seek(0)
    assert torch.equal(torch.export.load(buffer).module()(x), model(x))
    assert torch.equal(back.program.run_decompositions().module()(x), model(x))


def test_a_failure_in_a_child_comes_back_as_its_first_line():
    model = Scaled()
    first = trace(model, (torch.randn(2, 4, 4),), None, SCALED_SPEC, ExportSettings(timeout=1.0))
    data = regions._shipped(first, model)
    data["program"], data["failure"] = None, "RuntimeError: no trace here"
    back = regions._unshipped(data, model, first.started_from)
    assert back.program is None and isinstance(back.failure, trace_pool.ShippedFailure)
    assert str(back.failure) == "RuntimeError: no trace here"


@pytest.mark.parametrize("workers", [1, 2])
def test_export_takes_workers(always_side_by_side, workers):
    model = Scaled()
    program = shapeproof.export(model, (torch.randn(2, 4, 4),), dynamic_shapes=SCALED_SPEC, split=True,
                                workers=workers)
    for h in (2, 3, 16):
        x = torch.randn(2, h, 4)
        assert torch.equal(program.module()(x), model(x))


def test_a_search_with_ray_tasks_finds_the_programs_a_search_here_does(always_side_by_side, monkeypatch):
    ray = pytest.importorskip("ray")
    # a Ray worker starts cold (it imports torch): on a loaded machine that alone can pass the 30 s a task is
    # given past a trace of milliseconds; what is tested here is the answer, not its time
    monkeypatch.setattr(regions, "SLACK", 600.0)
    try:
        result = shapeproof.export_with_report(EvenOrOdd(), (torch.randn(2, 4, 6),), dynamic_shapes=SPEC,
                                               split=True, workers=2, executor="ray")
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert result.regions is not None and result.regions.covered and len(result.regions.regions) == 4
    assert any(not isinstance(t, LocalTrace) for t in result.regions.traces), "some trace was a Ray task's"
    module = result.program.module()
    for h, w in _sizes():
        x = torch.randn(2, h, w)
        assert torch.equal(module(x), EvenOrOdd()(x)), (h, w)


def test_an_unknown_executor_is_refused_before_any_trace():
    with pytest.raises(ValueError, match="executor must be one of 'fork', 'ray'"):
        shapeproof.export(Scaled(), (torch.randn(2, 4, 4),), dynamic_shapes=SCALED_SPEC, executor="threads")


def test_ray_is_not_started_by_an_export_that_needs_no_second_trace():
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    model = Scaled()
    program = shapeproof.export(model, (torch.randn(2, 4, 4),), dynamic_shapes=({0: Dim("B", min=1, max=8)},),
                                executor="ray")
    assert not ray.is_initialized()
    x = torch.randn(5, 4, 4)
    assert torch.equal(program.module()(x), model(x))


def _export_in_a_daemon(answers) -> None:
    result = shapeproof.export_with_report(EvenOrOdd(), (torch.randn(2, 4, 6),), dynamic_shapes=SPEC,
                                           split=True, workers=2)
    assert result.regions is not None
    answers.put((result.regions.covered, len(result.regions.regions),
                 all(isinstance(t, LocalTrace) for t in result.regions.traces)))


def test_a_daemonic_process_traces_alone(always_side_by_side):
    """multiprocessing gives a daemonic process (a Pool's or DataLoader's worker) no children: the search
    traces there alone, even with ``workers=2``, instead of failing."""
    assert trace_pool.available_workers() >= 1
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    daemon = context.Process(target=_export_in_a_daemon, args=(answers,), daemon=True)
    daemon.start()
    covered, programs, all_here = answers.get(timeout=120)
    daemon.join(30)
    assert (covered, programs, all_here) == (True, 4, True)
    assert daemon.exitcode == 0
