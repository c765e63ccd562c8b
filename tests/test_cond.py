"""``torch.cond`` with each side traced under its own condition (issue 49; tracer/control/cond.py).

torch traces both sides of a cond over the whole domain, so a side valid only under its condition fails
to trace (``x.reshape(B, -1, 32)`` where ``T % 4 == 0``).  Each case runs beside torch.export and is
compared with eager on both sides of every cond, at the ends of the ranges and between, with the
model's weights requiring grad (a program's conds run their taken side then: torch's autograd kernel traces
both sides at the inputs' sizes first, which a side valid only under its condition fails).
"""
import io

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError
from shapeproof.shapes import ShapeEnv, Source
from shapeproof.tracer.control.cond import indicator


def _stack(x):
    return x.reshape(x.shape[0], -1, 4 * x.shape[2])


class PadToFour(torch.nn.Module):
    """The issue's cond, with a linear layer on each side (its weights are the sides' free tensors)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 16)

    def forward(self, x):                       # x: (B, T, 8)
        def padded(x):
            return self.lin(_stack(F.pad(x, (0, 0, 0, 4 - x.shape[1] % 4))))

        def plain(x):
            return self.lin(_stack(x)) * 2

        return torch.cond(x.shape[1] % 4 != 0, padded, plain, (x,))


class ResizeToEight(torch.nn.Module):
    """A table resized only when the grid differs: both sides give 8 rows where they run."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(1, 3, 8, 8))

    def forward(self, x):
        resized = torch.cond(x.shape[2] != 8, lambda x: F.interpolate(x, size=(8, 8), mode="bilinear"),
                             lambda x: x.clone(), (x,))
        return resized + self.table


class ShrinkingWindow(torch.nn.Module):
    """A window of 4 rows, or the whole input where it is no longer than a window."""

    def forward(self, x):                       # x: (B, H, C), H = 4*K
        def whole(x):
            return x.mean(1, keepdim=True).expand(-1, x.shape[1], -1).contiguous()

        def windows(x):
            w = x.reshape(x.shape[0], -1, 4, x.shape[2]).mean(2, keepdim=True)
            return w.expand(-1, -1, 4, -1).reshape(x.shape).contiguous()

        return torch.cond(x.shape[1] <= 4, whole, windows, (x,))


class TwoInSequence(torch.nn.Module):
    def forward(self, x):
        x = torch.cond(x.shape[1] % 2 != 0, lambda x: F.pad(x, (0, 0, 0, 1)), lambda x: x.clone(), (x,))
        x = x.reshape(x.shape[0], -1, 2 * x.shape[2])
        x = torch.cond(x.shape[1] % 2 != 0, lambda x: F.pad(x, (0, 0, 0, 1)), lambda x: x * 1, (x,))
        return x.reshape(x.shape[0], -1, 2 * x.shape[2])


class Nested(torch.nn.Module):
    def forward(self, x):
        def ragged(x):
            padded = torch.cond(x.shape[1] % 4 == 1, lambda x: F.pad(x, (0, 0, 0, 3)),
                                lambda x: F.pad(x, (0, 0, 0, 4 - x.shape[1] % 4)), (x,))
            return _stack(padded)

        return torch.cond(x.shape[1] % 4 != 0, ragged, _stack, (x,))


