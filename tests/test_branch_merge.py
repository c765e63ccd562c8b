"""One trace through size branches whose two sides agree (tracer/control/branch_merge.py, branch_sites.py).

Each idiom is a small model exported over a range where the branch goes both
ways; the program must come from one trace, record no guard for the branch,
and match eager at every size of the range (or a sweep of it).  Negative
cases keep today's behaviour: a body with effects the trace cannot see, or
one that is not an identity where it would be skipped, is not merged.  The
identities the merge relies on are checked on eager, bit for bit, including
non-finite values and signed zeros.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

import shapeproof
from shapeproof.export.errors import ExportError
from shapeproof.export.settings import ExportSettings
from shapeproof.export.search.traces import trace
from shapeproof.solver import Mod
from shapeproof.tracer.control.body_rules import _EXACT_RESIZE

torch.manual_seed(0)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32 if t.dtype == torch.float32 else torch.int64)


def _nasty(*shape) -> torch.Tensor:
    """Random values with a nan, an inf and a negative zero: what bit-for-bit identities must keep."""
    x = torch.randn(*shape)
    flat = x.view(-1)
    flat[0], flat[1], flat[-1] = float("nan"), float("inf"), -0.0
    return x


def _one_trace(model, args, spec, cond_branches=True):
    """The first trace of an export, with what its engine recorded."""
    return trace(model, args, None, spec, ExportSettings(timeout=2.0, cond_branches=cond_branches))


def _matches_eager(model, program, shapes, make=lambda s: torch.randn(*s)) -> None:
    module = program.module()
    for shape in shapes:
        x = make(shape)
        with torch.no_grad():
            expected, got = model(x), module(x)
        assert torch.equal(expected, got), f"mismatch at {shape}"


# ---------------------------------------------------------------------------- idiom 1: pad to a multiple

class PadStage(nn.Module):
    def __init__(self, multiple: int):
        super().__init__()
        self.multiple = multiple
        self.conv = nn.Conv1d(4, 4, multiple, stride=multiple)

    def forward(self, x):
        if x.size(-1) % self.multiple != 0:
            x = F.pad(x, (0, self.multiple - x.size(-1) % self.multiple))
        return self.conv(x)


class Stages(nn.Module):
    def __init__(self, k: int, multiple: int = 2):
        super().__init__()
        self.stages = nn.ModuleList(PadStage(multiple) for _ in range(k))

    def forward(self, x):
        for stage in self.stages:
            x = stage(x)
        return x


def test_four_padding_stages_are_one_trace_and_one_program():
    model = Stages(4).eval()
    x = torch.randn(2, 4, 45)
    spec = ({2: Dim("W", min=40, max=300)},)
    first = _one_trace(model, (x,), spec)
    assert first.program is not None and first.region is not None
    assert not [g for g in first.report.guards if g.verdict is None or not g.verdict.proven]
    assert len(first.engine.merged_branches) == 4
    assert all(m.rewrites for m in first.engine.merged_branches)   # 2 - W % 2 padded as (2 - W % 2) % 2
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    assert program.range_constraints[next(iter(program.range_constraints))].lower == 40
    _matches_eager(model, program, [(2, 4, w) for w in range(40, 301)])


def _unchanged(forward):
    return forward


class SpacedOut(nn.Module):
    @_unchanged
    def forward(self, x):
        """A docstring

        with a blank line, as library code has.
        """

        width = x.size(-1)

        if width % 4 != 0:
            x = F.pad(x, (0, 4 - width % 4))
        return x.view(x.size(0), -1, 4).sum(-1)


def test_blank_lines_and_decorators_before_the_branch_leave_its_position_found():
    first = _one_trace(SpacedOut(), (torch.randn(2, 10),), ({1: Dim("W", min=4, max=64)},))
    assert len(first.engine.merged_branches) == 1


def test_a_constant_pad_amount_becomes_the_conditions_indicator():
    class OddPad(nn.Module):
        def forward(self, x):
            if x.size(-1) % 2 == 1:
                x = F.pad(x, (0, 1))
            return x.view(x.size(0), -1, 2).sum(-1)

    model = OddPad()
    program = shapeproof.export(model, (torch.randn(3, 9),), dynamic_shapes=({1: Dim("W", min=2, max=64)},))
    _matches_eager(model, program, [(3, w) for w in range(2, 65)])


def test_a_flag_assigned_by_or_then_tested():
    class MergeHalves(nn.Module):          # Swin's patch merging writes it this way
        def forward(self, x):               # (B, H, W, C)
            height, width = x.shape[1], x.shape[2]
            should_pad = (height % 2 == 1) or (width % 2 == 1)
            if should_pad:
                pad_values = (0, 0, 0, width % 2, 0, height % 2)
                x = nn.functional.pad(x, pad_values)
            return torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 1::2]], -1)

    model = MergeHalves()
    x = torch.randn(2, 7, 10, 3)
    spec = ({1: Dim("H", min=2, max=20), 2: Dim("W", min=2, max=20)},)
    first = _one_trace(model, (x,), spec)
    assert len(first.engine.merged_branches) == 1 and first.region is not None
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    _matches_eager(model, program, [(2, h, w, 3) for h in range(2, 21) for w in (2, 3, 8, 11, 20)])


def test_a_crop_after_a_branchless_pad_is_a_slice_of_the_whole_dim_where_nothing_was_padded():
    class Window(nn.Module):
        def forward(self, x):               # (B, H, W, C), windows of 4
            height, width = x.shape[1], x.shape[2]
            pad_r, pad_b = (4 - width % 4) % 4, (4 - height % 4) % 4
            y = F.pad(x, (0, 0, 0, pad_r, 0, pad_b)) * 2
            was_padded = pad_r > 0 or pad_b > 0
            if was_padded:
                y = y[:, :height, :width, :].contiguous()
            return y + x

    model = Window()
    x = torch.randn(1, 9, 12, 2)
    spec = ({1: Dim("H", min=4, max=40), 2: Dim("W", min=4, max=40)},)
    assert len(_one_trace(model, (x,), spec).engine.merged_branches) == 1
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    _matches_eager(model, program, [(1, h, w, 2) for h in (4, 5, 8, 11, 40) for w in (4, 7, 12, 13, 39)])


def test_padding_stages_under_dim_auto_keep_every_size():
    model = Stages(3).eval()
    program = shapeproof.export(model, (torch.randn(2, 4, 37),), dynamic_shapes=({2: Dim.AUTO},))
    _matches_eager(model, program, [(2, 4, w) for w in (8, 9, 16, 31, 37, 64, 100, 257)])


class ChannelsLastStage(nn.Module):
    """FocalNet's downsampling: tokens viewed as a channels-last image (no copy), padded when needed."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 2, stride=2)

    def forward(self, tokens, width):                # tokens (B, 2*W, C): a 2 x W grid
        image = tokens.transpose(1, 2).reshape(tokens.size(0), -1, 2, width.size(0))
        if image.size(-1) % 2 != 0:
            image = F.pad(image, (0, 2 - image.size(-1) % 2))
        return self.conv(image)


