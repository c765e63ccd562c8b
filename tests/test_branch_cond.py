"""Python ``if``s whose sides differ, run as one ``torch.cond`` (issue 49; tracer/control/branch_cond.py).

Each model branches on sizes or on data in plain Python; branch merging cannot take either side for every
input, so the ``if`` becomes a cond whose sides are traced under their conditions.  Each case is compared
with eager at sizes (and data) that take each side, at the ends of the ranges, with the weights requiring
grad as a module's do.
"""
import logging

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError
from test_cond import _matches_eager      # eager's answer wherever eager runs, with grad

_LOG = logging.getLogger(__name__)


class PadOrNot(torch.nn.Module):
    """The issue's frame stacking written as an if/else, with a layer on each side."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(32, 16)

    def forward(self, x):                                      # x: (B, T, 8)
        if x.shape[1] % 4 != 0:
            y = self.lin(F.pad(x, (0, 0, 0, 4 - x.shape[1] % 4)).reshape(x.shape[0], -1, 32))
        else:
            y = self.lin(x.reshape(x.shape[0], -1, 32)) * 2
        return y + 1


class ResizeWhereDifferent(torch.nn.Module):
    """A position table resized (bicubic, so no merge) only when the grid differs from its own."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(1, 3, 8, 8))

    def forward(self, x):
        table = self.table
        if x.shape[2] != 8:
            table = F.interpolate(table, size=(x.shape[2], x.shape[3]), mode="bicubic", align_corners=False)
        return x + table


class ProjectOddLengths(torch.nn.Module):
    """An ``if`` without ``else`` that rebinds a name bound before it (the false side passes it through)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, x):                                      # x: (B, T, 6)
        y = x * 2
        if x.shape[1] % 2 != 0:
            y = self.proj(torch.cat([y, y[:, -1:]], dim=1))
        return y.reshape(y.shape[0], -1, 12)


class TwoAndNested(torch.nn.Module):
    def forward(self, x):                                      # x: (B, T, 3)
        if x.shape[1] % 2 != 0:
            x = F.pad(x, (0, 0, 0, 1)) * 3
        else:
            if x.shape[1] % 4 == 0:
                x = x * 5
            else:
                x = x.flip(1)
        x = x.reshape(x.shape[0], -1, 6)
        if x.shape[1] > 8:
            z = x[:, :8].sum(1)
        else:
            z = x.mean(1)
        return z


class AnyMarked(torch.nn.Module):
    def forward(self, x, mask):
        if mask.any():
            y = x[:, :4] * 2
        else:
            y = x[:, :4] + 1
        return y


class NoDurations(torch.nn.Module):
    """A length regulator's test on the sum of its durations."""

    def forward(self, x, durations):
        if durations.sum() == 0:
            y = x * 0
        else:
            y = x.repeat_interleave(2, dim=1)[:, :x.shape[1]]
        return y + 1


class JoinedTests(torch.nn.Module):
    """Tests joined by ``and``/``or``/``not``, one over two lines, with a constant part folded away."""

    def __init__(self):
        super().__init__()
        self.grid = 8

    def forward(self, x):                                      # x: (B, H, W)
        h, w = x.shape[1], x.shape[2]
        if not torch.jit.is_tracing() and h == self.grid and w == self.grid:
            y = x * 2
        else:
            y = F.interpolate(x[:, None], size=(self.grid, self.grid), mode="bicubic")[:, 0]
        if (h % 2 != 0
                or w % 2 != 0):
            z = y.flip(1)
        else:
            z = y + 1
        if not (h > 12):
            z = z * 3
        return z


class LogsWhenPadding(torch.nn.Module):
    """A side that logs what it does (transformers' block-sparse encoders warn when they pad)."""

    def forward(self, x):                                      # x: (B, T, 4)
        padding = (4 - x.shape[1] % 4) % 4
        if padding > 0:
            _LOG.warning("padded from %s by %s", x.shape[1], padding)
            x = torch.cat([x, x.new_zeros(x.shape[0], padding, x.shape[2])], dim=1) * 2
        return x.reshape(x.shape[0], -1, 16)


