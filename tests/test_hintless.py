"""Sizes reaching 1 (issue 39's idiom 4): questions answered as torch answers them for sizes without a hint.

A strided stage whose grid is 1 at the bottom of the range makes torch's stride,
view and memory-format code ask ``size == 1``; over backed sizes each answer is a
guard, and every cell of answers a trace.  ``hintless`` answers them as torch does
for a hintless size, ``short_circuits`` answers a comparison no value depends on:
one trace, one program, equal to eager on both sides.
"""
from __future__ import annotations

import sympy
import torch
import torch.nn.functional as F
from torch.export import Dim

import shapeproof
from shapeproof.export.search.traces import trace
from shapeproof.export.settings import ExportSettings
from shapeproof.export.specs import normalize_spec
from shapeproof.tracer.sizes.hintless import _as_if_at_least_two


class SpatialReduction(torch.nn.Module):
    """SegFormer's efficient attention, small: keys from a grid reduced by a stride-8 conv, then normalised
    and reshaped; the reduced grid is 1x1 for sides up to 8."""

    def __init__(self, channels: int = 8, ratio: int = 8):
        super().__init__()
        self.reduce = torch.nn.Conv2d(channels, channels, kernel_size=ratio, stride=ratio, padding=ratio // 2)
        self.norm = torch.nn.LayerNorm(channels)
        self.proj = torch.nn.Linear(channels, channels)

    def forward(self, x):
        b, c, h, w = x.shape
        queries = x.flatten(2).transpose(1, 2)                      # (b, h*w, c)
        keys = self.reduce(x)                                      # (b, c, h // 8 + 1, w // 8 + 1)
        keys = keys.reshape(b, c, -1).permute(0, 2, 1).contiguous()
        keys = self.norm(keys)
        weights = (queries @ keys.transpose(1, 2)).softmax(-1)
        out = self.proj(weights @ keys)
        return out.transpose(1, 2).reshape(b, c, h, w).contiguous()


def _spec():
    return ({2: Dim("H", min=4, max=48), 3: Dim("W", min=4, max=48)},)


def _first_trace(model, x):
    spec = normalize_spec(_spec(), model, (x,), None)
    return trace(model, (x,), None, spec, ExportSettings(timeout=2.0))


def test_a_reduced_grid_reaching_one_is_one_program_from_one_trace():
    torch.manual_seed(0)
    model = SpatialReduction().eval()
    x = torch.randn(2, 8, 24, 40)
    first = _first_trace(model, x)
    assert not first.report.violations and not first.report.restrictions
    rules = {rule for rule, _, _ in first.torch_env.unguarded_answers}
    assert any(rule.startswith("guard_or in ") for rule in rules)
    assert any(rule.startswith("size-oblivious in ") for rule in rules)

    program = shapeproof.export(model, (x,), dynamic_shapes=_spec())
    for h, w in [(4, 4), (7, 8), (4, 48), (9, 9), (16, 17), (48, 48), (24, 40)]:   # grid 1x1 .. 7x7
        sample = torch.randn(2, 8, h, w)
        with torch.no_grad():
            assert torch.allclose(program.module()(sample), model(sample), atol=1e-6), (h, w)


class GlobalResponseNorm(torch.nn.Module):
    """ConvNeXt V2's GRN after a stride-8 stem: a norm over the grid, which is 1x1 for sides below 16.
    torch's meta takes a fast path when every reduced dim is 1; the program keeps the norm operator."""

    def __init__(self, channels: int = 4):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, channels, kernel_size=8, stride=8)

    def forward(self, x):
        y = self.stem(x).permute(0, 2, 3, 1)                          # (b, h // 8, w // 8, c)
        norm = torch.linalg.vector_norm(y, ord=2, dim=(1, 2), keepdim=True)
        return y * (norm / (norm.mean(dim=-1, keepdim=True) + 1e-6))


def test_a_norm_over_a_grid_reaching_one_keeps_every_size():
    torch.manual_seed(0)
    model = GlobalResponseNorm().eval()
    x = torch.randn(2, 3, 40, 64)
    spec = ({2: Dim.AUTO, 3: Dim.AUTO},)
    first = trace(model, (x,), None, normalize_spec(spec, model, (x,), None), ExportSettings(timeout=2.0))
    assert any("vector_norm" in rule for rule, _, _ in first.torch_env.unguarded_answers)
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    for h, w in [(8, 8), (15, 8), (8, 64), (16, 16), (40, 64), (100, 9)]:     # grid 1x1 .. 12x8
        sample = torch.randn(2, 3, h, w)
        with torch.no_grad():
            assert torch.equal(program.module()(sample), model(sample)), (h, w)