def test_a_pad_of_a_channels_last_view_keeps_its_layout_and_merges():
    model = ChannelsLastStage().eval()
    args = (torch.randn(2, 2 * 9, 4), torch.empty(9))
    width = Dim("W", min=2, max=40)
    spec = ({1: 2 * width}, {0: width})
    first = _one_trace(model, args, spec)
    assert len(first.engine.merged_branches) == 1 and first.region is not None
    module = shapeproof.export(model, args, dynamic_shapes=spec).module()
    for w in range(2, 41):
        inputs = (torch.randn(2, 2 * w, 4), torch.empty(w))
        with torch.no_grad():
            assert torch.equal(_bits(model(*inputs)), _bits(module(*inputs))), w


def test_a_copy_keeps_the_strides_of_a_dense_tensor_on_eager():
    """What the layout rule relies on: padding a dense tensor by 0 (a clone) keeps its strides whatever
    their order; a tensor with gaps comes back contiguous, which is why its pad is not merged."""
    channels_last = torch.randn(2, 20, 8).transpose(1, 2).reshape(2, 8, 4, 5)
    permuted = torch.randn(4, 5, 2, 8).permute(2, 3, 0, 1)
    for x in (channels_last, permuted):
        assert F.pad(x, (0, 0)).stride() == x.stride() and torch.equal(_bits(F.pad(x, (0, 0))), _bits(x))
    gaps = torch.randn(2, 8, 4, 10)[..., ::2]
    assert F.pad(gaps, (0, 0)).stride() != gaps.stride()


