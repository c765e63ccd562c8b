"""Sizes that pass through tensors stay symbolic (issue 16): exported programs against eager PyTorch.

Every model here computes an integer from a size with tensor arithmetic;
torch.export 2.13 turns it into a fresh unbacked symbol.  shapeproof binds
that symbol to the size expression, keeps ``Eq(u, expr)`` as a runtime
assert, and the program must match eager at the ends of the declared ranges
and in between, with and without padding, or raise, never answer wrongly.
"""
import operator

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch._higher_order_ops import while_loop  # noqa: E402
from torch.export import Dim  # noqa: E402

import shapeproof  # noqa: E402
from shapeproof.export import ExportError  # noqa: E402
from shapeproof.shapes import DataDependentError  # noqa: E402
from shapeproof.tracer.sizes.size_values import Algebra  # noqa: E402


def _pad1d(x, paddings, mode="reflect"):
    """transformers' EncodecConv1d._pad1d: extra zeros first when the input is shorter than the reflection."""
    length = x.shape[-1]
    left, right = paddings
    max_pad = max(left, right)
    extra_pad = 0
    if length <= max_pad:
        extra_pad = max_pad - length + 1
        x = F.pad(x, (0, extra_pad))
    padded = F.pad(x, paddings, mode)
    end = padded.shape[-1] - extra_pad
    return padded[..., :end]


class CodecConv(nn.Module):
    """transformers' EncodecConv1d (non-causal): constants in int64 buffers, padding computed in float32."""

    def __init__(self, kernel=8, stride=4, mode="reflect"):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.mode = nn.Conv1d(2, 3, kernel, stride), mode
        self.stride = nn.Buffer(torch.tensor(stride, dtype=torch.int64), persistent=False)
        self.kernel_size = nn.Buffer(torch.tensor(kernel, dtype=torch.int64), persistent=False)
        self.padding_total = nn.Buffer(torch.tensor(kernel - stride, dtype=torch.int64), persistent=False)

    def forward(self, x):
        length = x.shape[-1]
        n_frames = (length - self.kernel_size + self.padding_total) / self.stride + 1
        n_frames = torch.ceil(n_frames).to(torch.int64) - 1
        extra = n_frames * self.stride + self.kernel_size - self.padding_total - length
        right = self.padding_total // 2
        left = self.padding_total - right
        return self.conv(_pad1d(x, (left, right + extra), self.mode))


def _matches(program, model, *args):
    with torch.no_grad():
        want, got = model(*args), program.module()(*args)
    return got.shape == want.shape and torch.allclose(got, want, atol=1e-6)


def _output_symbols(program) -> set[str]:
    """The symbols in the shapes of the program's outputs (``u*`` are torch's data-dependent ones)."""
    out = next(n for n in program.graph.nodes if n.op == "output")
    return {s.name for val in torch.utils._pytree.tree_leaves(out.args) if hasattr(val, "meta")
            for d in val.meta["val"].shape if isinstance(d, torch.SymInt) for s in d.node.expr.free_symbols}


def _labelled(program) -> list[str]:
    return [n.args[-1] for n in program.graph.nodes if n.target is torch.ops.aten._assert_scalar.default
            and n.args[-1].startswith("shapeproof:")]


LENGTHS = (16, 17, 18, 19, 20, 64, 333, 1999, 2000)     # L % 4 == 0 needs no padding: 16, 20, 64, 2000


def test_encodec_padding_exports_over_the_declared_lengths():
    model = CodecConv().eval()
    spec = ({0: Dim("B", min=1, max=4), 2: Dim("L", min=16, max=2000)},)
    program = shapeproof.export(model, (torch.randn(2, 2, 101),), dynamic_shapes=spec)
    for length in LENGTHS:
        assert _matches(program, model, torch.randn(3, 2, length)), length
    # one equivalence per integer taken from a tensor, each naming the line that computed it
    labelled = _labelled(program)
    assert labelled and all("test_size_tracking.py" in m for m in labelled)
    assert any("L" in m and "//" in m for m in labelled)


def test_a_changed_buffer_makes_the_program_raise_not_compute_another_padding():
    model = CodecConv().eval()
    spec = ({2: Dim("L", min=16, max=2000)},)
    module = shapeproof.export(model, (torch.randn(1, 2, 101),), dynamic_shapes=spec).module()
    module.stride = torch.tensor(3)     # the program reads it at run time; its padding no longer fits L
    with pytest.raises(RuntimeError, match="shapeproof: at .* differs from"):
        module(torch.randn(1, 2, 101))


class StepCounter(nn.Module):
    """Reads a buffer, then writes it (in place, or by assigning the attribute): each call reads another
    value."""

    def __init__(self, assign=False):
        super().__init__()
        self.assign = assign
        self.register_buffer("step", torch.tensor(0))

    def forward(self, x):
        n = self.step.item()
        if self.assign:
            self.step = self.step + 1
        else:
            self.step.add_(1)
        return x[: x.shape[0] - n] * n