class WindowCrop(torch.nn.Module):
    """VitDet's window attention, small: pad to a multiple of the window, partition, merge back, crop the
    pad off and make it contiguous (a copy only where something was padded)."""

    def forward(self, x):                                              # (b, h, w, c)
        b, h, w, c = x.shape
        ph, pw = (4 - h % 4) % 4, (4 - w % 4) % 4
        x = F.pad(x, (0, 0, 0, pw, 0, ph))
        hp, wp = h + ph, w + pw
        windows = x.view(b, hp // 4, 4, wp // 4, 4, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, 4, 4, c) * 2
        x = windows.view(b, hp // 4, wp // 4, 4, 4, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        x = x[:, :h, :w, :].contiguous()
        return x.view(b, h * w, c).cumsum(1)


def test_contiguous_after_cropping_a_pad_keeps_every_size():
    model, x = WindowCrop(), torch.randn(2, 10, 13, 3)
    spec = ({1: Dim.AUTO, 2: Dim.AUTO},)
    first = trace(model, (x,), None, normalize_spec(spec, model, (x,), None), ExportSettings(timeout=2.0))
    assert any(rule.startswith("not contiguous in ") for rule, _, _ in first.torch_env.unguarded_answers)
    program = shapeproof.export(model, (x,), dynamic_shapes=spec)
    for h, w in [(8, 8), (10, 13), (12, 5), (3, 3), (16, 16), (4, 9)]:       # padded or not, in each dim
        sample = torch.randn(2, h, w, 3)
        assert torch.equal(program.module()(sample), model(sample)), (h, w)


class CausalWhenLong(torch.nn.Module):
    """transformers' ``is_causal = q_len > 1 and mask is None and is_causal``, then a branch on the flag."""

    def __init__(self, causal: bool):
        super().__init__()
        self.is_causal = causal

    def forward(self, x):
        q_len, mask = x.shape[1] // 4, None
        is_causal = q_len > 1 and mask is None and self.is_causal
        scores = x[:, :q_len, None] * x[:, None, :q_len]
        if is_causal:
            scores = scores.tril()
        return scores.sum(-1)


def test_a_comparison_no_value_depends_on_is_not_a_guard():
    model, x = CausalWhenLong(causal=False), torch.randn(2, 32)
    program = shapeproof.export(model, (x,), dynamic_shapes=({1: Dim("T", min=4, max=64)},))
    for t in (4, 7, 8, 64):                                 # q_len 1 .. 16
        sample = torch.randn(2, t)
        assert torch.equal(program.module()(sample), model(sample))


class ScaledUnlessShort(torch.nn.Module):
    """``or``'s form: ``scaled = q_len > 1 or self.always`` is True on both sides when ``always`` is."""

    def __init__(self, always: bool):
        super().__init__()
        self.always = always

    def forward(self, x):
        scaled = x.shape[1] // 4 > 1 or self.always
        return x * 0.5 if scaled else x


def test_an_or_whose_value_does_not_depend_on_the_comparison_is_not_a_guard():
    model, x = ScaledUnlessShort(always=True), torch.randn(2, 32)
    program = shapeproof.export(model, (x,), dynamic_shapes=({1: Dim("T", min=4, max=64)},))
    for t in (4, 7, 8, 64):
        sample = torch.randn(2, t)
        assert torch.equal(program.module()(sample), model(sample))
    spec = ({1: Dim("T", min=4, max=64)},)
    first = trace(ScaledUnlessShort(always=False), (x,), None,
                  normalize_spec(spec, ScaledUnlessShort(False), (x,), None), ExportSettings(timeout=2.0))
    assert first.report.violations or first.report.restrictions      # then T // 4 > 1 decides


def test_a_comparison_the_value_depends_on_stays_a_guard():
    model, x = CausalWhenLong(causal=True), torch.randn(2, 32)
    spec = ({1: Dim("T", min=4, max=64)},)
    first = trace(model, (x,), None, normalize_spec(spec, model, (x,), None), ExportSettings(timeout=2.0))
    assert not any(rule == "short circuit" for rule, _, _ in first.torch_env.unguarded_answers)
    assert first.report.violations or first.report.restrictions      # q_len > 1 fails at T in 4..7


def test_size_comparisons_with_one_are_answered_as_if_the_size_were_at_least_two():
    n = sympy.Symbol("n", integer=True)
    size, always = (n - 1) // 8 + 1, (lambda e: True)
    assert _as_if_at_least_two(sympy.Eq(size, 1), always) is False
    assert _as_if_at_least_two(sympy.Ne(size, 1), always) is True
    assert _as_if_at_least_two(sympy.Gt(size, 1), always) is True
    assert _as_if_at_least_two(sympy.Lt(1, size), always) is True
    assert _as_if_at_least_two(sympy.Ge(size, 2), always) is True
    assert _as_if_at_least_two(sympy.Le(size, 1), always) is False
    # a stride per element: 16*size compared with 16 is size compared with 1
    assert _as_if_at_least_two(sympy.Ne(16 * size, 16), always) is True
    assert _as_if_at_least_two(sympy.Lt(16 * size, 32), always) is False
    # no single answer from 2 up, another constant, or a size that may be 0: left to a guard
    assert _as_if_at_least_two(sympy.Gt(size, 2), always) is None
    assert _as_if_at_least_two(sympy.Eq(size, 3), always) is None
    assert _as_if_at_least_two(sympy.Eq(size, 1), lambda e: False) is None


def test_an_assertion_in_the_users_code_is_never_a_layout_question():
    class Checked(torch.nn.Module):
        def forward(self, x):
            torch._check(x.shape[1] // 8 != 1)
            return F.pad(x, (0, 1))

    x = torch.randn(2, 32)
    spec = ({1: Dim("T", min=8, max=64)},)
    first = trace(Checked(), (x,), None, normalize_spec(spec, Checked(), (x,), None),
                  ExportSettings(timeout=2.0))
    assert not first.torch_env.unguarded_answers
    assert first.report.violations or first.report.restrictions      # T // 8 is 1 for T in 8..15
