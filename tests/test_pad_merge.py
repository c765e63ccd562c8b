"""Pad-to-multiple branches a trace does not merge export as one program: the padding program serves the
regions without padding (``export/programs/merge.py``).

The models are the Swin pattern: ``if H % ws or W % ws: pad``, window
partition, and ``x[:, :H, :W]`` to undo the padding, at one stage and at
several.  Every program is compared with eager at both ends of every region
and at shapes between, with the branch taken and not.
"""
from __future__ import annotations

import math
import time
import warnings

import pytest
import shapeproof
import torch
import torch.nn.functional as F_nn
from shapeproof.export.search.split import SplitProgram
from torch.export import Dim

# pad branches here stand for every branch a trace cannot merge itself (see the fixture)
pytestmark = pytest.mark.usefixtures("program_level_merges_only")

__shapeproof_user_code__ = True


def _windows(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, ws * ws, c)


def _unwindows(windows, ws, b, h, w):
    c = windows.shape[-1]
    x = windows.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b, h, w, c)


class WindowBlock(torch.nn.Module):
    """Attention within ws x ws windows; pads H and W to multiples of ws only when needed (Swin's block)."""

    def __init__(self, c=4, ws=4):
        super().__init__()
        self.ws = ws
        self.proj = torch.nn.Linear(c, c)

    def forward(self, x):  # (B, H, W, C)
        b, h, w, c = x.shape
        ws = self.ws
        padded = h % ws != 0 or w % ws != 0
        if padded:
            x = F_nn.pad(x, (0, 0, 0, (ws - w % ws) % ws, 0, (ws - h % ws) % ws))
        hp, wp = x.shape[1], x.shape[2]
        win = _windows(x, ws)
        win = torch.softmax(win @ win.transpose(1, 2), -1) @ self.proj(win)
        x = _unwindows(win, ws, b, hp, wp)
        if padded:
            x = x[:, :h, :w, :].contiguous()
        return x


class TwoStages(torch.nn.Module):
    """Window block, patch merging (pad H and W to even only when odd), window block at half resolution."""

    def __init__(self, c=4):
        super().__init__()
        self.stage1, self.stage2 = WindowBlock(c, 4), WindowBlock(2 * c, 2)
        self.merge = torch.nn.Linear(4 * c, 2 * c)

    def forward(self, x):
        x = self.stage1(x)
        h, w = x.shape[1], x.shape[2]
        if h % 2 == 1 or w % 2 == 1:
            x = F_nn.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.stage2(self.merge(x))


class Clamped(torch.nn.Module):
    """A window block, except that inputs no larger than a window take a genuinely different path."""

    def __init__(self, c=4, ws=4):
        super().__init__()
        self.block = WindowBlock(c, ws)
        self.ws = ws

    def forward(self, x):
        if min(x.shape[1], x.shape[2]) <= self.ws:
            return x * 2
        return self.block(x)


def _check_against_eager(program, model, sizes, c=4):
    module = program.module()
    for h, w in sizes:
        x = torch.randn(2, h, w, c)
        with torch.no_grad():
            assert torch.allclose(module(x), model(x), atol=1e-5), (h, w)


SPEC = ({1: Dim("H", min=4, max=24), 2: Dim("W", min=4, max=24)},)
# corners of the box (the region's ends), then shapes between, the pad branch taken or not
SIZES = [(4, 4), (24, 24), (4, 24), (24, 4), (8, 8), (12, 20), (16, 16), (5, 7), (9, 16), (13, 22), (23, 5)]


def test_window_partition_with_a_pad_branch_exports_as_one_program():
    model = WindowBlock().eval()
    result = shapeproof.export_with_report(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=SPEC)
    assert isinstance(result.program, torch.export.ExportedProgram)
    search = result.regions
    assert search.covered and len(search.regions) == 1 and len(search.traces) > 1
    assert search.merges                      # the padding program serves the traces without padding
    _check_against_eager(result.program, model, SIZES)


