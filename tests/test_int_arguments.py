"""Sizes given where torch's schema takes a plain int (issue 52, form 3): ``linspace`` and cosine windows
computed by ops that take SymInts, equal to torch's kernels bit for bit; anything else specializes as in
torch, and the error names the op."""
import random

import pytest
import torch
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError
from shapeproof.tracer.sizes.int_arguments import cosine_window, linspace_float32

ENDS = [(-1, 1), (0, 1), (0.5, 23.5), (2.5, -5), (-3.14159, 3.14159), (1e-3, 7.5), (0, 0)]


def test_linspace_in_float32_equals_the_kernel_bit_for_bit():
    rng = random.Random(0)
    ends = ENDS + [(rng.uniform(-100, 100), rng.uniform(-100, 100)) for _ in range(6)]
    sizes = [*range(0, 1100), 4095, 4096, 4097, 32767, 32768, 40000]
    for start, end in ends:
        for n in sizes:
            assert torch.equal(linspace_float32(start, end, n), torch.linspace(start, end, n)), \
                (start, end, n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hann_and_hamming_windows_equal_the_kernels_bit_for_bit(dtype):
    for n in range(0, 1100):
        for periodic in (True, False):
            assert torch.equal(cosine_window(n, periodic, 0.5, 0.5, dtype),
                               torch.hann_window(n, periodic, dtype=dtype)), (n, periodic)
            assert torch.equal(cosine_window(n, periodic, 0.54, 0.46, dtype),
                               torch.hamming_window(n, periodic, dtype=dtype)), (n, periodic)


class FourierFeatures(torch.nn.Module):
    """Position features over the input's own grid (Fourier features, DETR's reference points)."""

    def forward(self, x):                                          # x: (B, C, H, W)
        h, w = x.shape[2], x.shape[3]
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, steps=h), torch.linspace(0.5, w - 0.5, w),
                                indexing="ij")
        bands = torch.stack([torch.sin(3.0 * ys), torch.cos(5.0 * xs)])
        return x[:, :2] + bands + torch.hann_window(w)


SPEC = ({2: Dim("H", min=2, max=96), 3: Dim("W", min=2, max=96)},)


@pytest.mark.parametrize("spec", [SPEC, ({2: Dim.AUTO, 3: Dim.AUTO},)], ids=["named", "auto"])
def test_a_model_with_linspace_over_its_sizes_exports_and_matches_eager_bit_for_bit(spec):
    model = FourierFeatures()
    program = shapeproof.export(model, (torch.randn(1, 3, 24, 20),), dynamic_shapes=spec)
    for h in (2, 3, 24, 47, 96):
        for w in (2, 5, 20, 96):
            x = torch.randn(1, 3, h, w)
            assert torch.equal(program.module()(x), model(x)), (h, w)


def test_torch_export_specializes_the_size():
    with pytest.raises(Exception, match="specialized|24"):
        torch.export.export(FourierFeatures(), (torch.randn(1, 3, 24, 20),), dynamic_shapes=SPEC)


class Float64Linspace(torch.nn.Module):
    def forward(self, x):
        return x + torch.linspace(-1, 1, steps=x.shape[1], dtype=torch.float64)


def test_without_an_exact_formulation_the_error_names_the_op():
    with pytest.raises(ExportError) as caught:
        shapeproof.export(Float64Linspace(), (torch.randn(2, 24, dtype=torch.float64),),
                          dynamic_shapes=({1: Dim("H", min=2, max=64)},))
    message = str(caught.value)
    assert "H == 24" in message and "torch.linspace: `steps` is a plain int" in message
    assert "float64" in message