class BlockPadded(torch.nn.Module):
    """Pads to a block multiple in a helper that logs, embeds pad ids and pads the mask, then unpads with a
    slice ending at ``-padding_len`` (empty, not whole, at ``padding_len == 0``): issue 52's form 2."""

    def __init__(self, block=4):
        super().__init__()
        self.block, self.embed, self.proj = block, torch.nn.Embedding(10, 6), torch.nn.Linear(6, 6)

    def _pad(self, hidden, mask):
        padding_len = (self.block - hidden.shape[1] % self.block) % self.block
        if padding_len > 0:
            _LOG.warning("padded from %s by %s", hidden.shape[1], padding_len)
            pad_ids = torch.zeros(hidden.shape[0], padding_len, dtype=torch.long)
            hidden = torch.cat([hidden, self.embed(pad_ids)], dim=-2)
            mask = F.pad(mask, (0, padding_len), value=0)
        return padding_len, hidden, mask

    def forward(self, hidden, mask):                           # hidden: (B, T, 6), mask: (B, T)
        padding_len, hidden, mask = self._pad(hidden, mask)
        b, t, d = hidden.shape
        out = self.proj(hidden.view(b, t // self.block, self.block, d)).view(b, t, d) * mask[..., None]
        if padding_len > 0:
            out = out[:, :-padding_len]
        return out


class NotMarked(torch.nn.Module):
    def forward(self, x, mask):
        if not mask.any():
            y = x * 2
        else:
            y = x - 1
        return y


def _conds_used(program) -> bool:
    """Whether the program has conds and each one's result is read (Python ran neither side itself)."""
    conds = [n for n in program.graph.nodes if n.target is torch.ops.higher_order.cond]
    return bool(conds) and all(any(item.users for item in cond.users) for cond in conds)


CASES = {
    "pad_or_not": (PadOrNot, (torch.randn(2, 10, 8),), ({1: Dim("T", min=2, max=512)},),
                   [(torch.randn(2, t, 8),) for t in [*range(2, 30), 509, 510, 511, 512]], True),
    "resize_where_different": (ResizeWhereDifferent, (torch.randn(1, 3, 16, 16),),
                               ({2: Dim("H", min=4, max=64), 3: Dim("W", min=4, max=64)},),
                               [(torch.randn(1, 3, h, w),) for h in (4, 7, 8, 9, 64) for w in (4, 8, 13, 64)],
                               False),
    "project_odd_lengths": (ProjectOddLengths, (torch.randn(2, 10, 6),), ({1: Dim("T", min=1, max=256)},),
                            [(torch.randn(2, t, 6),) for t in [*range(1, 20), 255, 256]], True),
    "two_and_nested": (TwoAndNested, (torch.randn(2, 10, 3),), ({1: Dim("T", min=2, max=256)},),
                       [(torch.randn(2, t, 3),) for t in [*range(2, 40), 255, 256]], True),
    "any_marked": (AnyMarked, (torch.randn(2, 10), torch.zeros(3, dtype=torch.bool)),
                   ({1: Dim("T", min=4, max=64)}, None),
                   [(torch.randn(2, t), torch.tensor([False, v, False]))
                    for t in (4, 9, 64) for v in (True, False)], True),
    "no_durations": (NoDurations, (torch.randn(2, 10), torch.ones(3)), ({1: Dim("T", min=1, max=64)}, None),
                     [(torch.randn(2, t), torch.full((3,), v)) for t in (1, 9, 64) for v in (0.0, 1.0)],
                     True),
    "joined_tests": (JoinedTests, (torch.randn(2, 10, 8),),
                     ({1: Dim("H", min=2, max=32), 2: Dim("W", min=2, max=32)},),
                     [(torch.randn(2, h, w),) for h in (2, 7, 8, 13, 32) for w in (2, 8, 9, 32)], True),
    "logs_when_padding": (LogsWhenPadding, (torch.randn(2, 10, 4),), ({1: Dim("T", min=1, max=64)},),
                          [(torch.randn(2, t, 4),) for t in (1, 4, 7, 8, 63, 64)], True),
    "block_padded": (BlockPadded, (torch.randn(2, 10, 6), torch.ones(2, 10)),
                     ({1: Dim("T", min=2, max=64)}, {1: Dim("T", min=2, max=64)}),
                     [(torch.randn(2, t, 6), torch.ones(2, t)) for t in (2, 4, 7, 8, 10, 63, 64)], True),
    "not_marked": (NotMarked, (torch.randn(2, 10), torch.zeros(3, dtype=torch.bool)),
                   ({1: Dim("T", min=1, max=64)}, None),
                   [(torch.randn(2, t), torch.tensor([False, v, False]))
                    for t in (1, 9, 64) for v in (True, False)],
                   True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_if_whose_sides_differ_is_one_program_matching_eager_on_both_sides(name):
    build, args, spec, inputs, one_trace = CASES[name]
    torch.manual_seed(0)
    model = build().eval()
    result = shapeproof.export_with_report(model, args, dynamic_shapes=spec)
    assert _conds_used(result.program), "the if is a cond in the program"
    assert not one_trace or result.regions is None, "one trace, no region search"
    assert _matches_eager(model, result.program, inputs) == []


@pytest.mark.parametrize("name", ["pad_or_not", "any_marked", "no_durations"])
def test_torch_export_fails_where_the_if_becomes_a_cond(name):
    build, args, spec, *_ = CASES[name]
    with pytest.raises(Exception):
        torch.export.export(build(), args, dynamic_shapes=spec)


class ReturnsEarlyOnOneSide(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] % 2 != 0:
            return F.pad(x, (0, 1)).reshape(x.shape[0], -1, 2) * 3
        return x.reshape(x.shape[0], -1, 2)


class PositionTable(torch.nn.Module):
    """The vision transformers' form: return the table where the grid is its own, else resize it (bicubic),
    in a method that reads the table twice and calls ``super()``."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(1, 1 + 16, 4))

    def resized(self, h, w):
        if not torch.jit.is_tracing() and h * w == 16 and h == w:
            return self.table
        first, grid = self.table[:, :1], self.table[:, 1:].reshape(1, 4, 4, 4).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)
        return torch.cat([first, grid.permute(0, 2, 3, 1).reshape(1, h * w, 4)], dim=1)

    def forward(self, x):                                      # x: (B, 4, H, W)
        h, w = x.shape[2], x.shape[3]
        tokens = torch.cat([x.new_zeros(x.shape[0], 1, 4), x.flatten(2).transpose(1, 2)], dim=1)
        return tokens + self.resized(h, w)


class Patched(PositionTable):
    def resized(self, h, w):
        if h == w:
            return super().resized(h, w) * 2
        table = super().resized(h, w)
        return table + 1


class ReturnsInALoop(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] % 2 != 0:
            return x[:, :1] * 3
        for _ in range(2):
            if x.shape[0] > 100:
                return x
        return x.reshape(x.shape[0], -1, 2)


EARLY = {
    "return": (ReturnsEarlyOnOneSide, (torch.randn(2, 10),), ({1: Dim("T", min=2, max=64)},),
               [(torch.randn(2, t),) for t in (2, 3, 9, 10, 63, 64)]),
    "position_table": (PositionTable, (torch.randn(2, 4, 6, 5),),
                       ({2: Dim("H", min=2, max=24), 3: Dim("W", min=2, max=24)},),
                       [(torch.randn(2, 4, h, w),) for h in (2, 4, 5, 24) for w in (2, 4, 7, 24)]),
    "super": (Patched, (torch.randn(2, 4, 6, 5),),
              ({2: Dim("H", min=2, max=24), 3: Dim("W", min=2, max=24)},),
              [(torch.randn(2, 4, h, w),) for h in (2, 4, 5, 24) for w in (2, 4, 7, 24)]),
}


@pytest.mark.parametrize("name", sorted(EARLY))
def test_an_if_that_returns_early_is_one_cond_with_the_rest_of_the_function(name):
    """``if test: return a`` and the rest of the function are the cond's two sides; the function's own code
    is back once the export ends."""
    build, args, spec, inputs = EARLY[name]
    torch.manual_seed(0)
    model = build().eval()
    codes = {k: v.__code__ for k, v in vars(type(model)).items() if callable(v) and hasattr(v, "__code__")}
    program = shapeproof.export(model, args, dynamic_shapes=spec)
    assert _conds_used(program)
    assert _matches_eager(model, program, inputs) == []
    assert {k: v.__code__ for k, v in vars(type(model)).items() if k in codes} == codes


class WritesState(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] % 2 != 0:
            self.seen = x.shape[1]
            x = F.pad(x, (0, 1))
        return x.reshape(x.shape[0], -1, 2)


@pytest.mark.parametrize("model", [ReturnsInALoop(), WritesState()], ids=["return in a loop", "state"])
def test_an_if_whose_side_is_not_straight_line_code_stays_a_guard(model):
    """A side that returns from inside a loop, or writes module state, keeps today's behaviour: a guard
    (and here an error naming it, with a region search)."""
    with pytest.raises(ExportError) as caught:
        shapeproof.export(model, (torch.randn(2, 10),), dynamic_shapes=({1: Dim("T", min=2, max=64)},))
    assert "T % 2" in str(caught.value)
    why = ("`self.seen = x.shape[1]` stores into an attribute (module state)"
           if isinstance(model, WritesState) else "a return inside a side")
    assert "which could not run as a torch.cond (line" in str(caught.value) and why in str(caught.value)


class ShrinksItsWindow(torch.nn.Module):
    """transformers' Swin (``set_shift_and_window_size``): an input no larger than the window shrinks the
    window and turns the shift off by stores into ``self``, which the next forward reads."""

    def __init__(self):
        super().__init__()
        self.window_size, self.shift_size = 4, 2

    def forward(self, x):                                       # x: (B, H, W), W static
        if x.shape[1] <= self.window_size:
            self.shift_size = 0
            self.window_size = x.shape[1]
        x = torch.roll(x, (-self.shift_size, -self.shift_size), (1, 2))
        pad = (self.window_size - x.shape[2] % self.window_size) % self.window_size
        return F.pad(x, (0, pad)).reshape(x.shape[0], -1, self.window_size)


def test_a_store_into_self_that_only_caches_a_size_is_still_a_write():
    """The decision for Swin's cached window: a write (eager keeps the small window for every later call),
    so the ``if`` stays a guard, and the error says why it is no cond."""
    with pytest.raises(ExportError) as caught:
        shapeproof.export(ShrinksItsWindow(), (torch.randn(2, 12, 10),),
                          dynamic_shapes=({1: Dim("H", min=2, max=32)},))
    message = str(caught.value)
    assert "which could not run as a torch.cond" in message
    assert "`self.shift_size = 0` stores into an attribute (module state)" in message


class FillsEmptyDurations(torch.nn.Module):
    """FastSpeech 2's length regulator: durations that are all 0 are set to 1 in place."""

    def forward(self, x, durations):                            # x: (B, T), durations: (B, T)
        if durations.sum() == 0:
            durations[durations.sum(dim=1).eq(0)] = 1
        return x * durations


def test_a_branch_on_data_left_to_torch_says_why_it_is_no_cond():
    spec = ({1: Dim("T", min=2, max=64)}, {1: Dim("T", min=2, max=64)})
    with pytest.raises(Exception) as caught:
        shapeproof.export(FillsEmptyDurations(), (torch.randn(2, 5), torch.ones(2, 5, dtype=torch.long)),
                          dynamic_shapes=spec)
    message = str(caught.value)
    assert "depends on data" in message
    assert "the if there could not run as a torch.cond: line" in message
    assert "`durations[durations.sum(dim=1).eq(0)] = 1` writes into an item in place" in message


def test_a_vision_transformer_resizing_its_position_table_exports_for_every_grid():
    """transformers' ViT returns its position table where the grid is the table's own and resizes it
    (bicubic) otherwise, in a method that returns early: one program takes each side where eager does
    (torch.export's program rejects the table's own grid, 32 x 32 here)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=64, image_size=32, patch_size=8)
    vit = transformers.ViTModel(config).eval()

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.vit = vit

        def forward(self, x):
            return self.vit(pixel_values=x, interpolate_pos_encoding=True).last_hidden_state

    model = Wrapped()
    spec = ({2: 8 * Dim("h", min=2, max=16), 3: 8 * Dim("w", min=2, max=16)},)
    program = shapeproof.export(model, (torch.randn(1, 3, 48, 40),), dynamic_shapes=spec)
    assert _conds_used(program)
    sizes = [(32, 32), (16, 16), (48, 40), (128, 128), (32, 64), (128, 16)]
    assert _matches_eager(model, program, [(torch.randn(1, 3, h, w),) for h, w in sizes]) == []


class SamePadding(torch.nn.Module):
    """TensorFlow's "SAME" padding before a strided conv: each ``if`` binds only an amount of padding."""

    def __init__(self, kernel=3, stride=2):
        super().__init__()
        self.kernel, self.stride = kernel, stride
        self.conv = torch.nn.Conv2d(3, 3, kernel, stride=stride)

    def forward(self, x):
        in_height, in_width = x.shape[2], x.shape[3]
        if in_height % self.stride == 0:
            pad_h = max(self.kernel - self.stride, 0)
        else:
            pad_h = max(self.kernel - (in_height % self.stride), 0)
        if in_width % self.stride == 0:
            pad_w = max(self.kernel - self.stride, 0)
        else:
            pad_w = max(self.kernel - (in_width % self.stride), 0)
        x = F.pad(x, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2))
        return self.conv(x)


class EvenLength(torch.nn.Module):
    """An ``if`` whose body pads by a constant: the amount is the test's indicator (issue 52's form)."""

    def forward(self, x):                                      # x: (B, T, 4)
        if x.shape[1] % 2:
            x = F.pad(x, (0, 0, 0, 1))
        return x.reshape(x.shape[0], -1, 8)


@pytest.mark.parametrize("build, stages",
                         [(SamePadding, 1), (SamePadding, 4), (SamePadding, 10), (EvenLength, 1)],
                         ids=["same-padding", "same-padding-4-stages", "same-padding-10-stages",
                              "even-length"])
def test_sides_that_bind_only_sizes_are_one_size_in_one_trace(build, stages):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[build() for _ in range(stages)]) if build is not EvenLength else build()
    if build is EvenLength:
        args, spec = (torch.randn(2, 10, 4),), ({1: Dim("T", min=1, max=64)},)
        inputs = [(torch.randn(2, t, 4),) for t in (1, 2, 7, 10, 63, 64)]
    else:
        model = model.eval()
        spec = ({2: Dim("H", min=16, max=128), 3: Dim("W", min=16, max=128)},)
        args = (torch.randn(1, 3, 64, 48),)
        inputs = [(torch.randn(1, 3, h, w),) for h in (16, 17, 63, 128) for w in (16, 33, 127)]
    result = shapeproof.export_with_report(model, args, dynamic_shapes=spec)
    assert result.regions is None, "one trace, no region search"
    if build is SamePadding:       # the amounts are sizes: no cond at all
        assert not any(n.target is torch.ops.higher_order.cond for n in result.program.graph.nodes)
        # each stage's size is one division of the input's (tracer/sizes/closed_forms), not 2**k copies
        (out,) = [n for n in result.program.graph.nodes if n.op == "output"][0].args[0]
        assert all(str(size).count("//") == 1 for size in out.meta["val"].shape[2:])
    assert _matches_eager(model, result.program, inputs) == []


def test_a_later_export_runs_an_earlier_exports_rewrite_from_its_first_trace(monkeypatch):
    """The rewrite of a function that returns early is pure: a second export of the model in the process
    runs it from its first trace, without a trace that finds the ``if`` again and ends."""
    from shapeproof.tracer.control import branch_cond

    build, args, spec, inputs = EARLY["position_table"]
    model, own = build().eval(), PositionTable.resized.__code__
    shapeproof.export(model, args, dynamic_shapes=spec)
    asked = []
    original = branch_cond.rewrite
    monkeypatch.setattr(branch_cond, "rewrite", lambda *a: asked.append(a) or original(*a))
    program = shapeproof.export(model, args, dynamic_shapes=spec)
    assert asked == [] and _conds_used(program)
    assert _matches_eager(model, program, inputs) == []
    assert PositionTable.resized.__code__ is own         # its own code back after each export