class ClosesOver(torch.nn.Module):
    """Sides with no operands that read a tensor and a size of the enclosing trace (as dynamo lifts them)."""

    def forward(self, x):
        y = x * 2
        n = y.shape[1]
        return torch.cond(n % 2 == 0, lambda: y.reshape(y.shape[0], -1, 2).sum(-1),
                          lambda: y[:, :n // 2] * 1, ())


class OnData(torch.nn.Module):
    def forward(self, x, mask):
        return torch.cond(mask.any(), lambda x: x * 2, lambda x: x + 1, (x,))


def _matches_eager(model, program, inputs, grad: bool = True) -> list:
    """The inputs where eager runs and the program does not give eager's result."""
    wrong = []
    for args in inputs:
        with torch.set_grad_enabled(grad):
            try:
                expected = model(*args)
            except RuntimeError:
                continue                                  # eager fails too: anything the program does is fine
            try:
                got = program.module()(*args)
            except Exception as exc:  # noqa: BLE001  (a rejection is a mismatch here)
                wrong.append((tuple(a.shape for a in args), type(exc).__name__))
                continue
        if got.shape != expected.shape or not torch.allclose(got, expected, atol=1e-5):
            wrong.append(tuple(a.shape for a in args))
    return wrong


SEQUENCES = [(torch.randn(2, t, 8),) for t in [*range(2, 41), 1021, 1022, 1023, 1024]]

CASES = {
    "pad_to_four": (PadToFour, (torch.randn(2, 10, 8),), ({1: Dim("T", min=2, max=1024)},), SEQUENCES),
    "resize_to_eight": (ResizeToEight, (torch.randn(1, 3, 16, 16),),
                        ({2: Dim("H", min=4, max=64), 3: Dim("W", min=4, max=64)},),
                        [(torch.randn(1, 3, h, w),) for h in (4, 7, 8, 9, 33, 64) for w in (4, 8, 9, 64)]),
    "shrinking_window": (ShrinkingWindow, (torch.randn(2, 16, 3),), ({1: 4 * Dim("K", min=1, max=64)},),
                         [(torch.randn(2, h, 3),) for h in (4, 8, 12, 16, 252, 256)]),
    "two_in_sequence": (TwoInSequence, (torch.randn(2, 10, 3),), ({1: Dim("T", min=2, max=256)},),
                        [(torch.randn(2, t, 3),) for t in [*range(2, 30), 255, 256]]),
    "nested": (Nested, (torch.randn(2, 10, 3),), ({1: Dim("T", min=2, max=256)},),
               [(torch.randn(2, t, 3),) for t in [*range(2, 30), 255, 256]]),
    "closes_over": (ClosesOver, (torch.randn(2, 10),), ({1: Dim("T", min=2, max=256)},),
                    [(torch.randn(2, t),) for t in [*range(2, 20), 255, 256]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_side_is_traced_under_its_condition_and_the_program_matches_eager_on_both(name):
    build, args, spec, inputs = CASES[name]
    torch.manual_seed(0)
    model = build().eval()
    program = shapeproof.export(model, args, dynamic_shapes=spec)
    conds = [n for n in program.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert conds, "the program keeps the cond"
    assert _matches_eager(model, program, inputs) == []


@pytest.mark.parametrize("name", ["pad_to_four", "shrinking_window", "two_in_sequence", "nested"])
def test_torch_export_cannot_trace_a_side_valid_only_under_its_condition(name):
    build, args, spec, _ = CASES[name]
    with pytest.raises(Exception, match="fake tensor call"):
        torch.export.export(build(), args, dynamic_shapes=spec)


def test_outputs_of_sides_that_differ_get_one_backed_size_equal_to_each_side():
    """pad_to_four's sides give ``T // 4 + 1`` and ``T // 4`` rows: the output has one size, not torch's
    fresh unbacked one; resize_to_eight's give 8 on both sides (the false side's H proven 8 there)."""
    program = shapeproof.export(PadToFour(), (torch.randn(2, 10, 8),),
                                dynamic_shapes=({1: Dim("T", min=2, max=1024)},))
    (out,) = [n for n in program.graph.nodes if n.op == "output"][0].args[0]
    rows = out.meta["val"].shape[1]
    symbols = rows.node.expr.free_symbols
    assert isinstance(rows, torch.SymInt) and not any(str(s).startswith("u") for s in symbols)
    for t in (2, 3, 4, 5, 12, 1023):
        symbol = next(iter(symbols))
        assert int(rows.node.expr.xreplace({symbol: t})) == -(-t // 4)
    eight = shapeproof.export(ResizeToEight(), (torch.randn(1, 3, 16, 16),),
                              dynamic_shapes=({2: Dim("H", min=4, max=64), 3: Dim("W", min=4, max=64)},))
    conds = [n for n in eight.graph.nodes if n.target is torch.ops.higher_order.cond]
    assert conds[0].meta["val"].shape[2] == 8


def test_a_data_predicate_is_traced_as_torch_traces_it():
    spec = ({1: Dim("T", min=2, max=64)}, None)
    args = (torch.randn(2, 10), torch.zeros(3, dtype=torch.bool))
    program = shapeproof.export(OnData(), args, dynamic_shapes=spec)
    inputs = [(torch.randn(2, t), torch.tensor([False, v, False])) for t in (2, 7, 64) for v in (True, False)]
    assert _matches_eager(OnData(), program, inputs) == []


class NeedsEightUnderFour(torch.nn.Module):
    """Its plain side reshapes by 8 rows: valid only where T % 8 == 0, which T % 4 == 0 does not imply."""

    def forward(self, x):
        def eights(x):
            return x.reshape(x.shape[0], -1, 8 * x.shape[2])[:, :1].reshape(x.shape[0], 8, -1)

        return torch.cond(x.shape[1] % 4 != 0, lambda x: x[:, :4].clone(), eights, (x,))


def test_a_requirement_of_one_side_is_an_error_naming_its_condition():
    with pytest.raises(ExportError) as caught:
        shapeproof.export(NeedsEightUnderFour(), (torch.randn(2, 10, 3),),
                          dynamic_shapes=({1: Dim("T", min=4, max=64)},))
    assert "(T % 4) != 0 or" in str(caught.value)


def test_the_program_saves_loads_decomposes_and_runs_in_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    model = PadToFour().eval()
    spec = ({1: Dim("T", min=2, max=1024)},)
    program = shapeproof.export(model, (torch.randn(2, 10, 8),), dynamic_shapes=spec)
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    inputs = [(torch.randn(2, t, 8),) for t in (2, 3, 4, 5, 11, 12, 1024)]
    # a loaded program's conds are torch's own: its autograd kernel traces both sides at the inputs' sizes
    assert _matches_eager(model, torch.export.load(buffer), inputs, grad=False) == []
    assert _matches_eager(model, program.run_decompositions(), inputs) == []
    onnx_program = torch.onnx.export(program, dynamo=True, verbose=False)
    assert "If" in {node.op_type for node in onnx_program.model_proto.graph.node}
    session = ort.InferenceSession(onnx_program.model_proto.SerializeToString())
    name = session.get_inputs()[0].name
    for (x,) in inputs:
        with torch.no_grad():
            expected = model(x).numpy()
        assert torch.allclose(torch.from_numpy(session.run(None, {name: x.numpy()})[0]),
                              torch.from_numpy(expected), atol=1e-4)


def test_gradients_through_the_program_are_eagers_on_both_sides():
    torch.manual_seed(0)
    model = PadToFour()
    spec = ({1: Dim("T", min=2, max=1024)},)
    program = shapeproof.export(model, (torch.randn(2, 10, 8),), dynamic_shapes=spec)
    module = program.module()
    for t in (7, 8):
        x = torch.randn(2, t, 8)
        for m in (model, module):
            m.zero_grad()
        model(x).square().sum().backward()
        module(x).square().sum().backward()
        assert torch.allclose(module.lin.weight.grad, model.lin.weight.grad, atol=1e-5)
        assert torch.allclose(module.lin.bias.grad, model.lin.bias.grad, atol=1e-5)


# -- the engine under a side's condition ----------------------------------------------------------------

def _env():
    env = ShapeEnv()
    t = env.create_backed_symbol(10, Source("x.size(1)", "x", 1), declared=(2, 1024), dim_name="T")
    return env, t


def test_inside_a_side_questions_are_decided_under_its_condition():
    env, t = _env()
    assert env.statically_known(f"(16*{t}) % 64 == 0") is None
    with env.assuming(f"{t} % 4 == 0"):
        assert env.statically_known(f"(16*{t}) % 64 == 0") is True
    assert env.statically_known(f"(16*{t}) % 64 == 0") is None


def test_a_side_is_answered_at_a_witness_near_the_example_and_guards_as_an_implication():
    env, t = _env()                              # the example, 10, takes the other side
    with env.assuming(f"{t} % 4 == 0"):
        assert env.value_here(t) == 12                     # the nearest size that takes the side (up first)
        assert env.evaluate(f"{t} // 4 == 3") is True          # at 12, recorded as the implication
    (guard,) = env.guards
    assert guard.condition == env.knowledge.condition(
        shapeproof.solver.parse_condition(f"({t} % 4 != 0) or ({t} // 4 == 3)"))
    assert not env.knowledge.replacements                      # nothing learned for the inputs at large


def test_a_side_no_input_takes_is_known_as_such():
    env, t = _env()
    with env.assuming(f"{t} > 2000"):
        assert not env.side_runs
    with env.assuming(f"{t} > 1000"):
        assert env.side_runs


def test_the_indicator_of_a_condition_is_one_where_it_holds_and_zero_where_not():
    s = sympy.Symbol("s", integer=True)
    conditions = [sympy.Ne(s % 4, 0), sympy.Eq(s, 8), sympy.Le(s, 4), sympy.Gt(s, 3),
                  sympy.And(sympy.Ge(s, 2), sympy.Lt(s, 9)),
                  sympy.Or(sympy.Eq(s, 1), sympy.Not(sympy.Le(s, 5)))]
    for condition in conditions:
        holds = indicator(condition)
        for value in range(-3, 20):
            assert int(holds.xreplace({s: value})) == int(bool(condition.xreplace({s: value}))), condition