def test_pad_branches_at_several_stages_export_as_one_program():
    """Three pad branches (window, merge to even, window at half size) over H; W needs none of them."""
    model = TwoStages().eval()
    result = shapeproof.export_with_report(model, (torch.randn(2, 8, 12, 4),),
                                           dynamic_shapes=({1: Dim("H", min=4, max=40)},))
    assert isinstance(result.program, torch.export.ExportedProgram)
    assert result.regions.covered and len(result.regions.regions) == 1 and len(result.regions.merges) >= 2
    heights = (4, 40, 5, 6, 7, 8, 9, 10, 11, 12, 21, 26, 39)     # ends, then each pad taken or not
    _check_against_eager(result.program, model, [(h, 12) for h in heights])


def test_split_package_holds_only_the_programs_no_identity_unifies():
    model = Clamped().eval()
    package = shapeproof.export(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=SPEC, split=True)
    assert isinstance(package, SplitProgram) and len(package.programs) == 2
    _check_against_eager(package, model, SIZES + [(5, 4), (4, 9), (5, 5)])


def test_without_split_a_genuinely_different_path_fails_fast_with_the_regions():
    model = Clamped().eval()
    start = time.perf_counter()
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=SPEC)
    seconds = time.perf_counter() - start
    assert "a second, different program was needed" in str(info.value)
    assert len(info.value.regions) == 2 and seconds < 60


class Above(torch.nn.Module):
    def forward(self, x):
        t = x.shape[1]
        if t > 10:
            x = x[:, :t].clone()
        return x * 2


def test_the_serving_program_accepts_the_inputs_of_the_regions_it_serves():
    """Its trace guarded ``T > 10``; its input checks and ranges must not keep that guard."""
    spec = ({1: Dim("T", min=2, max=40)},)
    result = shapeproof.export_with_report(Above(), (torch.randn(2, 20),), dynamic_shapes=spec)
    assert len(result.regions.merges) == 1 and len(result.regions.traces) == 2
    module = result.program.module()
    for t in (2, 5, 10, 11, 40):
        x = torch.randn(2, t)
        assert torch.equal(module(x), x * 2), t


def test_without_split_the_error_offers_the_widest_range_one_program_serves():
    """Clamped's genuine path is ``min(H, W) <= 4``; its pad branch merges: one program serves H, W >= 5."""
    model = Clamped().eval()
    with pytest.raises(shapeproof.ExportError) as info:     # a budget of its own: no default time cap
        shapeproof.export(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=SPEC, time_budget=900)
    narrowing = info.value.narrowing
    assert narrowing is not None and "Wider: one program" in str(info.value)
    assert {(f.dim, f.kind, f.min, f.max) for f in narrowing.fixes} == {("H", "range", 5, 24),
                                                                       ("W", "range", 5, 24)}
    spec = shapeproof.suggest_dynamic_shapes(info.value, SPEC)
    program = shapeproof.export(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=spec)
    _check_against_eager(program, model, [(5, 5), (24, 24), (5, 24), (24, 5), (8, 8), (7, 9), (13, 22)])


def _narrowed(model, example, spec):
    """The narrowing a failed export offers (a budget of its own: no default time cap), and the program
    the re-export with it gives."""
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(model, (example,), dynamic_shapes=spec, time_budget=900)
    assert info.value.narrowing is not None
    narrowed = shapeproof.suggest_dynamic_shapes(info.value, spec)
    program = shapeproof.export(model, (example,), dynamic_shapes=narrowed)
    return info.value.narrowing.fixes, program


class PatchPadThenWindows(torch.nn.Module):
    """Swin's patch embedding: pads by ``4 - W % 4`` only when ``W % 4 != 0`` (that pad is 4, not 0, where
    no padding is needed: a genuine second path), then a window block whose own pad branch merges."""

    def __init__(self, c=4):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, c, kernel_size=4, stride=4)
        self.block = WindowBlock(c, 2)

    def forward(self, x):  # (B, 3, H, W)
        w = x.shape[-1]
        if w % 4 != 0:
            x = F_nn.pad(x, (0, 4 - w % 4))
        return self.block(self.embed(x).permute(0, 2, 3, 1).contiguous())


