"""Python lists over a size (issue 52, form 4): ``list(range(S))``, sliced, concatenated and measured,
stays symbolic in one trace and matches eager; anything else a list does falls back to Python's list."""
import pytest
import torch
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError


class FunnelPositions(torch.nn.Module):
    """Funnel's relative positions (transformers' ``FunnelAttentionStructure``), from Python lists."""

    def relative(self, pos, stride, pooled, shift=1):
        max_dist = pooled[0] - pos[0] + shift * len(pooled) * stride
        min_dist = pooled[0] - pos[-1]
        return torch.arange(max_dist, min_dist - 1, -stride)

    def forward(self, x):                                       # x: (B, S, D)
        pos = list(range(x.shape[1]))
        out = []
        for block in range(1, 3):
            pooled = [-(2 ** block) + 1] + pos[1:-1][::2]
            out.append(self.relative(pos, 2 ** (block - 1), pooled, shift=2))
            pos = pooled
        return torch.cat(out).float() + x.sum()


class ListToTensor(torch.nn.Module):
    """A list over a size reaching a tensor: the program computes it with ``arange``."""

    def forward(self, x):                                       # x: (B, S)
        ids = list(range(x.shape[1]))
        evens = ids[::2]
        table = torch.tensor([7] + evens + ids[-3:], dtype=torch.float32)
        return x[:, :1] * table[None, :] + len(evens) + evens[-1]


class MutatesTheList(torch.nn.Module):
    """``append`` is not a progression: the list becomes Python's, and torch's specialization follows."""

    def forward(self, x):
        ids = list(range(x.shape[1]))
        ids.append(0)
        return x.sum() + len(ids)


CASES = {
    "funnel_positions": (FunnelPositions, (torch.randn(2, 16, 4),), ({1: Dim("S", min=4, max=96)},),
                         [(torch.randn(2, s, 4),) for s in (4, 5, 6, 7, 16, 33, 95, 96)]),
    "list_to_tensor": (ListToTensor, (torch.randn(2, 10),), ({1: Dim("S", min=3, max=64)},),
                       [(torch.randn(2, s),) for s in (3, 4, 5, 10, 63, 64)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("style", ["named", "auto"])
def test_a_list_over_a_size_stays_symbolic_and_matches_eager(name, style):
    build, args, spec, inputs = CASES[name]
    if style == "auto":             # every size eager runs at, the smallest ones too
        spec = tuple({d: Dim.AUTO for d in dims} for dims in spec)
        inputs = inputs + [tuple(torch.randn(*(2 if d == 1 else n for d, n in enumerate(a.shape)))
                                 for a in example) for example in inputs[:1]]
    model = build()
    result = shapeproof.export_with_report(model, args, dynamic_shapes=spec)
    assert style == "auto" or result.regions is None, "one trace over the declared range"
    for example in inputs:
        assert torch.allclose(result.program.module()(*example), model(*example)), example[0].shape


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_export_specializes_the_size(name):
    build, args, spec, _ = CASES[name]
    with pytest.raises(Exception):
        torch.export.export(build(), args, dynamic_shapes=spec)


def test_a_list_mutated_like_a_list_specializes_as_in_torch():
    with pytest.raises(ExportError, match="S == 10"):
        shapeproof.export(MutatesTheList(), (torch.randn(2, 10),),
                          dynamic_shapes=({1: Dim("S", min=3, max=64)},))


def test_a_size_list_follows_python_semantics_at_every_length():
    """``SizeList`` against Python's lists, with plain ints for the length: indexing (also out of range),
    slicing with clamped bounds and steps, concatenation, ``len`` and the list it becomes."""
    from shapeproof.tracer.sizes.size_lists import SizeList, SizeRange, size_length

    for n in range(0, 9):
        for start, stop, step in ((0, n, 1), (2, n + 3, 2), (n, -1, -1), (1, n, 3)):
            ours, python = SizeRange(start, stop, step), list(range(start, stop, step))
            assert ours == range(start, stop, step) and hash(ours) == hash(range(start, stop, step))
            as_list = SizeList.of(ours)
            assert size_length(ours) == size_length(as_list) == len(python)
            for i in range(-len(python) - 2, len(python) + 2):
                if -len(python) <= i < len(python):
                    assert as_list[i] == python[i]
                else:
                    with pytest.raises(IndexError):
                        as_list[i]
            for s in (None, -3, -1, 0, 1, 2, 10):
                for e in (None, -3, -1, 0, 1, 2, 10):
                    for k in (None, 1, 2, 3):
                        assert SizeList.of(as_list[s:e:k]).python() == python[s:e:k], (n, s, e, k)
            joined = [5, 6] + as_list[1:] + [9]
            assert size_length(joined) == len(python[1:]) + 3
            assert joined.python() == [5, 6] + python[1:] + [9]
            for s in (None, 1, 2, 3, -2):
                for e in (None, -1, 4):
                    assert SizeList.of(joined[s:e]).python() == ([5, 6] + python[1:] + [9])[s:e]


@pytest.mark.parametrize("style", ["named", "auto"])
def test_transformers_funnel_exports_over_its_sequence_length(style):
    """transformers' Funnel builds its relative positions from ``list(range(seq_len))`` (torch: "S only
    works as 16").  Eager runs it from 3 tokens on; the program accepts them all and matches it."""
    transformers = pytest.importorskip("transformers")
    config = transformers.FunnelConfig(vocab_size=100, block_sizes=[1, 1], block_repeats=None,
                                       num_decoder_layers=1, d_model=32, n_head=2, d_head=8, d_inner=37)
    torch.manual_seed(0)
    model = transformers.FunnelModel(config).eval()
    seq = Dim("S", min=3, max=128) if style == "named" else Dim.AUTO
    program = shapeproof.export(model, (), {"input_ids": torch.randint(0, 100, (1, 16))},
                                dynamic_shapes={"input_ids": {1: seq}})
    for n in (3, 4, 5, 9, 16, 33, 128):
        ids = torch.randint(0, 100, (1, n))
        got, want = program.module()(input_ids=ids), model(input_ids=ids)
        assert torch.allclose(got.last_hidden_state, want.last_hidden_state, atol=1e-5), n
