"""Python loops over a size rolled into one ``scan`` (tracer/control/loops.py, loop_sites.py; issue 42).

Each idiom is a small model exported over a dynamic length: the program holds
one ``scan`` and no unrolled copy of the body, comes from one trace, and
matches eager at both ends of the range and between.  Loops that are not
uniform (the body branches on the index, a carried shape grows, the loop may
run no iteration) stay what they are today: unrolled, an error naming the
loop's line and why, with the specialization fix.  A body whose effects
torch's scan refuses is not rolled either, and its export still matches eager.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import shapeproof
from shapeproof.export.errors import ExportError
from shapeproof.export.settings import ExportSettings
from shapeproof.export.search.traces import trace

torch.manual_seed(0)
LENGTHS = (1, 2, 24, 100, 512)


def _scans(program) -> int:
    return sum(1 for n in program.graph.nodes if n.op == "call_function" and "scan" in str(n.target))


def _matches_eager(model, program, inputs, atol=1e-5) -> None:
    module = program.module()
    for x in inputs:
        with torch.no_grad():
            expected, got = model(x), module(x)
        for e, g in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got)):
            assert e.shape == g.shape and torch.allclose(e, g, atol=atol), f"mismatch at {tuple(x.shape)}"


def _rolled(model, args, spec):
    """The first trace of an export and the loops it rolled."""
    first = trace(model, args, None, spec, ExportSettings(timeout=2.0))
    return first, first.torch_env.loop_rolling


# ---------------------------------------------------------------------------- idiom 1: the scan of the issue

def _bench():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # bench/ is a folder of scripts
    from bench import loop_models, rolled_loops

    return loop_models, rolled_loops


Scan = _bench()[0].Scan          # the issue's example, as the bench exports it


def test_the_scan_idiom_is_one_scan_over_every_length_from_one_trace():
    model = Scan().eval()
    spec = ({0: Dim("B", min=1, max=8), 1: Dim("S", min=1, max=512)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 24, 8),), dynamic_shapes=spec)
    assert result.regions is None                         # the first trace serves the whole range
    program = result.program
    assert _scans(program) == 1
    assert sum(1 for n in program.graph.nodes if "linear" in str(n.target)) == 0   # the body is not unrolled
    inputs = [torch.randn(b, s, 8) for b, s in ((1, 1), (2, 2), (3, 24), (8, 100), (1, 512))]
    _matches_eager(model, program, inputs)
    decomposed = program.run_decompositions()
    _matches_eager(model, decomposed, inputs[:3])


def test_a_trace_at_another_length_gives_the_same_program():
    model = Scan().eval()
    spec = ({1: Dim("S", min=1, max=512)},)
    codes = []
    for length in (7, 300):
        first, rolling = _rolled(model, (torch.randn(2, length, 8),), spec)
        assert len(rolling.rolled) == 1 and first.program is not None
        codes.append(first.fingerprint)
    assert codes[0] == codes[1]


def test_the_loops_rolled_say_where_and_what_they_carry():
    first, rolling = _rolled(Scan().eval(), (torch.randn(2, 24, 8),), ({1: Dim("S", min=1, max=512)},))
    (loop,) = rolling.rolled
    assert loop.key == (Scan.forward.__code__.co_filename, Scan.forward.__code__.co_firstlineno + 3)
    assert loop.carried == ("h",) and loop.outputs == 1
    assert not rolling.refusals and not first.report.guards


# ---------------------------------------------------------------------------- idiom 2: two carried tensors

class GRUStyle(nn.Module):
    """A gated cell written out, carrying a state and a running mean of it."""

    def __init__(self, d=8, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.gates = nn.Linear(d + hidden, 2 * hidden)
        self.candidate = nn.Linear(d + hidden, hidden)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.hidden)
        mean = torch.zeros_like(h)
        for t in range(x.size(1)):
            xt = x[:, t]
            z, r = torch.sigmoid(self.gates(torch.cat([xt, h], -1))).chunk(2, -1)
            n = torch.tanh(self.candidate(torch.cat([xt, r * h], -1)))
            h = (1 - z) * n + z * h
            mean = mean + h / x.size(1)
        return h, mean


class LSTMCellLoop(nn.Module):
    def __init__(self, d=8, hidden=16):
        super().__init__()
        self.cell = nn.LSTMCell(d, hidden)

    def forward(self, x):
        h = c = x.new_zeros(x.size(0), self.cell.hidden_size)
        outs = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c))
            outs.append(h)
        return torch.stack(outs, 1), c


@pytest.mark.parametrize("model", [GRUStyle().eval(), LSTMCellLoop().eval()], ids=lambda m: type(m).__name__)
def test_a_cell_carrying_two_tensors(model):
    spec = ({0: Dim("B", min=1, max=8), 1: Dim("S", min=1, max=256)},)
    result = shapeproof.export_with_report(model, (torch.randn(3, 20, 8),), dynamic_shapes=spec)
    assert result.regions is None and _scans(result.program) == 1
    sizes = ((1, 1), (8, 256), (2, 3), (5, 77))
    _matches_eager(model, result.program, [torch.randn(b, s, 8) for b, s in sizes])


# ---------------------------------------------------------------------------- idiom 3: read, write at t

class ReadWrite(nn.Module):
    """RWKV's and RecurrentGemma's CPU path: the state carried, each step written into a preallocated
    output at the index."""

    def __init__(self, d=8):
        super().__init__()
        self.decay = nn.Parameter(torch.rand(d))

    def forward(self, x):
        out = torch.zeros_like(x)
        state = torch.zeros_like(x[:, 0])
        for t in range(x.size(1)):
            state = torch.sigmoid(self.decay) * state + x[:, t]
            out[:, t] = state.tanh()
        return out


class ReadWriteLast(nn.Module):
    """The index in the last place, ``...`` before it, and a write into part of the output."""

    def forward(self, x):
        out = x.new_zeros(x.size(0), 2, x.size(-1))
        acc = x[..., 0] * 0
        for t in range(1, x.size(-1)):
            acc = acc + x[..., t]
            out[:, 1, t] = acc.sum(-1)
        return out


def test_reads_and_writes_at_the_index():
    model = ReadWrite().eval()
    spec = ({1: Dim("S", min=1, max=300)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 30, 8),), dynamic_shapes=spec)
    assert result.regions is None and _scans(result.program) == 1
    _matches_eager(model, result.program, [torch.randn(2, s, 8) for s in (1, 2, 30, 150, 300)])


def test_a_loop_from_one_over_a_length_of_at_least_two():
    model = ReadWriteLast().eval()
    spec = ({2: Dim("S", min=2, max=100)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 3, 10),), dynamic_shapes=spec)
    assert result.regions is None and _scans(result.program) == 1
    _matches_eager(model, result.program, [torch.randn(2, 3, s) for s in (2, 3, 10, 51, 100)])


# ---------------------------------------------------------------------------- idiom 4: a comprehension

class Comprehension(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return torch.stack([self.proj(x[:, i]).relu() for i in range(x.size(1))], dim=1) + 1


def test_a_comprehension_stacked():
    model = Comprehension().eval()
    spec = ({1: Dim("S", min=1, max=128)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 9, 8),), dynamic_shapes=spec)
    assert result.regions is None and _scans(result.program) == 1
    _matches_eager(model, result.program, [torch.randn(2, s, 8) for s in (1, 2, 9, 60, 128)])


class RangesMadeTensors(nn.Module):
    def forward(self, x):
        n = x.size(1)
        positions = torch.tensor(list(range(n)))
        odd = torch.as_tensor([2 * i + 1 for i in range(n)], dtype=torch.float32)
        shifted = torch.tensor(range(1, n + 1), device=x.device)
        return x + positions[None, :, None] + odd[None, :, None] * shifted[None, :, None]


def test_a_range_made_a_tensor_is_an_arange():
    model = RangesMadeTensors()
    spec = ({1: Dim("S", min=1, max=512)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 24, 3),), dynamic_shapes=spec)
    assert result.regions is None
    assert sum(1 for n in result.program.graph.nodes if "arange" in str(n.target)) == 3
    for s in (1, 2, 24, 100, 512):
        x = torch.randn(2, s, 3)
        assert torch.equal(result.program.module()(x), model(x))


def test_a_range_made_a_tensor_that_may_be_empty_is_left_to_python():
    """``torch.tensor([])`` is float32, an ``arange`` of nothing int64: not the same tensor."""
    model = RangesMadeTensors()
    first, rolling = _rolled(model, (torch.randn(2, 24, 3),), ({1: Dim("S", min=0, max=64)},))
    assert not rolling.rolled
    assert all("it may have no element for sizes in the declared ranges: S = 0" in reason
               for reason in rolling.refusals.values())


# ---------------------------------------------------------------------------- loops that are not uniform

class BranchesOnTheIndex(nn.Module):
    def forward(self, x):
        h = x[:, 0] * 0
        for t in range(x.size(1)):
            if t % 2 == 0:
                h = h + x[:, t]
        return h


class Grows(nn.Module):
    def forward(self, x):
        h = x[:, 0]
        for t in range(x.size(1)):
            h = torch.cat([h, x[:, t].tanh()], -1)
        return h


@pytest.mark.parametrize("model, why", [
    (BranchesOnTheIndex(), "the index `t` is used other than as a whole index"),
    (Grows(), "`h` does not keep its shape from one iteration to the next"),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "")
def test_a_loop_that_is_not_uniform_stays_an_error_naming_its_line_and_why(model, why):
    spec = ({1: Dim("S", min=1, max=64)},)
    with pytest.raises(ExportError) as caught:
        shapeproof.export(model, (torch.randn(2, 24, 4),), dynamic_shapes=spec)
    text = str(caught.value)
    line = type(model).forward.__code__.co_firstlineno + 2
    assert f"note: the loop at {__file__}:{line} (`for t in range(" in text
    assert why in text
    assert "S only works as 24" in text                  # the specialization fix, as without rolling


# ---------------------------------------------------------------------------- loops that may run no iteration

class FromOne(nn.Module):
    def forward(self, x):
        h = x[:, 0]
        out = torch.zeros_like(x)
        for t in range(1, x.size(1)):
            h = h * 0.5 + x[:, t]
            out[:, t] = h
        return h, out


def test_a_loop_that_runs_no_iteration_inside_the_traced_ranges_steps_once_and_drops_it():
    """At S = 2 the loop from 2 runs no iteration, and S = 2 is inside the traced range: torch's scan
    runs one step on a slice of zeros there, whose results are dropped."""
    class FromTwo(nn.Module):
        def forward(self, x):
            h = x[:, 0] + x[:, 1]
            for t in range(2, x.size(1)):
                h = h * 0.5 + x[:, t]
            return h

    model = FromTwo()
    spec = ({1: Dim("S", min=2, max=64)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 24, 4),), dynamic_shapes=spec)
    assert result.regions is None and _scans(result.program) == 1 and not result.warnings
    _matches_eager(model, result.program, [torch.randn(2, s, 4) for s in (2, 3, 24, 64)])


def test_a_loop_that_runs_no_iteration_only_at_a_size_traced_as_two_is_rolled_with_a_warning():
    """Dim(min=1): torch.export traces S = 1 as 2, where the trip count S - 1 is 1; at S = 1 the scan of
    the program cannot run zero times, and the export says so."""
    model = FromOne()
    spec = ({1: Dim("S", min=1, max=64)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 24, 4),), dynamic_shapes=spec)
    assert _scans(result.program) == 1
    (warning,) = result.warnings
    assert "(`for t in range(1, x.size(1)):`) is one scan, which runs at least once: at S = 1" in warning
    _matches_eager(model, result.program, [torch.randn(2, s, 4) for s in (2, 3, 24, 64)])
    with pytest.raises(IndexError, match="out of range"):          # torch's scan, run by ep.module()
        result.program.module()(torch.randn(2, 1, 4))


# ---------------------------------------------------------------------------- soundness

class BranchOnASizeInTheBody(nn.Module):
    def forward(self, x):
        h = x[:, 0] * 0
        for t in range(x.size(1)):
            h = h + x[:, t]
            if x.size(0) > 2:
                h = h * 0.5
        return h


def test_a_guard_the_body_asks_is_a_guard_of_the_export():
    """dynamo traces the body in a ShapeEnv of its own and checks its guards on the trace's sizes: the
    guard comes back to the engine (here a split of the batch range), never dropped."""
    model = BranchOnASizeInTheBody()
    spec = ({0: Dim("B", min=1, max=8), 1: Dim("S", min=1, max=64)},)
    with pytest.raises(ExportError, match="the program needs B >= 3"):
        shapeproof.export(model, (torch.randn(4, 10, 4),), dynamic_shapes=spec)
    program = shapeproof.export(model, (torch.randn(4, 10, 4),), dynamic_shapes=spec, split=True)
    _matches_eager(model, program, [torch.randn(b, s, 4) for b, s in ((1, 1), (2, 64), (3, 5), (8, 2))])


class InPlaceOnTheCarried(nn.Module):
    def forward(self, x):
        h0 = x[:, 0] * 0
        h = h0
        for t in range(x.size(1)):
            h += x[:, t]
        return h, h0


class AppendsToAnAttribute(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = []

    def remember(self, h):
        self.seen.append(h)
        return h

    def forward(self, x):
        h = x[:, 0] * 0
        for t in range(x.size(1)):
            h = self.remember(h + x[:, t])
        return h


@pytest.mark.parametrize("model, why", [
    (InPlaceOnTheCarried(), "Higher order ops do not support input mutation"),
    (AppendsToAnAttribute(), "Mutating a variable from outside the scope of this HOP is not supported"),
], ids=lambda v: type(v).__name__ if isinstance(v, nn.Module) else "")
def test_a_body_with_effects_is_not_rolled(model, why):
    first, rolling = _rolled(model, (torch.randn(2, 6, 4),), ({1: Dim("S", min=1, max=64)},))
    assert not rolling.rolled and first.program is not None
    assert any(why in reason for reason in rolling.refusals.values())
    _matches_eager(model, first.program, [torch.randn(2, 6, 4)])      # unrolled at its example, as today


class OwnStack(nn.Module):
    """A method named ``stack`` is not torch's: it would get the rolled list's one marker (len 1)."""

    def stack(self, values, dim):
        return torch.stack(values, dim) / len(values)

    def forward(self, x):
        h = x[:, 0] * 0
        outs = []
        for t in range(x.size(1)):
            h = h * 0.5 + x[:, t]
            outs.append(h)
        return self.stack(outs, 1)


def test_a_list_read_by_a_function_that_is_not_torchs_stack_is_not_rolled():
    first, rolling = _rolled(OwnStack(), (torch.randn(2, 6, 4),), ({1: Dim("S", min=1, max=64)},))
    assert not rolling.rolled
    assert "`self.stack` is not torch's cat/concat/concatenate/stack" in next(iter(rolling.refusals.values()))
    _matches_eager(OwnStack(), first.program, [torch.randn(2, 6, 4)])


def test_the_body_may_call_code_that_loops_over_a_fixed_range():
    """dynamo traces the body with Python's own ``range`` (the tracer's reads the caller's frame)."""
    class Layers(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

        def forward(self, h):
            for i in range(len(self.layers)):
                h = torch.tanh(self.layers[i](h))
            return h

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = Layers()

        def forward(self, x):
            h = x[:, 0] * 0
            for t in range(x.size(1)):
                h = self.layers(h + x[:, t])
            return h

    model = Outer().eval()
    spec = ({1: Dim("S", min=1, max=64)},)
    result = shapeproof.export_with_report(model, (torch.randn(2, 6, 4),), dynamic_shapes=spec)
    assert _scans(result.program) == 1
    _matches_eager(model, result.program, [torch.randn(2, s, 4) for s in (2, 6, 64)])


# ---------------------------------------------------------------------------- real models and the bench


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mamba", "rwkv"])
def test_a_library_model_whose_reference_code_loops_over_the_sequence(name):
    """transformers' Mamba (selective scan) and RWKV (WKV) on their CPU paths: one scan per layer over
    S in [1, 512], matching eager at both ends and three lengths between."""
    pytest.importorskip("transformers")
    loop_models, _ = _bench()
    m = next(m for m in loop_models.all_models() if m.name == name)
    model = m.build()
    result = shapeproof.export_with_report(model, m.inputs(24), dynamic_shapes=m.spec(1, 512))
    assert result.regions is None and _scans(result.program) == 2        # two layers
    file, line = loop_models.loop_line(m)
    assert result.engine is not None and (file, line) in {
        loop.key for loop in _rolled(model, m.inputs(24), m.spec(1, 512))[1].rolled}
    module = result.program.module()
    for s in (1, 2, 24, 100, 512):
        inputs = m.inputs(s)
        with torch.no_grad():
            assert torch.allclose(module(*inputs), model(*inputs), atol=1e-5), s


def test_the_bench_row_of_the_issue_idiom():
    loop_models, rolled_loops = _bench()
    m = next(m for m in loop_models.all_models() if m.name == "scan")
    row = rolled_loops.run_model(m, longest=40)
    assert (row.rolled_traces, row.scans, row.matched) == (1, 1, "5/5")
    assert row.torch_dynamic == "UserError: S specialized to 24"
    assert row.static_nodes is not None and row.static_nodes > 5 * row.rolled_nodes      # 40 bodies against 1
    assert rolled_loops.markdown([row], 40)[2].startswith("| scan (")