def test_the_widest_range_keeps_the_genuine_path_and_drops_the_pad_branches_that_merge():
    model = PatchPadThenWindows().eval()
    fixes, program = _narrowed(model, torch.randn(1, 3, 8, 16), ({3: Dim("W", min=8, max=64)},))
    assert [(f.dim, f.kind, f.modulus, f.min, f.max) for f in fixes] == [("W", "multiple", 4, 2, 16)]
    module = program.module()
    for w in (8, 64, 12, 16, 20, 36, 60):          # ends; the window pad taken (W/4 odd) and not
        x = torch.randn(1, 3, 8, w)
        with torch.no_grad():
            assert torch.allclose(module(x), model(x), atol=1e-5), w
    with pytest.raises(AssertionError, match=r"size\(\)\[3\] % 4 == 0"):
        module(torch.randn(1, 3, 8, 18))            # outside the narrowed range: rejected, not wrong


def test_progress_shows_each_trace_of_the_search_on_stderr(capsys):
    pytest.importorskip("tqdm")
    spec = ({1: Dim("T", min=2, max=40)},)
    shapeproof.export(Above(), (torch.randn(2, 20),), dynamic_shapes=spec, progress=True)
    err = capsys.readouterr().err
    assert "shapeproof region search" in err and "2/" in err and "T=20" in err
    shapeproof.export(Above(), (torch.randn(2, 20),), dynamic_shapes=spec)
    assert "region search" not in capsys.readouterr().err          # off by default, like torch.export


class ClampedTwoStages(torch.nn.Module):
    """Two pad stages (Swin's window, merge and window again) behind a genuine path for small inputs."""

    def __init__(self, c=4):
        super().__init__()
        self.stages = TwoStages(c)

    def forward(self, x):
        if x.shape[1] <= 4:
            return x.repeat(1, 1, 1, 2)[:, ::2, ::2]
        return self.stages(x)


def test_the_widest_range_over_several_pad_stages_keeps_only_the_genuine_path():
    """Pads at the window, merge and half-size window stages all merge; only ``H <= 4`` is a genuine path."""
    model = ClampedTwoStages().eval()
    fixes, program = _narrowed(model, torch.randn(2, 8, 12, 4), ({1: Dim("H", min=4, max=40)},))
    assert [(f.dim, f.kind, f.min, f.max) for f in fixes] == [("H", "range", 5, 40)]
    heights = (5, 40, 6, 7, 8, 9, 10, 11, 12, 21, 26, 39)     # ends, then each pad taken or not
    _check_against_eager(program, model, [(h, 12) for h in heights])


def test_without_a_budget_the_widest_range_is_verified_or_named_as_unverified():
    """Finding and verifying ``H >= 5`` takes a trace per violated guard and per pad class; the default
    budget (about the export's own time) may stop it at either step: then the error says what it would
    take (and names the candidate once found), never drops it silently."""
    model = ClampedTwoStages().eval()
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(model, (torch.randn(2, 8, 12, 4),), dynamic_shapes=({1: Dim("H", min=4, max=40)},))
    error = info.value
    candidate = "H = Dim('H', min=5, max=40)"
    unfinished = [n for n in error.notes if "larger time_budget" in n]
    if error.narrowing is not None:
        assert [f.description for f in error.narrowing.fixes] == [candidate] and not unfinished
    elif "verifying it needs more traces" in str(error):
        assert len(unfinished) == 1 and candidate in unfinished[0]
    else:
        assert len(unfinished) == 1 and "looking for it takes at least" in unfinished[0]


