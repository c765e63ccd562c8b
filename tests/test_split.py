"""Export across shape-dependent branches: region search, merging, SplitProgram, partition checks.

A branch whose sides a trace can run as one ``torch.cond`` is exported with
``cond_branches=False`` here, so that it reaches the region search
(``test_branch_cond`` exports such branches as conds).
"""
from __future__ import annotations

import io
import sys
import warnings
import zipfile

import pytest
import shapeproof
import torch
import torch.nn.functional as F_nn
from shapeproof.export.search.checks import python_guard
from shapeproof.export.search.regions import check_partition
from shapeproof.export.search.split import SplitProgram, load_split
from shapeproof.solver.language.evaluate import truth
from shapeproof.solver.language.parse import parse_condition
from shapeproof.solver.language.terms import symbol
from torch.export import Dim

__shapeproof_user_code__ = True


class PadToMultiple(torch.nn.Module):
    """``if T % 4 != 0: pad and scale``: a true branch on a size (where it is skipped, its body would not be
    an identity, so the trace cannot take it for every input), two programs."""

    def forward(self, x):
        b, t, d = x.shape
        if t % 4 != 0:
            x = F_nn.pad(x, (0, 0, 0, 4 - t % 4)) * 3
        return x.reshape(b, x.shape[1] // 4, 4 * d) * 2


class SameCodeEitherWay(torch.nn.Module):
    """A branch on a size whose two sides lower to the same ATen graph."""

    def forward(self, x):
        if x.shape[1] % 2 == 0:
            y = torch.relu(x)
        else:
            y = F_nn.relu(x)
        return y.sum(dim=1)


class FastPathAtNativeSize(torch.nn.Module):
    """ViT's position embedding: a fast path when the image is square and 8x8 patches (H = W in [8, 11])."""

    def forward(self, x):
        h, w = x.shape[1], x.shape[2]
        if (h // 4) * (w // 4) == 4 and h == w:
            return x * 2
        return x * 3


class BothEven(torch.nn.Module):
    """``if H % 2 == 0 and W % 2 == 0``: two programs, but three traces (the ``and`` short-circuits)."""

    def forward(self, x):
        if x.shape[1] % 2 == 0 and x.shape[2] % 2 == 0:
            return x * 2
        return x + 1


def _eager(model, x):
    with torch.no_grad():
        return model(x)


def test_a_guard_that_only_picks_between_identical_graphs_is_dropped():
    t = Dim("T", min=2, max=40)
    result = shapeproof.export_with_report(SameCodeEitherWay(), (torch.randn(2, 6, 3),),
                                           dynamic_shapes=({1: t},), cond_branches=False)
    assert isinstance(result.program, torch.export.ExportedProgram)
    assert result.regions is not None and result.regions.covered and len(result.regions.regions) == 1
    assert len(result.regions.traces) == 2          # the example (even) and a counterexample (odd)
    module = result.program.module()
    for size in (2, 3, 39, 40):
        x = torch.randn(2, size, 3)
        assert torch.allclose(module(x), _eager(SameCodeEitherWay(), x))


def test_default_export_of_a_real_branch_fails_and_names_the_regions():
    with pytest.raises(shapeproof.ExportError) as info:
        shapeproof.export(PadToMultiple(), (torch.randn(2, 10, 3),),
                          dynamic_shapes=({1: Dim("T", min=2, max=64)},), cond_branches=False)
    text = str(info.value)
    assert "region 1:" in text and "region 2:" in text and "split=True" in text
    assert "test_split.py" in text                   # the user's line of the branch


def test_split_export_covers_every_region_and_matches_eager_at_their_ends(tmp_path):
    model = PadToMultiple()
    result = shapeproof.export_with_report(model, (torch.randn(2, 10, 3),),
                                           dynamic_shapes=({1: Dim("T", min=2, max=64)},), split=True,
                                           cond_branches=False)
    package = result.program
    assert isinstance(package, SplitProgram) and len(package.programs) == 2
    assert check_partition(package.predicates, {symbol("T"): (2, 64)}) == []
    # each region's ends (T % 4 != 0: 2, 3, 63; T % 4 == 0: 4, 64) and every size between
    chosen = set()
    module = package.module()
    for size in range(2, 65):
        x = torch.randn(2, size, 3)
        chosen.add(package.select((x,)))
        assert torch.allclose(module(x), _eager(model, x)), size
    assert chosen == {0, 1}

    path = package.save(tmp_path / "pad.zip")
    loaded = load_split(path)
    for size in (3, 4, 63, 64):
        x = torch.randn(2, size, 3)
        assert torch.allclose(loaded.module()(x), _eager(model, x))
    for size in (1, 65):                             # outside the declared range
        with pytest.raises((ValueError, AssertionError, RuntimeError)):
            loaded.module()(torch.randn(2, size, 3))
    # a member loaded alone with torch.export.load still rejects sizes of the other region
    with zipfile.ZipFile(path) as zf:
        member = torch.export.load(io.BytesIO(zf.read("region_1.pt2")))
    member.module()(torch.randn(2, 8, 3))
    with pytest.raises(AssertionError, match="Guard failed"):
        member.module()(torch.randn(2, 9, 3))


def test_default_keeps_a_multi_dim_branch_as_an_input_check_that_accepts_more_than_torch():
    model = FastPathAtNativeSize()
    spec = ({1: Dim("H", min=4, max=32), 2: Dim("W", min=4, max=32)},)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = shapeproof.export(model, (torch.randn(2, 8, 12),), dynamic_shapes=spec, cond_branches=False)
    assert any("split=True" in str(w.message) for w in caught)
    module = program.module()
    x = torch.randn(2, 4, 16)             # (4//4)*(16//4) == 4 but H != W: torch's program rejects this size
    assert torch.allclose(module(x), _eager(model, x))
    with pytest.raises(AssertionError, match="Guard failed"):
        module(torch.randn(2, 8, 8))      # the fast-path region needs the other program
    package = shapeproof.export(model, (torch.randn(2, 8, 12),), dynamic_shapes=spec, split=True,
                                cond_branches=False)
    for h, w in [(8, 8), (11, 11), (4, 16), (32, 32), (4, 4), (9, 10)]:
        x = torch.randn(2, h, w)
        assert torch.allclose(package.module()(x), _eager(model, x)), (h, w)


def test_widening_past_torchs_input_check_takes_one_more_trace_unless_given_a_budget():
    """The trace at H = W = 8 (the fast path) is needed to cover the ranges but gives another program, so
    it widens nothing without split: by default the search stops after the trace that does widen (the
    check accepts H != W where (H//4)*(W//4) == 4), and says a time_budget may look further."""
    model = FastPathAtNativeSize()
    spec = ({1: Dim("H", min=4, max=32), 2: Dim("W", min=4, max=32)},)
    example = (torch.randn(2, 8, 12),)
    default = shapeproof.export_with_report(model, example, dynamic_shapes=spec, cond_branches=False)
    budgeted = shapeproof.export_with_report(model, example, dynamic_shapes=spec, time_budget=600,
                                             cond_branches=False)
    assert (len(default.regions.traces), len(budgeted.regions.traces)) == (2, 3)
    assert any("time_budget" in w for w in default.warnings)
    assert not any("time_budget" in w for w in budgeted.warnings)
    for result in (default, budgeted):
        module = result.program.module()
        for h, w in [(4, 16), (16, 4), (4, 4), (32, 32), (9, 10), (12, 8)]:
            x = torch.randn(2, h, w)
            assert torch.allclose(module(x), _eager(model, x)), (h, w)
        with pytest.raises(AssertionError, match="Guard failed"):
            module(torch.randn(2, 8, 8))


def test_partition_check_catches_gaps_and_overlaps():
    box = {symbol("T"): (2, 64)}
    good = [parse_condition("T % 4 != 0"), parse_condition("T % 4 == 0")]
    assert check_partition(good, box) == []
    gap = [parse_condition("T % 4 == 1"), parse_condition("T % 4 == 0")]
    problems = check_partition(gap, box)
    assert len(problems) == 1 and problems[0].startswith("not covered")
    overlap = [parse_condition("T % 2 == 0"), parse_condition("T % 4 == 0 or T % 2 == 1")]
    problems = check_partition(overlap, box)
    assert len(problems) == 1 and "overlap" in problems[0]


def test_region_predicates_print_as_python_torch_can_check():
    """The predicate becomes an ExportedProgram input check; torch evaluates it exactly."""
    pred = parse_condition("T % 4 != 0 and CeilDiv(T, 16) > 1 and Max(T, 8) < 60")
    code = python_guard(pred, {symbol("T"): "L['x'].size()[1]"})

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    program = torch.export.export(Double(), (torch.ones(1, 5),),
                                  dynamic_shapes=({1: Dim("T", min=2, max=79)},))
    program._guards_code = [code]
    module = program.module()
    for t in range(2, 80):
        expected = t % 4 != 0 and -(-t // 16) > 1 and max(t, 8) < 60
        try:
            module(torch.ones(1, t))
            accepted = True
        except AssertionError:
            accepted = False
        assert accepted == expected, (t, code)


def test_max_regions_bounds_programs_not_traces():
    spec = ({1: Dim("H", min=2, max=30), 2: Dim("W", min=2, max=30)},)
    example = (torch.randn(1, 4, 6),)
    result = shapeproof.export_with_report(BothEven(), example, dynamic_shapes=spec, split=True,
                                           max_regions=2, cond_branches=False)
    assert len(result.regions.regions) == 2 and len(result.regions.traces) == 3
    package = result.program
    for h, w in [(2, 2), (2, 3), (3, 2), (29, 30), (30, 30), (3, 3)]:
        x = torch.randn(1, h, w)
        assert torch.allclose(package.module()(x), _eager(BothEven(), x))
    with pytest.raises(shapeproof.ExportError, match="max_regions=1") as err:
        shapeproof.export(BothEven(), example, dynamic_shapes=spec, split=True, max_regions=1,
                          cond_branches=False)
    regions = err.value.regions                 # the regions found before the bound, each explained
    assert len(regions) == 2 and all(f"region {i}: " in str(err.value) for i in (1, 2))
    assert all(truth(r.predicate, {symbol(k): v for k, v in t.point.items()}) for r in regions
               for t in r.traces)


class LongBranch(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] > 100:
            return x * 2
        return x + 1


def test_a_trace_at_a_large_size_has_no_symbol_but_the_declared_dims():
    """Inputs of 64 KiB or more are zeros on an anonymous map (``lazy_zeros``); were they views of a flat
    tensor, export would fakify the view's ``_base`` too, and ``x._base.size()[0]`` would become a dim
    of the trace's point and of its program."""
    spec = ({1: Dim("T", min=2, max=300)},)
    result = shapeproof.export_with_report(LongBranch(), (torch.randn(1, 8, 512),), dynamic_shapes=spec,
                                           split=True, cond_branches=False)
    traces = result.regions.traces
    assert len(traces) == 2 and traces[1].point["T"] * 512 * 4 >= 1 << 16
    assert all(set(t.point) == {"T"} for t in traces)
    assert all(len(t.program.range_constraints) == 1 for t in traces)
    for length in (2, 100, 101, 300):
        x = torch.randn(1, length, 512)
        assert torch.equal(result.program.module()(x), LongBranch()(x))


def test_the_next_trace_is_taken_near_the_example_where_a_dim_has_no_upper_end():
    """A Dim.AUTO dim is unbounded: a solver's counterexample there can be inputs of terabytes (ENOMEM in
    the search), so the next trace is taken near the first example where the regions leave room."""
    from types import SimpleNamespace

    from shapeproof.export.search.regions import NEAR, NEAR_SLACK, _next_point, near

    t = symbol("T")
    first = SimpleNamespace(point={"T": 30}, branches=[], region=None)
    assert near({t: (2, None)}, first.point) == {t: (2, max(NEAR * 30, 30 + NEAR_SLACK))}
    assert near({t: (2, 50)}, first.point) == {t: (2, 50)}
    regions = [parse_condition("T % 7 == 2")]
    point = _next_point(first, regions, {t: (2, None)}, {"T": 7 * 10**9}, "cascade", 5.0)
    assert 2 <= point["T"] <= max(NEAR * 30, 30 + NEAR_SLACK) and point["T"] % 7 != 2
    # where the regions cover everything near, the far point is brought as near as it stays outside them
    covering = [parse_condition("T <= 1000")]
    assert _next_point(first, covering, {t: (2, None)}, {"T": 10**6}, "cascade", 5.0) == {"T": 1001}


def test_the_next_trace_crosses_as_few_guards_as_it_can():
    """The solver's point for strided convs' ``(W - 1) // 32 != 0`` over H, W is a corner (2x2, which the
    model cannot trace); the next trace is taken next to the example instead: W = 32, the rest as there."""
    from types import SimpleNamespace

    from shapeproof.export.search.regions import _next_point

    h, w = symbol("H"), symbol("W")
    first = SimpleNamespace(point={"H": 64, "W": 64}, branches=[], region=None)
    regions = [parse_condition("((H - 1) // 32 != 0) and ((W - 1) // 32 != 0) and ((W - 1) // 2 != 0)")]
    box = {h: (2, None), w: (2, None)}
    assert _next_point(first, regions, box, {"H": 2, "W": 2}, "cascade", 5.0) == {"H": 64, "W": 32}


def test_what_a_region_accepts_is_counted_up_to_a_million_sizes_and_estimated_past_them():
    from shapeproof import solver as S
    from shapeproof.export.search.checks import accepted_sizes

    h, w = S.symbol("h"), S.symbol("w")
    region = S.conj(S.le(h, 3), S.ne(S.Mod(w, 3), 1))
    box = {h: (2, 8), w: (2, 8)}
    assert accepted_sizes(region, box) == "10 of 49 (h, w): h in 2..3, w in {2..3, 5..6, 8}"
    assert accepted_sizes(S.eq(S.Mod(w, 2), 0), {w: (2, 20)}) == "10 of 19 (w)"   # a comb: counted only
    assert accepted_sizes(S.gt(h, 9), {h: (2, 8)}) == "0 of 7 (h)"
    # unbounded (Dim.AUTO): counted from the lower end over a window the message names
    assert accepted_sizes(region, {h: (2, 8), w: (2, None)}) == "342 of 1792 (h, w) (over w in 2..257)"
    assert accepted_sizes(region, {h: (2, 8), w: (2, sys.maxsize)}) == "342 of 1792 (h, w) (over w in 2..257)"
    # a million sizes are counted, with the share; past that, estimated on an even grid, which says so, and
    # which a periodic check can fool: none of its sizes has h <= 3 and w % 3 != 1 (0.07% of the box do)
    assert accepted_sizes(region, {h: (1, 1000), w: (1, 1000)}) == "1998 of 1000000 (h, w), under 1%"
    big = {h: (1, 3000), w: (1, 3000)}
    assert accepted_sizes(region, big) == "none of an even grid of 3969 sizes of (h, w)"
    assert accepted_sizes(S.gt(h + w, 3000), big) == "about 49% of (h, w), on an even grid of 3969"
    assert accepted_sizes(S.gt(h, 500), {h: (1, 1000), w: (1, 1000)}) == "500 of 1000 (h): h in 501..1000"
    assert accepted_sizes(S.TRUE, {h: (1, 8)}) is None                        # reads no size