def test_a_pad_of_a_tensor_with_gaps_is_not_merged():
    class Strided(nn.Module):
        def forward(self, x):
            y = x[..., ::2]
            if y.size(-1) % 4 != 0:
                y = F.pad(y, (0, 4 - y.size(-1) % 4))
            return y.reshape(y.size(0), -1, 4)

    first = _one_trace(Strided(), (torch.randn(2, 3, 18),), ({2: Dim("W", min=8, max=64)},))
    assert not first.engine.merged_branches and first.unmerged      # tried, found unlike, traced again


# ---------------------------------------------------------------------------- idiom 2: resize when different

class CachedTable(nn.Module):
    def __init__(self, mode: str, antialias: bool = False):
        super().__init__()
        self.grid, self.mode, self.antialias = 4, mode, antialias
        self.table = nn.Parameter(torch.randn(1, 3, 4, 4))

    def forward(self, x):                   # (B, 3, g, g)
        g = x.size(-1)
        table = self.table
        if g != self.grid:
            table = F.interpolate(table, size=(g, g), mode=self.mode, antialias=self.antialias)
        return x + table


@pytest.mark.parametrize("mode,antialias", [("nearest", False), ("nearest-exact", False), ("bilinear", True),
                                            ("bicubic", True)])
def test_a_cached_table_resized_only_when_the_grid_differs(mode, antialias):
    model = CachedTable(mode, antialias)
    x = torch.randn(2, 3, 6, 6)
    spec = ({2: Dim("G", min=2, max=12), 3: Dim("G", min=2, max=12)},)
    assert len(_one_trace(model, (x,), spec).engine.merged_branches) == 1
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    _matches_eager(model, program, [(2, 3, g, g) for g in range(2, 13)])


def test_a_resize_that_is_not_exact_at_the_same_size_is_not_merged():
    model = CachedTable("bicubic", antialias=False)   # 0 * inf is nan: not an identity for every input
    x = torch.randn(2, 3, 6, 6)
    spec = ({2: Dim("G", min=2, max=12), 3: Dim("G", min=2, max=12)},)
    first = _one_trace(model, (x,), spec)
    assert not first.engine.merged_branches
    assert first.unmerged and first.region is not None      # tried, found out, traced again without it


# an ``else`` that is the end of the ``if`` body with the cached table in place of the resized one
# (TimeSformer's two tables): the body up to there is taken for every input