def _attend_within_chunks(x, b, n, d):
    """Two-head attention inside each chunk of 8 rows."""
    heads = x.reshape(b, n, 8, 2, d // 2).transpose(2, 3)
    mixed = F_nn.scaled_dot_product_attention(heads, heads, heads)
    return mixed.transpose(2, 3).reshape(b, n * 8, d)


class ChunkedByCeil(torch.nn.Module):
    """Attention inside chunks of ``n = math.ceil(T / 8)`` (a float division in the graph), pad, crop.

    Where ``T`` is a multiple of 8 the pad is 0 and the crop covers the whole
    dim, so torch traces no pad and no slice there: the program traced at
    another ``T`` serves those inputs only if ``math.ceil(T / 8)`` is read exactly.
    """

    def forward(self, x):
        b, t, d = x.shape
        n = math.ceil(t / 8)
        x = F_nn.pad(x, (0, 0, 0, n * 8 - t))
        return _attend_within_chunks(x, b, n, d)[:, :t]


class ChunkedByFloor(torch.nn.Module):
    """As ``ChunkedByCeil`` but always padding at least one row (``math.floor(T / 8) + 1`` chunks) when
    ``T % 8``: where ``T % 8 == 0`` the padded program would pad 8 rows, so it must not serve there."""

    def forward(self, x):
        b, t, d = x.shape
        if t % 8:
            n = math.floor(t / 8) + 1
            x = F_nn.pad(x, (0, 0, 0, n * 8 - t))
        else:
            n = t // 8
        return _attend_within_chunks(x, b, n, d)[:, :t]


def _check_lengths(program, model, lengths):
    module = program.module()
    for t in lengths:
        x = torch.randn(3, t, 4)
        with torch.no_grad():
            assert torch.allclose(module(x), model(x), atol=1e-5), t


LENGTHS = (2, 96, 3, 7, 8, 9, 16, 17, 40, 57, 95)      # the ends, then multiples of 8 and not


def test_a_program_with_float_size_arithmetic_serves_the_inputs_it_computes_exactly():
    model = ChunkedByCeil()
    result = shapeproof.export_with_report(model, (torch.randn(3, 20, 4),),
                                           dynamic_shapes=({1: Dim("T", min=2, max=96)},))
    assert isinstance(result.program, torch.export.ExportedProgram)
    assert result.regions is None           # the first trace serves the whole range (hintless: n == 1)
    _check_lengths(result.program, model, LENGTHS)


def test_float_size_arithmetic_that_differs_on_the_other_region_keeps_the_programs_apart():
    model = ChunkedByFloor()
    spec = ({1: Dim("T", min=2, max=96)},)
    package = shapeproof.export(model, (torch.randn(3, 20, 4),), dynamic_shapes=spec, split=True)
    assert isinstance(package, SplitProgram) and len(package.programs) == 2
    _check_lengths(package, model, LENGTHS)


class MinimumFromABuffer(torch.nn.Module):
    """A length compared with a buffer (the program reads the buffer and asserts the outcome it was
    traced with, encodec's reflect-pad guard), then pad T to a multiple of 4 only when needed."""

    def __init__(self):
        super().__init__()
        self.register_buffer("shortest", torch.tensor(3))
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x):  # (B, T, 4)
        b, t, _ = x.shape
        if t < self.shortest:
            x = x * 0
        pad = (4 - t % 4) % 4
        if pad:
            x = F_nn.pad(x, (0, 0, 0, pad))
        y = self.proj(x.reshape(b, -1, 16)).reshape(b, -1, 4)
        if pad:
            y = y[:, :t]
        return y


def test_values_read_from_tensor_data_agree_when_both_programs_compute_them_alike():
    """Both programs assert on a value read from a buffer (no term over the input sizes); the padding
    program still serves the sizes that need no padding, since it reads the same value the same way."""
    model = MinimumFromABuffer().eval()
    result = shapeproof.export_with_report(model, (torch.randn(3, 10, 4),),
                                           dynamic_shapes=({1: Dim("T", min=4, max=96)},))
    assert isinstance(result.program, torch.export.ExportedProgram)
    assert result.regions.covered and len(result.regions.regions) == 1 and result.regions.merges
    _check_lengths(result.program, model, (4, 96, 5, 7, 8, 9, 16, 17, 40, 57, 95))