@pytest.mark.parametrize("assign", [False, True])
def test_a_buffer_the_code_writes_is_not_followed(assign):
    spec = ({0: Dim("T", min=8, max=64)},)
    module = shapeproof.export(StepCounter(assign), (torch.randn(16),), dynamic_shapes=spec).module()
    eager, x = StepCounter(assign), torch.randn(16)
    for _ in range(3):       # a value bound at export (step == 0) would fail the second call
        assert torch.equal(module(x), eager(x))


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor(2))

    def forward(self, x):
        return x * self.scale.item()


def test_a_buffer_no_size_needs_is_not_followed():
    """torch's program reads the buffer at run time; so does shapeproof's, with no assert on its value."""
    program = shapeproof.export(Scale(), (torch.randn(6),), dynamic_shapes=({0: Dim("T")},)).module()
    eager = Scale()
    for model in (program, eager):
        model.load_state_dict({"scale": torch.tensor(5)})
    x = torch.randn(9)
    assert torch.equal(program(x), eager(x))


class LoopIndex(nn.Module):
    """A while_loop whose body reads its counter with .item(): traced once at the counter's first value."""

    def forward(self, x):
        def cond(i, out):
            return i < out.size(0)

        def body(i, out):
            k = i.item()
            torch._check(k >= 0)
            torch._check(k < x.size(0))
            out = out.clone()
            out[k] = x[k] * k
            return i + 1, out

        return while_loop(cond, body, [torch.tensor(0), torch.zeros_like(x)])[1]


def test_a_loop_body_is_not_followed():
    x = torch.randn(6, 4)
    program = shapeproof.export(LoopIndex(), (x,), dynamic_shapes=({0: Dim("N", min=2, max=32)},))
    for n in (2, 6, 11):
        y = torch.randn(n, 4)
        assert torch.equal(program.module()(y), LoopIndex()(y))


class Plus3(nn.Module):
    def forward(self, x):
        return x.new_zeros(torch.tensor(x.shape[0]) + 3)


def _off_by_one_raises(model, x, dim, lengths):
    module = shapeproof.export(model, (x,), dynamic_shapes=({dim: Dim("L", min=16, max=2000)},)).module()
    for length in lengths:
        shape = list(x.shape)
        shape[dim] = length
        with pytest.raises(RuntimeError, match="shapeproof: at .*differs from"):
            module(torch.randn(shape))


def test_a_wrong_padding_makes_the_program_raise(monkeypatch):
    rounded = Algebra.rounded

    def ceil_plus_one(self, a, mode):
        value = rounded(self, a, mode)
        return type(value)(value.num + 1, 1, value.err, True, value.bits) if mode == "ceil" else value

    monkeypatch.setattr(Algebra, "rounded", ceil_plus_one)
    _off_by_one_raises(CodecConv(mode="constant").eval(), torch.randn(1, 2, 101), 2, (16, 101, 2000))


def test_a_wrong_size_makes_the_program_raise_not_check_it_against_itself(monkeypatch):
    """Lowered naively, the assert of ``u == L + 3`` is ``item == item`` (the item node reads as L + 3)."""
    integer = Algebra.integer

    def plus_one(self, expr, lo, hi):
        value = integer(self, expr, lo, hi)
        return type(value)(value.expr + 1) if value.expr.free_symbols else value

    monkeypatch.setattr(Algebra, "integer", plus_one)
    _off_by_one_raises(Plus3(), torch.randn(101, 2), 0, (16, 101, 2000))


class Thirds(nn.Module):
    """Pads to a multiple of 3 with a float32 ceil, then folds the length into frames of 3."""

    def forward(self, x):
        n = torch.tensor(x.shape[-1])
        pad = (torch.ceil((n + 1) / 3) * 3 - n).to(torch.int64)
        return F.pad(x, (0, pad)).reshape(x.shape[0], -1, 3)


class ThirdsIfPadded(nn.Module):
    def forward(self, x):
        n = torch.tensor(x.shape[-1])
        pad = (torch.ceil((n + 1) / 3) * 3 - n).to(torch.int64)
        return F.pad(x, (0, pad)) if pad > 0 else x


HUGE = ({1: Dim("L", min=2, max=2 ** 26)},)     # (L + 1) / 3 rounds in float32 beyond 2**24