class SpaceTable(nn.Module):
    """The class row and a 2x2 grid; the grid is resized, through views, when the token count differs."""

    def __init__(self, rows_in_order: bool = True):
        super().__init__()
        self.table, self.order = nn.Parameter(torch.randn(1, 5, 6)), 1 if rows_in_order else -1

    def forward(self, x):                      # x: (B, H, 6); tokens: 1 + 2 * (H // 8)
        embeddings = x[:, :1 + 2 * (x.size(1) // 8)]
        if embeddings.size(1) != self.table.size(1):
            cls_row = self.table[0, 0, :].unsqueeze(0).unsqueeze(1)
            grid = self.table[0, 1:, :].unsqueeze(0).transpose(1, 2)
            side = int(grid.size(2) ** 0.5)
            grid = grid.reshape(1, embeddings.size(2), side, side)
            grid = F.interpolate(grid, size=(embeddings.size(1) // 2, 2), mode="nearest")
            grid = grid.flatten(2).transpose(1, 2)
            table = torch.cat((cls_row, grid)[::self.order], 1)
            embeddings = embeddings + table
        else:
            embeddings = embeddings + self.table
        return embeddings.softmax(-1).cumsum(1)


class TimeTable(nn.Module):
    """A table resized along its second dim through a transpose: the resized copy is laid out unlike the
    table, and only its sum with a contiguous tensor of the full shape is laid out alike."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(1, 3, 8))

    def forward(self, x):                      # x: (B, T, 8)
        frames = x.size(1)
        if frames != self.table.size(1):
            table = self.table.transpose(1, 2)
            table = F.interpolate(table, size=frames, mode="nearest")
            table = table.transpose(1, 2)
            x = x + table
        else:
            x = x + self.table
        return x.cumsum(1)


class TimeTableFirst(TimeTable):
    """The same body with the table first in the sum (written out: the merge reads the source)."""

    def forward(self, x):
        frames = x.size(1)
        if frames != self.table.size(1):
            table = self.table.transpose(1, 2)
            table = F.interpolate(table, size=frames, mode="nearest")
            table = table.transpose(1, 2)
            x = table + x
        else:
            x = self.table + x
        return x.cumsum(1)


class ElseReadsAnotherTable(nn.Module):
    def __init__(self):
        super().__init__()
        self.table, self.other = nn.Parameter(torch.randn(1, 3, 8)), nn.Parameter(torch.randn(1, 3, 8))

    def forward(self, x):
        if x.size(1) != self.table.size(1):
            table = F.interpolate(self.table.transpose(1, 2), size=x.size(1), mode="nearest").transpose(1, 2)
            x = x + table
        else:
            x = x + self.other
        return x


_SQUARE_GRID = ({2: Dim("G", min=2, max=12), 3: Dim("G", min=2, max=12)},)
_SQUARES = [(2, 3, g, g) for g in range(2, 13)]


class CachedOrResized(nn.Module):
    """One side keeps the cached table (a plain read), the other resizes it; either order."""

    def __init__(self, cached_first: bool):
        super().__init__()
        self.table, self.grid, self.cached_first = nn.Parameter(torch.randn(1, 3, 4, 4)), 4, cached_first

    def forward(self, x):                      # (B, 3, g, g)
        if self.cached_first:
            return x + self.same_grid(x.size(-1))
        return x + self.other_grid(x.size(-1))

    def same_grid(self, g):
        if g == self.grid:
            table = self.table
        else:
            table = F.interpolate(self.table, size=(g, g), mode="nearest")
        return table

    def other_grid(self, g):
        if g != self.grid:
            table = F.interpolate(self.table, size=(g, g), mode="nearest-exact")
        else:
            table = self.table
        return table


class PadThenPool(nn.Module):
    """``if odd: pad; pool`` / ``else: pool``: the ``else`` is the end of the body, reading the padded name
    itself (the pool, a module call, runs on both sides alike)."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(2)

    def forward(self, x):                      # x: (B, C, W)
        if x.size(-1) % 2 == 1:
            x = F.pad(x, (0, 1))
            x = self.pool(x)
        else:
            x = self.pool(x)
        return x.flatten(1)


@pytest.mark.parametrize("model,x,spec,sizes", [
    (SpaceTable(), torch.randn(2, 40, 6), ({1: Dim("H", min=8, max=64)},), [(2, h, 6) for h in range(8, 65)]),
    (TimeTable(), torch.randn(2, 5, 8), ({1: Dim("T", min=1, max=12)},), [(2, t, 8) for t in range(1, 13)]),
    (PadThenPool(), torch.randn(2, 3, 9), ({2: Dim("W", min=2, max=40)},), [(2, 3, w) for w in range(2, 41)]),
    (CachedOrResized(cached_first=True), torch.randn(2, 3, 6, 6), _SQUARE_GRID, _SQUARES),
    (CachedOrResized(cached_first=False), torch.randn(2, 3, 6, 6), _SQUARE_GRID, _SQUARES),
], ids=["space", "time", "pad-then-pool", "cached-then-resized", "resized-then-cached"])
def test_an_if_else_whose_sides_agree_is_one_trace(model, x, spec, sizes):
    first = _one_trace(model, (x,), spec)
    assert len(first.engine.merged_branches) == 1 and not first.unmerged
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    _matches_eager(model, program, sizes)


@pytest.mark.parametrize("model,x,spec", [
    (SpaceTable(rows_in_order=False), torch.randn(2, 40, 6), ({1: Dim("H", min=8, max=64)},)),
    (TimeTableFirst(), torch.randn(2, 5, 8), ({1: Dim("T", min=1, max=12)},)),
    (ElseReadsAnotherTable(), torch.randn(2, 5, 8), ({1: Dim("T", min=1, max=12)},)),
], ids=["rows-out-of-order", "copy-laid-out-unlike-first", "another-table"])
def test_an_else_the_body_does_not_reproduce_is_not_merged(model, x, spec):
    """The grid before the class row is not the table; a copy laid out unlike the table is first in the
    sum, so it orders the result's dims; the ``else`` adds another table."""
    first = _one_trace(model, (x,), spec)
    assert not first.engine.merged_branches
    assert first.unmerged or any(g.verdict is not None and not g.verdict.proven for g in first.report.guards)


def test_an_elementwise_sum_is_laid_out_by_its_first_operand_on_eager():
    """What the layout rule for a table laid out unlike the cached one relies on."""
    x = torch.randn(4, 3, 8)
    table = torch.randn(1, 8, 3).transpose(1, 2)         # (1, 3, 8), not contiguous
    cached = table.contiguous()
    for op in (torch.add, torch.sub, torch.mul, torch.div):
        merged, original = op(x, table), op(x, cached)
        assert merged.stride() == original.stride() and torch.equal(_bits(merged), _bits(original))
    assert (table + x).stride() != (cached + x).stride()   # first, the copy orders the dims itself


# an early return of the cached table (ViT's interpolate_pos_encoding): the rest of the function is taken

class EarlyReturn(nn.Module):
    """``return self.table`` when the grid is the configured one and square, else the table resized."""

    def __init__(self, mode: str = "bicubic", antialias: bool = True, cls_first: bool = True):
        super().__init__()
        self.table = nn.Parameter(torch.randn(1, 1 + 16, 6))
        self.mode, self.antialias, self.order = mode, antialias, 1 if cls_first else -1

    def table_for(self, height: int, width: int) -> torch.Tensor:
        positions = self.table.shape[1] - 1
        if not torch.jit.is_tracing() and (height // 8) * (width // 8) == positions and height == width:
            return self.table
        cls_row = self.table[:, :1]
        side = int(positions ** 0.5)
        grid = self.table[:, 1:].reshape(1, side, side, 6).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(height // 8, width // 8), mode=self.mode, antialias=self.antialias)
        grid = grid.permute(0, 2, 3, 1).reshape(1, -1, 6)
        return torch.cat((cls_row, grid)[::self.order], dim=1)

    def forward(self, x):                      # x: (B, 3, H, W), 8x8 patches
        tokens = F.avg_pool2d(x, 8).flatten(2).transpose(1, 2).repeat(1, 1, 2)
        tokens = torch.cat((tokens[:, :1], tokens), 1)
        return (tokens + self.table_for(x.size(2), x.size(3))).softmax(-1)


def test_an_early_return_of_the_cached_table_is_one_trace():
    model, x = EarlyReturn(), torch.randn(2, 3, 48, 40)
    spec = ({2: Dim("H", min=16, max=64), 3: Dim("W", min=16, max=64)},)
    first = _one_trace(model, (x,), spec)
    assert len(first.engine.merged_branches) == 1 and not first.unmerged
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    _matches_eager(model, program, [(2, 3, h, w) for h in range(16, 65, 5) for w in (16, 31, 32, 39, 64)]
                   + [(2, 3, 32, 32), (2, 3, 39, 39), (2, 3, 32, 39)])


class LiteralBicubic(EarlyReturn):
    """ViT's form: the mode written at the call, so the body is refused before a trace runs into it."""

    def table_for(self, height: int, width: int) -> torch.Tensor:
        positions = self.table.shape[1] - 1
        if (height // 8) * (width // 8) == positions and height == width:
            return self.table
        grid = self.table[:, 1:].reshape(1, 4, 4, 6).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(height // 8, width // 8), mode="bicubic", align_corners=False)
        return torch.cat((self.table[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, 6)), dim=1)


def test_a_resize_written_inexact_is_refused_without_tracing_into_it():
    """(Without conds: with them, the early return is rewritten and run as one, ``test_branch_cond``.)"""
    first = _one_trace(LiteralBicubic(), (torch.randn(2, 3, 48, 40),),
                       ({2: Dim("H", min=16, max=64), 3: Dim("W", min=16, max=64)},), cond_branches=False)
    assert not first.engine.merged_branches and not first.unmerged


@pytest.mark.parametrize("model", [EarlyReturn(antialias=False), EarlyReturn(cls_first=False)],
                         ids=["bicubic-without-antialias", "rows-out-of-order"])
def test_an_early_return_the_rest_does_not_reproduce_is_not_merged(model):
    first = _one_trace(model, (torch.randn(2, 3, 48, 40),),
                       ({2: Dim("H", min=16, max=64), 3: Dim("W", min=16, max=64)},))
    assert not first.engine.merged_branches


# ---------------------------------------------------------------------------- what is not merged

def _kept_a_guard(model, x, spec) -> bool:
    """Whether merging left the ``if`` a guard (the trace does not run it as a cond: ``test_branch_cond``)."""
    first = _one_trace(model, (x,), spec, cond_branches=False)
    return not first.engine.merged_branches and any(
        g.verdict is not None and not g.verdict.proven for g in first.report.guards)


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.padded = 0

    def forward(self, x):
        if x.size(-1) % 4 != 0:
            self.padded += 1                                  # a store into an object
            x = F.pad(x, (0, 4 - x.size(-1) % 4))
        return x.view(x.size(0), -1, 4)


class CallsAModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.fix = nn.Identity()

    def forward(self, x):
        if x.size(-1) % 4 != 0:
            x = self.fix(F.pad(x, (0, 4 - x.size(-1) % 4)))   # user code: effects unseen
        return x.view(x.size(0), -1, 4)


class NotAnIdentity(nn.Module):
    def forward(self, x):
        if x.size(-1) % 4 != 0:
            x = x * 2                                         # where skipped, x is not doubled
        return x


class ReadsItsAmountAfter(nn.Module):
    def forward(self, x):
        pad = 0
        if x.size(-1) % 4 != 0:
            pad = 4 - x.size(-1) % 4
            x = F.pad(x, (0, pad))
        return x[:, : x.size(-1) - pad] * 3                   # `pad` is 4 - W % 4 = 4, not 0, where skipped


class HasAnElse(nn.Module):
    def forward(self, x):
        if x.size(-1) % 4 != 0:
            x = F.pad(x, (0, 4 - x.size(-1) % 4))
        else:
            x = x + 0
        return x.view(x.size(0), -1, 4)


@pytest.mark.parametrize("model", [Counting(), CallsAModule(), NotAnIdentity(), ReadsItsAmountAfter(),
                                   HasAnElse()], ids=lambda m: type(m).__name__)
def test_bodies_with_other_effects_keep_their_guard(model):
    assert _kept_a_guard(model, torch.randn(2, 10), ({1: Dim("W", min=4, max=64)},))


@pytest.mark.parametrize("model", [CallsAModule(), NotAnIdentity(), ReadsItsAmountAfter(), HasAnElse()],
                         ids=lambda m: type(m).__name__)
def test_bodies_merging_refuses_export_as_one_cond(model):
    program = shapeproof.export(model, (torch.randn(2, 10),), dynamic_shapes=({1: Dim("W", min=4, max=64)},))
    assert any(n.target is torch.ops.higher_order.cond for n in program.graph.nodes)
    _matches_eager(model, program, [(2, w) for w in range(4, 65)])


def test_a_refused_merge_leaves_an_export_that_still_matches_eager():
    model = ReadsItsAmountAfter()
    package = shapeproof.export(model, (torch.randn(2, 10),), dynamic_shapes=({1: Dim("W", min=4, max=64)},),
                                split=True)
    for w in range(4, 65):
        x = torch.randn(2, w)
        assert torch.equal(model(x), package.module()(x))


def test_a_branch_on_a_static_size_is_left_to_python():
    class Static(nn.Module):
        def forward(self, x):
            if x.size(0) % 2 != 0:                  # static: no guard, nothing to merge
                x = F.pad(x, (0, 0, 0, 1))
            return x

    first = _one_trace(Static(), (torch.randn(3, 8),), ({1: Dim("W", min=2, max=16)},))
    assert not first.engine.merged_branches and first.program is not None


def test_a_module_whose_source_cannot_be_read_keeps_its_guard():
    namespace: dict = {}
    exec(compile("def forward(self, x):\n"
                 "    if x.size(-1) % 4 != 0:\n"
                 "        x = F.pad(x, (0, 4 - x.size(-1) % 4))\n"
                 "    return x.view(x.size(0), -1, 4)\n", "<generated>", "exec"), {"F": F}, namespace)
    model = type("Generated", (nn.Module,), {"forward": namespace["forward"]})()
    with pytest.raises(ExportError):
        shapeproof.export(model, (torch.randn(2, 10),), dynamic_shapes=({1: Dim("W", min=4, max=64)},))


# ---------------------------------------------------------------------------- the identities, on eager

def test_a_constant_pad_by_zero_is_an_identity():
    x = _nasty(2, 3, 5, 6)
    for pad in [(0, 0), (0, 0, 0, 0), (0, 0, 0, 0, 0, 0)]:
        for value in (None, 3.0):
            assert torch.equal(_bits(F.pad(x, pad, value=value)), _bits(x))
    assert F.pad(x, (0, 1)).shape != x.shape                       # the negative: any other amount


def test_a_slice_of_the_whole_dim_is_an_identity():
    x = _nasty(3, 5, 4)
    assert torch.equal(_bits(x[:, :5, :]), _bits(x)) and torch.equal(_bits(x[:, :9]), _bits(x))
    assert x[:, :4].shape != x.shape and x[:, 1:].shape != x.shape


def test_cat_with_an_empty_tensor_is_an_identity():
    x = _nasty(2, 3, 4)
    assert torch.equal(_bits(torch.cat([x, x.new_zeros(2, 0, 4)], 1)), _bits(x))
    assert torch.cat([x, x.new_zeros(2, 1, 4)], 1).shape != x.shape


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("antialias", [False, True])
@pytest.mark.parametrize("align_corners", [None, False, True])
def test_a_resize_to_the_same_size_is_exact_exactly_where_the_rule_says(mode, antialias, align_corners):
    if (antialias and mode not in ("bilinear", "bicubic")) or (
            align_corners is not None and mode not in ("bilinear", "bicubic")):
        pytest.skip("not a combination torch accepts")
    x = _nasty(2, 3, 7, 5)
    same = F.interpolate(x, size=(7, 5), mode=mode, antialias=antialias, align_corners=align_corners)
    exact = torch.equal(_bits(same), _bits(x))
    rule = mode in _EXACT_RESIZE or antialias
    assert exact == rule, f"{mode}, antialias={antialias}: eager says {exact}, the rule says {rule}"


def test_every_merged_pad_amount_is_the_original_where_the_body_runs_and_zero_where_not():
    model = Stages(3, multiple=3).eval()
    first = _one_trace(model, (torch.randn(2, 4, 50),), ({2: Dim("W", min=9, max=200)},))
    assert len(first.engine.merged_branches) == 3
    for merged in first.engine.merged_branches:
        (size, replaced), = merged.rewrites                   # 3 - W % 3 is (3 - W % 3) % 3
        assert replaced == Mod(size, 3)
        assert " is ((3 - (" in first.engine.describe_merge(merged)
    spec = ({2: Dim("W", min=9, max=200)},)
    program = shapeproof.export(model, (torch.randn(2, 4, 50),), dynamic_shapes=spec)
    _matches_eager(model, program, [(2, 4, w) for w in range(9, 201)])


def test_the_swin_pattern_models_of_the_region_search_need_one_trace_each():
    """tests/test_pad_merge.py's window blocks (a pad flag tested twice: pad, then crop) and two stages
    with an odd-size merge: the region search needed one trace per combination of pad outcomes.  From 5 up
    there are two windows or more (one window is torch's size-1 path of the window partition's reshape)."""
    from test_pad_merge import TwoStages, WindowBlock, _check_against_eager

    spec = ({1: Dim("H", min=5, max=24), 2: Dim("W", min=5, max=24)},)
    sizes = [(5, 5), (24, 24), (5, 24), (24, 5), (8, 8), (12, 20), (16, 16), (5, 7), (9, 16), (13, 22)]
    for model in (WindowBlock().eval(), TwoStages().eval()):
        result = shapeproof.export_with_report(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=spec)
        assert result.regions is None                  # no search: the first trace serves every size
        assert len(result.engine.merged_branches) >= 2
        _check_against_eager(result.program, model, sizes)