class FrameStack(torch.nn.Module):
    """``if T % 4: pad by 4 - T % 4`` (4, not 0, where ``T % 4 == 0``: a genuine second path), then stack
    four frames, and a single group is scaled (another path for sizes 2 and 3, once padded)."""

    def forward(self, x):  # (B, T, D)
        t = x.shape[1]
        if t % 4 != 0:
            x = F_nn.pad(x, (0, 0, 0, 4 - t % 4))
        x = x.reshape(x.shape[0], x.shape[1] // 4, 4 * x.shape[2])
        if x.shape[1] == 1:
            x = x * 2
        return x


def test_a_guard_that_excludes_a_sliver_of_the_range_costs_no_trace_of_its_own():
    """A trace at T = 2 could win back at most 2 sizes of 1023 for the cost of the export itself: the
    narrowing takes ``T // 4 != 1`` as a restriction, and the error offers the first trace's own fix."""
    spec = ({1: Dim("T", min=2, max=1024)},)
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(FrameStack(), (torch.randn(2, 50, 8),), dynamic_shapes=spec, time_budget=900)
    assert info.value.narrowing is None
    assert sum(len(r.traces) for r in info.value.regions) == 2    # the example's and T = 4's (no padding)
    fixes = info.value.report.combined_fixes
    assert [f.description for f in fixes] == ["T = 4*Dim('T_4', min=1, max=255) + 2"]


def test_the_narrowing_traces_where_every_guard_that_may_merge_is_on_its_other_side_at_once():
    """A trace specializes its shapes to the guards true at its example (``(H // 4) % 4 == 0`` makes every
    later ``H // 4`` a multiple of 4), so the program that may serve the mixed regions (a pad on W but not
    on H) comes from a point where no pad guard holds: every merging guard flips there, not only those
    still in doubt; where they cannot all flip, the doubtful ones do."""
    from shapeproof import solver as F
    from shapeproof.export.search.narrow import _Narrower
    from shapeproof.solver import FloorDiv, Mod, symbol, truth

    h, w = symbol("H"), symbol("W")
    narrower = object.__new__(_Narrower)
    narrower.box, narrower.strategy, narrower.timeout = {h: (8, 96), w: (8, 96)}, "cascade", 2.0
    narrower.nearby, narrower.traces = narrower.box, []
    traced = []
    narrower.trace_at = traced.append
    restriction = F.eq(Mod(w, 4), 0)                                  # the genuine patch pad
    h_window, w_window = F.eq(Mod(FloorDiv(h, 4), 4), 0), F.eq(Mod(FloorDiv(w, 4), 4), 0)
    w_merge = F.eq(Mod(FloorDiv(w, 8), 2), 0)
    narrower._trace_every_side(restriction, [h_window, w_window, w_merge], [h_window])
    point = {symbol(k): v for k, v in traced[-1].items()}
    flipped = [truth(g, point) for g in (restriction, h_window, w_window, w_merge)]
    assert flipped == [True, False, False, False]
    narrower._trace_every_side(restriction, [restriction, h_window], [h_window])      # cannot all flip
    point = {symbol(k): v for k, v in traced[-1].items()}
    assert [truth(g, point) for g in (restriction, h_window)] == [True, False]
    # a window count and a stage-2 pad over H // 16 cannot flip together: the others still do
    h_count, h_stage2 = F.ne(FloorDiv(h, 16), 2), F.eq(Mod(FloorDiv(h, 16), 2), 0)
    narrower._trace_every_side(F.TRUE, [h_window, h_count, h_stage2, w_window], [h_window])
    point = {symbol(k): v for k, v in traced[-1].items()}
    assert [truth(g, point) for g in (h_window, h_count, h_stage2, w_window)] == [False, False, True, False]


class PadThenBlocks(torch.nn.Module):
    """Pads T to a multiple of 4 when needed (a pad that merges), then a genuine path when the padded T
    holds fewer than ten blocks of 4: it serves T <= 36, the padding program T >= 37."""

    def forward(self, x):  # (B, T)
        t = x.shape[-1]
        pad = (4 - t % 4) % 4
        if pad > 0:
            x = F_nn.pad(x, (0, pad))
        blocks = x.view(x.shape[0], -1, 4)
        if blocks.shape[1] // 2 > 4:
            return blocks.sum(-1)
        return blocks.amax(-1)


def test_the_widest_range_reaches_as_far_as_the_regions_already_traced_serve():
    """Traced at T = 64 (no pad), the clamp reads ``(T // 4) // 2 > 4``: T >= 40.  The padding program's
    region, traced already, states it over the padded size (``ceil(T / 4) // 2 > 4``) and holds T = 37..39
    too; the coverage proof shows it, and T >= 37 is offered."""
    model, spec = PadThenBlocks(), ({1: Dim("T", min=8, max=64)},)
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(model, (torch.randn(2, 64),), dynamic_shapes=spec, time_budget=900)
    narrowing = info.value.narrowing
    assert [(f.dim, f.kind, f.min, f.max) for f in narrowing.fixes] == [("T", "range", 37, 64)]
    assert "error.narrowing.program is that program" in str(info.value)
    again = shapeproof.export(model, (torch.randn(2, 64),),
                              dynamic_shapes=shapeproof.suggest_dynamic_shapes(info.value, spec))
    for program in (narrowing.program, again):       # the one the error holds, and the export with its fix
        module = program.module()
        for t in (37, 64, 38, 39, 40, 41, 52, 63):      # the ends, then padded and not
            x = torch.randn(2, t)
            assert torch.equal(module(x), model(x)), t
        with pytest.raises(AssertionError):
            module(torch.randn(2, 36))                    # the other path: rejected, not wrong


def test_a_side_the_group_serves_without_serving_the_first_program_is_not_flipped_with_the_pads():
    """Swin V2 at W = 32 takes one window per row: the group serves that trace, but its program does not
    serve the first trace's (no pads to drop: a special path).  Flipping that guard with the pads put the
    every-side trace on the special path, where it served nothing; only the pads flip now."""
    from types import SimpleNamespace

    from shapeproof import solver as F
    from shapeproof.export.programs.merge import Merge
    from shapeproof.export.search.narrow import _Narrower
    from shapeproof.solver import FloorDiv, Mod, symbol

    h, w = symbol("H"), symbol("W")
    h_pad, w_pad = F.eq(Mod(FloorDiv(h, 4), 4), 0), F.eq(Mod(FloorDiv(w, 4), 4), 0)
    w_windows = F.ne(FloorDiv(w, 32), 1)
    narrower = object.__new__(_Narrower)
    asked_alone = SimpleNamespace(from_branch=True, where=None)        # no site shared with another guard
    narrower.guards = [(SimpleNamespace(fixes=[], guard=asked_alone), g) for g in (h_pad, w_pad, w_windows)]
    sides = {str(g): SimpleNamespace(name=str(g)) for g in (h_pad, w_pad, w_windows)}
    narrower.first = SimpleNamespace(name="first")
    narrower.side_of = lambda guard, others: sides[str(guard)]
    narrower.served = lambda side: True
    narrower.spent = lambda: False
    narrower.programs = SimpleNamespace(serves=lambda a, b: Merge(a is not sides[str(w_windows)]))
    flipped = []
    narrower._trace_every_side = lambda restriction, merging, maybe: flipped.append(merging)
    assert narrower.genuine() == [] and flipped == [[h_pad, w_pad]]


def test_the_widest_range_search_traces_near_the_example_when_the_ranges_reach_far(monkeypatch):
    """A declared range reaching sizes whose inputs would not fit in memory: every trace the search for
    one program makes stays near the example, as the region search's do, and no probe fails on them."""
    from shapeproof.export.search import narrow
    traced = []
    real = narrow.inputs_at

    def recording(model, args, kwargs, sizes):
        traced.append(dict(sizes))
        return real(model, args, kwargs, sizes)

    monkeypatch.setattr(narrow, "inputs_at", recording)
    model = PatchPadThenWindows().eval()
    fixes, _ = _narrowed(model, torch.randn(1, 3, 8, 16), ({3: Dim("W", min=8, max=2**40)},))
    assert traced and all(size <= 16 + 64 for sizes in traced for size in sizes.values()), traced
    # over so wide a range, excluding W // 8 == 1 is not worth a trace (narrow.NOT_WORTH_A_TRACE)
    [fix] = fixes
    assert (fix.dim, fix.kind, fix.modulus, fix.max) == ("W", "multiple", 4, 2**38) and fix.min <= 3


def test_the_guards_of_one_branch_asked_in_every_block_are_settled_by_one_trace():
    """Swin asks its window-pad branch in every block of every stage, one guard per stage and dim: one
    trace where all of them are on their other side settles them when its program merges; a guard of
    another line is still tried alone, and a site whose joint side does not merge falls back to one
    trace per guard."""
    from types import SimpleNamespace

    from shapeproof import solver as F
    from shapeproof.export.programs.merge import Merge
    from shapeproof.export.search.narrow import _Narrower
    from shapeproof.solver import FloorDiv, Mod, symbol

    h, w = symbol("H"), symbol("W")
    stage1 = [F.eq(Mod(FloorDiv(d, 4), 4), 0) for d in (h, w)]
    stage2 = [F.eq(Mod(FloorDiv(d, 8), 4), 0) for d in (h, w)]
    patch = F.eq(Mod(w, 4), 0)

    def asked_at(line):
        frame = SimpleNamespace(filename="modeling.py", lineno=line)
        return SimpleNamespace(fixes=[], guard=SimpleNamespace(from_branch=True, where=SimpleNamespace(
            frame=frame, op=None)))

    def genuine(merging_site: bool):
        narrower = object.__new__(_Narrower)
        narrower.guards = [(asked_at(563), g) for g in stage1 + stage2] + [(asked_at(269), patch)]
        narrower.first = SimpleNamespace(name="first")
        asked = []

        def side_of(guard, others):
            asked.append(guard)
            return SimpleNamespace(name=str(guard), merges=merging_site or guard is not asked[0])
        narrower.side_of = side_of
        narrower.served = lambda side: side.name != str(patch) and side.merges
        narrower.spent = lambda: False
        narrower.programs = SimpleNamespace(serves=lambda a, b: Merge(a.name != str(patch) and a.merges))
        narrower._trace_every_side = lambda restriction, merging, maybe: None
        needed = narrower.genuine()
        found = [g for v, g in narrower.guards if any(v is f for f in needed)]
        return [str(g) for g in found], [str(g) for g in asked]

    site, alone = str(F.disj(*stage1, *stage2)), [str(g) for g in stage1 + stage2]
    assert genuine(merging_site=True) == ([str(patch)], [site, str(patch)])
    assert genuine(merging_site=False) == ([str(patch)], [site] + alone + [str(patch)])


class ShiftedWindows(torch.nn.Module):
    """Swin's shifted block with a branchless pad to multiples of 6: ``x[:, :H, :W].contiguous()`` copies
    only where H was padded, so the program's stride checks name H and W together though they reject
    only the heights that are multiples of 6 (one in six)."""

    def __init__(self, ws=6, c=4, shift=3):
        super().__init__()
        self.ws, self.shift = ws, shift
        self.proj = torch.nn.Linear(c, c)

    def forward(self, x):
        b, h, w, c = x.shape
        x = F_nn.pad(x, (0, 0, 0, (-w) % self.ws, 0, (-h) % self.ws))
        hp, wp = x.shape[1], x.shape[2]
        x = torch.roll(x, (-self.shift, -self.shift), (1, 2))
        x = _unwindows(self.proj(_windows(x, self.ws)), self.ws, b, hp, wp)
        x = torch.roll(x, (self.shift, self.shift), (1, 2))
        return x[:, :h, :w].contiguous()


def test_checks_over_named_dims_that_reject_a_share_of_the_declared_sizes_are_widened_away():
    """torch.export keeps checks over several named dims as input checks; shapeproof widens them with
    one more trace, and over named dims goes on while the traces join one program and the checks would
    still reject at least 1% of the declared sizes (here 1 in 6 heights: the program rejected H = 60)."""
    model = ShiftedWindows()
    spec = ({1: Dim("H", min=32, max=256), 2: Dim("W", min=32, max=256)},)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = shapeproof.export(model, (torch.randn(2, 50, 37, 4),), dynamic_shapes=spec)
    assert not [w for w in caught if "rejects inputs outside its region" in str(w.message)]
    _check_against_eager(program, model, [(32, 32), (60, 121), (61, 120), (144, 144), (50, 37), (256, 255)])
