"""Each identity rule against eager PyTorch, and one step looser than the rule must not merge.

A model with ``if T % 4: <op>`` is traced where the branch is taken (A) and
where it is not (B).  When ``<op>`` is an identity on B's region, A's program
must serve B (and compute eager's values there); when it is not (a pad of 4,
a slice that drops one element...), ``serves`` must refuse, and A's program
indeed computes something else than eager on B's region.  The traces neither merge the branch nor run
it as a cond themselves (``program_level_merges_only``): the programs are what is compared.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F_nn
from shapeproof.export.programs.identities import RULES
from shapeproof.export.programs.merge import serves
from shapeproof.export.search.inputs import input_sizes, inputs_at
from shapeproof.export.settings import ExportSettings
from shapeproof.export.search.traces import set_input_checks, trace
from shapeproof.export.specs import normalize_spec
from torch.export import Dim

__shapeproof_user_code__ = True
pytestmark = pytest.mark.usefixtures("program_level_merges_only")

aten = torch.ops.aten


class Branch(torch.nn.Module):
    """``if T % 4: x = body(x, T)`` with ``T = x.shape[dim]``, then a reduction that weighs every position."""

    def __init__(self, body, dim=1):
        super().__init__()
        self.body, self.dim = body, dim

    def forward(self, x):
        t = x.shape[self.dim]
        if t % 4:
            x = self.body(x, t)
        weights = torch.arange(x.shape[self.dim], dtype=x.dtype).view([-1] + [1] * (x.dim() - 1 - self.dim))
        return (x * weights).mean(self.dim)


def _traces(model, example, spec, *points):
    spec = normalize_spec(spec, model, (example,), None)
    first = trace(model, (example,), None, spec, ExportSettings(timeout=2.0))
    out = [first]
    for p in points:
        args, kwargs = inputs_at(model, (example,), None, input_sizes(first.sizes, {**first.point, **p}))
        out.append(trace(model, args, kwargs, spec, ExportSettings(timeout=2.0)))
    return out


def _eager_agrees(program, model, shapes, make=torch.randn) -> bool:
    """Whether ``program`` (with its trace's own guards dropped) computes eager's values at ``shapes``."""
    module = program.module()
    for shape in shapes:
        x = make(*shape)
        with torch.no_grad():
            want = model(x)
            try:
                got = module(x)
            except RuntimeError:            # the program fails where eager runs: it does not agree
                return False
        same = got.dtype == want.dtype and got.shape == want.shape
        if not (same and torch.allclose(got, want, equal_nan=True)):
            return False
    return True


T_ON_B, T_ON_A = (4, 8, 12, 20, 36, 40), (5, 6, 39)        # T % 4 == 0: the branch is not taken


def _pad_amount(f):
    return lambda x, t: F_nn.pad(x, (0, 0, 0, f(t)))


def _cat_ones(f, dtype=None):
    """``cat([x, ones(b, f(T), d)], 1)``."""
    return lambda x, t: torch.cat([x, torch.ones(x.shape[0], f(t), x.shape[2], dtype=dtype or x.dtype)], 1)


def _nearest(**kwargs):
    return lambda x, t: F_nn.interpolate(x, **kwargs)


# (name, body, merges[, dim]): the exact form of each rule, and forms one step looser that must not merge
CASES = [
    ("pad 0 when T % 4 == 0", _pad_amount(lambda t: (4 - t % 4) % 4), True),
    ("pad 4 when T % 4 == 0", _pad_amount(lambda t: 4 - t % 4), False),
    ("constant_pad_nd on both sides", lambda x, t: torch.constant_pad_nd(x, (0, 0, -t % 4, -t % 4)), True),
    ("slice to T - T % 4", lambda x, t: x[:, :t - t % 4], True),
    ("slice dropping one element", lambda x, t: x[:, :t - t % 4 - 1], False),
    ("slice from T % 4", lambda x, t: x[:, t % 4:], True),
    ("slice from T % 4 + 1", lambda x, t: x[:, t % 4 + 1:], False),
    ("slice with step 2", lambda x, t: x[:, :t - t % 4:2], False),
    ("narrow to T - T % 4", lambda x, t: x.narrow(1, 0, t - t % 4), True),
    ("narrow to T - T % 4 - 1", lambda x, t: x.narrow(1, 0, t - t % 4 - 1), False),
    ("view to its own shape", lambda x, t: x.view(x.shape[0], t - t % 4 + t % 4, x.shape[2]), True),
    ("reshape with -1", lambda x, t: x.reshape(-1, t, x.shape[2]), True),
    ("reshape to another shape of that size", lambda x, t: x.reshape(x.shape[0], x.shape[2], t), False),
    ("expand to its own shape", lambda x, t: x.expand(x.shape[0], t, -1), True),
    ("cat with an empty tensor", _cat_ones(lambda t: (4 - t % 4) % 4), True),
    ("cat with a one-element tensor", _cat_ones(lambda t: 4 - t % 4), False),
    ("cat with an empty float64 tensor", _cat_ones(lambda t: (4 - t % 4) % 4, torch.float64), False),
    ("roll by T % 4", lambda x, t: torch.roll(x, t % 4, 1), True),
    ("roll by T", lambda x, t: torch.roll(x, t, 1), True),
    ("roll by T % 4 + 1", lambda x, t: torch.roll(x, t % 4 + 1, 1), False),
    ("clone", lambda x, t: x.clone(), True),
    ("nearest interpolation to its own size", lambda x, t: _nearest(size=t)(x, t), True, 2),
    ("nearest-exact interpolation to its own size", lambda x, t: _nearest(size=t, mode="nearest-exact")(x, t),
     True, 2),
    ("nearest interpolation by a scale factor of 1", _nearest(scale_factor=1.0), True, 2),
    ("nearest interpolation by 1.1 (the same size at T = 8)", _nearest(scale_factor=1.1), False, 2),
]


def _merge_at_both_sides(body, dim: int):
    """Traces A (T = 5, the branch taken) and B (T = 8), A's program without its own guards, the model."""
    model = Branch(body, dim).eval()
    shape = (lambda t: (2, t, 3)) if dim == 1 else (lambda t: (2, 3, t))
    a, b = _traces(model, torch.randn(*shape(5)), ({dim: Dim("T", min=4, max=40)},), {"T": 8})
    assert (a.point["T"] % 4, b.point["T"] % 4) == (1, 0)
    return model, a, b, shape


@pytest.mark.parametrize("name,body,merges,dim", [c if len(c) == 4 else (*c, 1) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_rule_merges_exactly_when_the_op_is_an_identity_on_the_other_region(name, body, merges, dim):
    model, a, b, shape = _merge_at_both_sides(body, dim)
    answer = serves(a, b, a.ranges)
    assert answer.ok is merges, answer.reason
    set_input_checks(a)
    # what a merge claims, checked in eager: A's program computes the model on B's region too
    assert _eager_agrees(a.program, model, [shape(t) for t in T_ON_B]) is merges
    assert _eager_agrees(a.program, model, [shape(t) for t in T_ON_A])


def test_linear_interpolation_to_its_own_size_is_not_exact_so_does_not_merge():
    """``0 * inf``: bilinear/linear weights of 0 still touch the neighbour (nearest does not)."""
    x = torch.randn(1, 2, 9)
    x[0, 0, 4] = float("inf")
    assert not torch.equal(F_nn.interpolate(x, size=9, mode="linear"), x)
    assert torch.equal(F_nn.interpolate(x, size=9, mode="nearest"), x)
    for mode in ("linear", "nearest"):
        _, a, b, _ = _merge_at_both_sides(lambda x, t, mode=mode: F_nn.interpolate(x, size=t, mode=mode), 2)
        assert serves(a, b, a.ranges).ok is (mode == "nearest")


def test_a_copy_does_not_merge_when_the_graph_writes_in_place():
    """``y = x.clone()`` then ``x.add_(1)``: the clone keeps the old values, the alias sees the new ones."""

    class CloneThenMutate(torch.nn.Module):
        def forward(self, x):
            x = x * 1
            y = x.clone() if x.shape[1] % 4 else x
            x.add_(1)
            return y.mean(1)

    model = CloneThenMutate()
    a, b = _traces(model, torch.randn(2, 5, 3), ({1: Dim("T", min=4, max=40)},), {"T": 8})
    assert not serves(a, b, a.ranges).ok
    set_input_checks(a)
    assert not _eager_agrees(a.program, model, [(2, t, 3) for t in T_ON_B])


def test_a_copy_does_not_merge_where_its_input_is_not_contiguous():
    """``as_strided`` reads memory: a contiguous copy and a transposed view give different values."""

    class StridedRead(torch.nn.Module):
        def forward(self, x):
            b, t, d = x.shape
            y = x.transpose(1, 2)
            if t % 4:
                y = y.contiguous()
            return torch.as_strided(y, (b, d * t), (d * t, 1)) * 1

    model = StridedRead()
    a, b = _traces(model, torch.randn(2, 5, 3), ({1: Dim("T", min=4, max=40)},), {"T": 8})
    assert not serves(a, b, a.ranges).ok
    set_input_checks(a)
    assert not _eager_agrees(a.program, model, [(2, t, 3) for t in T_ON_B])


def test_every_rule_has_a_case_here():
    covered = {"pad", "slice", "view", "cat", "roll", "interpolate", "copy"}
    assert {rule.name for rule in RULES.values()} == covered


# --- the inputs other traces run on ---------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.int64, torch.complex64])
def test_inputs_at_another_point_are_writable_zeros_of_the_examples_dtype(dtype):
    """Only their shapes and dtypes reach a trace, but a program keeps them as its example inputs."""
    example = torch.ones(2, 3, 5, dtype=dtype)
    (big,), _ = inputs_at(torch.nn.Identity(), (example,), None,
                          {"L['input'].size()[0]": 64, "L['input'].size()[2]": 4096})
    (small,), _ = inputs_at(torch.nn.Identity(), (example,), None, {"L['input'].size()[2]": 7})
    for resized, shape in ((big, (64, 3, 4096)), (small, (2, 3, 7))):
        assert resized.shape == shape and resized.dtype == dtype and not resized.any()
        resized[-1, -1, -1] = 1
        assert resized.sum() == 1
    (same,), _ = inputs_at(torch.nn.Identity(), (example,), None, {"L['input'].size()[0]": 2})
    assert same is example                          # a tensor whose shape does not change is the example


def test_a_refused_merge_names_the_condition_that_fails_on_the_other_region_and_where():
    """A's pad branch asks ``T < 10`` (B's path never does): true at B's example T = 8, false at T = 12 of
    B's region, so the merge is refused, and the reason says which condition fails at which point."""

    def pad_below_ten(x, t):
        return F_nn.pad(x, (0, 0, 0, (4 - t % 4) % 4)) if t < 10 else F_nn.pad(x, (0, 0, 0, 4 - t % 4))

    a, b = _traces(Branch(pad_below_ten), torch.randn(2, 5, 3), ({1: Dim("T", min=4, max=40)},), {"T": 8})
    answer = serves(a, b, a.ranges)
    assert not answer.ok
    assert "the serving program's guard T < 10 is false at T=" in answer.reason, answer.reason


def test_a_copy_merges_when_the_graph_writes_in_place_only_to_memory_it_does_not_share():
    """Swin V2's ``ReLU(inplace=True)`` in its position-bias MLP writes a fresh tensor: the ``clone`` (and
    ``contiguous``) of the other branch still merge."""

    class CloneBesideAnInPlaceRelu(torch.nn.Module):
        def forward(self, x):
            bias = torch.relu_(x.sum(1, keepdim=True) - 1)
            y = x.clone() if x.shape[1] % 4 else x
            return y.mean(1, keepdim=True) + bias

    model = CloneBesideAnInPlaceRelu()
    a, b = _traces(model, torch.randn(2, 5, 3), ({1: Dim("T", min=4, max=40)},), {"T": 8})
    assert any(n.target is torch.ops.aten.relu_.default for n in a.program.graph.nodes)
    answer = serves(a, b, a.ranges)
    assert answer.ok, answer.reason
    set_input_checks(a)
    assert _eager_agrees(a.program, model, [(2, t, 3) for t in T_ON_B + T_ON_A])


class ScaledByABuffer(torch.nn.Module):
    """Pads T to a multiple of 4 when needed, then scales by ``k.item() + step``, where ``step`` is 1 on the
    padding side and ``other_step`` on the other: a value read from tensor data, with no term over T."""

    def __init__(self, other_step):
        super().__init__()
        self.other_step = other_step
        self.register_buffer("k", torch.tensor(3))

    def forward(self, x):
        t = x.shape[1]
        if t % 4:
            x = F_nn.pad(x, (0, 0, 0, (4 - t % 4) % 4))
        x = x * (self.k.item() + (1 if t % 4 else self.other_step))
        return x[:, :t].mean(1)


@pytest.mark.parametrize("other_step,merges", [(1, True), (2, False)])
def test_a_value_read_from_tensor_data_merges_only_where_both_programs_compute_it_alike(other_step, merges):
    model = ScaledByABuffer(other_step).eval()
    a, b = _traces(model, torch.randn(2, 5, 3), ({1: Dim("T", min=4, max=40)},), {"T": 8})
    assert any(n.target is aten.item.default for n in a.program.graph.nodes)
    answer = serves(a, b, a.ranges)
    assert answer.ok is merges, answer.reason
    if not merges:
        assert "add (" in answer.reason and "takes 1 where the other program's takes 2" in answer.reason
    set_input_checks(a)
    assert _eager_agrees(a.program, model, [(2, t, 3) for t in T_ON_B]) is merges