def test_a_float32_step_is_bound_where_it_is_exact_and_left_to_torch_where_it_is_not():
    exact = shapeproof.export(Thirds(), (torch.randn(2, 10),),
                              dynamic_shapes=({1: Dim("L", min=3, max=4096)},))   # L = 2: one frame, a branch
    assert _labelled(exact) and not any(name.startswith("u") for name in _output_symbols(exact))
    for length in (3, 4, 5, 6, 1000, 4095, 4096):
        assert _matches(exact, Thirds(), torch.randn(2, length)), length
    rounding = shapeproof.export(Thirds(), (torch.randn(2, 10),), dynamic_shapes=HUGE)
    assert not _labelled(rounding) and any(name.startswith("u") for name in _output_symbols(rounding))
    for length in (3, 1000):
        assert _matches(rounding, Thirds(), torch.randn(2, length)), length


def test_a_question_about_such_a_value_says_why_it_was_not_followed():
    with pytest.raises(DataDependentError, match="float32") as info:
        shapeproof.export(ThirdsIfPadded(), (torch.randn(2, 10),), dynamic_shapes=HUGE)
    assert "could not follow it exactly" in str(info.value)


class SizeTable(nn.Module):
    """torch.tensor of sizes, tolist(), a SymFloat operand, where() as a min, tensors as slice bounds."""

    def forward(self, x):
        n = x.shape[0]
        sizes = torch.tensor([n, n // 2])
        a, b = sizes.tolist()
        smaller = torch.where(sizes[0] < sizes[1], sizes[0], sizes[1])
        third = torch.floor(torch.tensor(n / 3)).to(torch.int64)
        return torch.cat([x[:a], x[:b], x[:smaller], x[:third]])


def test_sizes_through_tensor_constructors_tolist_where_and_symfloats():
    spec = ({0: Dim("N", min=3, max=500)},)
    program = shapeproof.export(SizeTable(), (torch.randn(10, 3),), dynamic_shapes=spec)
    assert _output_symbols(program) and not any(name.startswith("u") for name in _output_symbols(program))
    for n in (3, 4, 5, 10, 499, 500):
        assert _matches(program, SizeTable(), torch.randn(n, 3)), n


class AlphaAndBits(nn.Module):
    """add/sub with alpha, and & of integers (bitwise, not logical), on a size."""

    def forward(self, x):
        n = torch.tensor(x.shape[0])
        longer = torch.ops.aten.add.Scalar(n, 3, 2)             # n + 6 (alpha passed positionally)
        shorter = torch.sub(n, n // 2, alpha=1)                 # n - n // 2
        rounded_up = torch.bitwise_and(n, torch.tensor(1)) + n  # n + n % 2, not n + (n != 0)
        return x.new_zeros(longer), x[:shorter], x.new_ones(rounded_up)


def test_alpha_and_bitwise_ops_keep_their_meaning():
    spec = ({0: Dim("N", min=2, max=64)},)
    program = shapeproof.export(AlphaAndBits(), (torch.randn(5, 2),), dynamic_shapes=spec)
    assert len(_labelled(program)) >= 2
    for n in (2, 5, 64):
        x = torch.randn(n, 2)
        with torch.no_grad():
            assert [t.shape for t in program.module()(x)] == [t.shape for t in AlphaAndBits()(x)], n


class WrittenInPlace(nn.Module):
    def forward(self, x):
        n = torch.tensor(x.shape[0])
        before = x.new_zeros(n, 2)      # n is the size here
        n.add_(2)                       # and no longer from here: its value must not be followed
        return before, x.new_zeros(n, 2)


def test_a_tensor_written_in_place_is_followed_only_until_then():
    program = shapeproof.export(WrittenInPlace(), (torch.randn(5, 2),),
                                dynamic_shapes=({0: Dim("N", min=2, max=64)},))
    assert len(_labelled(program)) == 1
    for n in (2, 5, 64):
        x = torch.randn(n, 2)
        with torch.no_grad():
            assert [t.shape for t in program.module()(x)] == [t.shape for t in WrittenInPlace()(x)], n


class ClampedFlag(nn.Module):
    """clamp of a followed boolean tensor: the fake kernel accepts it, so torch.export traces it."""

    def forward(self, x):
        flag = torch.ones(1, dtype=torch.bool)
        return x * 2, torch.clamp(flag, min=False)


def test_a_clamp_of_booleans_is_not_followed_and_does_not_fail_the_export():
    spec = ({0: Dim("N", min=2, max=64)},)
    torch.export.export(ClampedFlag(), (torch.randn(4, 3),), dynamic_shapes=spec, strict=False)
    program = shapeproof.export(ClampedFlag(), (torch.randn(4, 3),), dynamic_shapes=spec)
    assert any(n.target is torch.ops.aten.clamp.default for n in program.graph.nodes)


class DataBranch(nn.Module):
    def forward(self, x, mask):
        if mask.any():
            return x * 2
        return x


class DataInt(nn.Module):
    def forward(self, x, n):
        return x[: int(n.item())]


class DataIndex(nn.Module):
    def forward(self, x, n):
        return x[: operator.index(n.item())]


def test_a_branch_on_data_says_where_and_offers_torch_cond():
    """(Without conds: by default the branch is one, ``test_branch_cond``.)"""
    with pytest.raises(DataDependentError) as info:
        shapeproof.export(DataBranch(), (torch.randn(6, 3), torch.ones(6, dtype=torch.bool)),
                          dynamic_shapes=({0: Dim("N", min=2, max=64)}, {0: Dim("N", min=2, max=64)}),
                          cond_branches=False)
    message = str(info.value)
    assert "if mask.any():" in message and "torch.cond(" in message and "torch._check(" in message


def test_a_python_conversion_of_data_says_to_drop_it():
    with pytest.raises(DataDependentError) as info:
        shapeproof.export(DataIndex(), (torch.randn(6, 3), torch.tensor(3)),
                          dynamic_shapes=({0: Dim("N", min=2, max=64)}, None))
    message = str(info.value)
    assert "x[: operator.index(n.item())]" in message and "drop the int(...)" in message
    assert "torch._check(" in message


def test_int_of_data_is_the_data_dependent_size():
    """``int`` of an unbacked size is the size in shapeproof's traces (``symbolic_casts``), as in eager: the
    slice keeps a data-dependent length, checked when the program runs (torch raises here)."""
    model = DataInt()
    program = shapeproof.export(model, (torch.randn(6, 3), torch.tensor(3)),
                                dynamic_shapes=({0: Dim("N", min=2, max=64)}, None))
    for rows, n in ((6, 3), (6, 0), (6, 9), (10, 4), (5, -1), (5, -7)):
        x = torch.randn(rows, 3)
        assert torch.equal(program.module()(x, torch.tensor(n)), model(x, torch.tensor(n)))


class Recurrent(nn.Module):
    def __init__(self, cell, batch_first, bidirectional, **kw):
        super().__init__()
        torch.manual_seed(0)
        self.batch_first = batch_first
        self.rnn = cell(4, 5, num_layers=2, batch_first=batch_first, bidirectional=bidirectional, **kw)

    def forward(self, x):                                   # x: (B, 4, T)
        x = x.permute(0, 2, 1) if self.batch_first else x.permute(2, 0, 1)
        return self.rnn(x)[0]


@pytest.mark.parametrize("cell, batch_first, bidirectional, kw", [
    (nn.LSTM, False, False, {}), (nn.LSTM, True, True, {"proj_size": 3}), (nn.GRU, True, False, {}),
    (nn.RNN, False, True, {}),
])
def test_recurrent_layers_keep_their_sequence_length(cell, batch_first, bidirectional, kw):
    model = Recurrent(cell, batch_first, bidirectional, **kw).eval()
    program = shapeproof.export(model, (torch.randn(2, 4, 9),),
                                dynamic_shapes=({0: Dim("B", min=1, max=8), 2: Dim("T", min=2, max=300)},))
    for b, t in ((1, 2), (2, 3), (8, 300), (3, 57)):
        assert _matches(program, model, torch.randn(b, 4, t)), (b, t)


class Chunked(nn.Module):
    """Encodec's `for offset in range(0, length, stride)` with stride == length: one chunk at every length."""

    def forward(self, x):
        length = x.shape[-1]
        return torch.stack([x[..., offset: offset + length] * 2 for offset in range(0, length, length)])


class Unrolled(nn.Module):
    def forward(self, x):
        return sum(x[i] for i in range(x.shape[0]))


def test_range_over_a_size_keeps_it_when_its_length_is_fixed():
    spec = ({1: Dim("L", min=2, max=99)},)
    program = shapeproof.export(Chunked(), (torch.randn(2, 10),), dynamic_shapes=spec)
    for length in (2, 10, 99):
        assert _matches(program, Chunked(), torch.randn(2, length)), length
    with pytest.raises(ExportError):         # a length that varies: Python unrolls, the size specializes
        shapeproof.export(Unrolled(), (torch.randn(4, 3),), dynamic_shapes=({0: Dim("N", min=2, max=9)},))


def test_mimi_encoder_exports_over_its_declared_lengths():
    """bench/models.py's mimi_encoder: eight paddings through tensors; torch.export 2.13 fails on it."""
    pytest.importorskip("transformers")
    from test_bench_models import CASES

    model, args, spec = CASES["mimi_encoder"].build()
    program = shapeproof.export(model, args, dynamic_shapes=spec)
    assert len(_labelled(program)) >= 8
    # 1920 samples per frame: 3840, 57600 and 96000 need no padding, the others do
    for b, length in ((1, 3840), (8, 96000), (2, 3841), (3, 5000), (1, 24001), (2, 57600),
                      (1, 95999)):
        assert _matches(program, model, torch.randn(b, 1, length)), (b, length)
