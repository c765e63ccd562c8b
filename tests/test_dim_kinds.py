"""torch.export's Dim kinds, followed by shapeproof.export (torch's docs and export tests are the spec).

``torch/export/dynamic_shapes.py``: "Dim.AUTO ... export will automatically
infer the remaining constraints on min/max ranges and relationships between
dimensions"; "DYNAMIC means dynamic, will error out if specialized"; a named
``Dim`` raises when tracing needs less than its range.  torch 2.13 keeps
relations between several named dims (``N <= M``, ``a*b == c*d``) as input
checks.  Each test exports with both exporters where torch's behaviour is the
reference, and checks the program against eager PyTorch.
"""
import math
import operator
import warnings

import pytest
import torch
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError

from plain_asserts import AssertWidth, PositiveMax

AUTO, DYNAMIC = Dim.AUTO, Dim.DYNAMIC


def _torch(model, args, spec):
    return torch.export.export(model, args, dynamic_shapes=spec, strict=False)


def _rejects(program, *args) -> bool:
    try:
        program.module()(*args)
    except Exception:   # torch raises AssertionError/RuntimeError for a failed input check
        return True
    return False


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_auto_dims_adopt_the_equalities_tracing_needs():
    """torch exports x + y under Dim.AUTO with x.size(i) == y.size(i) as input checks; so does shapeproof."""
    spec = {"x": {0: AUTO, 1: AUTO}, "y": {0: AUTO, 1: AUTO}}
    args = (torch.randn(3, 4), torch.randn(3, 4))
    ours, theirs = shapeproof.export(Add(), args, dynamic_shapes=spec), _torch(Add(), args, spec)
    assert sorted(ours._guards_code) == sorted(theirs._guards_code)
    x, y = torch.randn(5, 7), torch.randn(5, 7)
    assert torch.equal(ours.module()(x, y), x + y)
    assert _rejects(ours, torch.randn(5, 7), torch.randn(5, 6))


def test_a_named_dim_related_to_an_auto_dim_keeps_its_range():
    """x has a named Dim, y is AUTO: y adopts y.size(0) == x.size(0) + 4 and x keeps its whole range
    (torch 2.13 raises here; exporting is wider and sound, the program checks the relation)."""
    class Shifted(torch.nn.Module):
        def forward(self, x, y):
            return x + y[4:]

    program = shapeproof.export(Shifted(), (torch.randn(3), torch.randn(7)),
                                dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}, "y": {0: AUTO}})
    for n in (2, 17, 64):
        x, y = torch.randn(n), torch.randn(n + 4)
        assert torch.equal(program.module()(x, y), x + y[4:])
    assert _rejects(program, torch.randn(5), torch.randn(10))


def test_auto_dim_specialized_by_the_code_becomes_static():
    spec = {"x": {0: AUTO}, "y": {0: AUTO, 1: AUTO}}
    args = (torch.randn(3, 4), torch.randn(3, 4))
    ours = shapeproof.export(AssertWidth(), args, dynamic_shapes=spec)
    assert ours._guards_code == _torch(AssertWidth(), args, spec)._guards_code == ["L['y'].size()[1] == 4"]
    x, y = torch.randn(6, 4), torch.randn(9, 4)
    assert torch.equal(ours.module()(x, y), AssertWidth()(x, y))


def test_dynamic_dim_specialized_by_the_code_is_an_error_naming_the_dim():
    """Docs: Dim.DYNAMIC "will error out if specialized"; torch raises UserError, shapeproof ExportError."""
    spec = {"x": {0: AUTO}, "y": {0: AUTO, 1: DYNAMIC}}
    args = (torch.randn(3, 4), torch.randn(3, 4))
    with pytest.raises(torch._dynamo.exc.UserError):
        _torch(AssertWidth(), args, spec)
    with pytest.raises(ExportError) as err:
        shapeproof.export(AssertWidth(), args, dynamic_shapes=spec)
    text = str(err.value)
    assert "y.size(1)" in text and "Dim.DYNAMIC" in text and "assert y.shape[1] == 4" in text
    assert "split=True" not in text      # an assert has no other branch to export


def test_the_error_is_the_user_error_torch_export_raises_there():
    """A caller's ``except torch._dynamo.exc.UserError``, written for torch.export, still catches it."""
    spec = {"x": {0: AUTO}, "y": {0: AUTO, 1: DYNAMIC}}
    args = (torch.randn(3, 4), torch.randn(3, 4))
    with pytest.raises(torch._dynamo.exc.UserError) as theirs:
        _torch(AssertWidth(), args, spec)
    with pytest.raises(torch._dynamo.exc.UserError) as ours:
        shapeproof.export(AssertWidth(), args, dynamic_shapes=spec)
    assert isinstance(ours.value, ExportError)
    violation = torch._dynamo.exc.UserErrorType.CONSTRAINT_VIOLATION
    assert ours.value.error_type is theirs.value.error_type is violation


class Parity(torch.nn.Module):
    def forward(self, x):
        if x.size(0) % 2 == 0:
            return x * 2
        return x + 1


def test_without_conds_a_branch_on_an_auto_dim_stays_an_input_check_with_a_warning():
    """ExportDB dynamic_shape_if_guard under Dim.AUTO: torch keeps the branch's guard as an input check (as
    shapeproof does with ``cond_branches=False``; by default the branch is a cond: below)."""
    spec = {"x": {0: AUTO}}
    theirs = _torch(Parity(), (torch.randn(4),), spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = shapeproof.export(Parity(), (torch.randn(4),), dynamic_shapes=spec, cond_branches=False)
    assert ours._guards_code == theirs._guards_code
    assert any("split=True" in str(w.message) and "x.size(0) % 2" in str(w.message) for w in caught)
    x = torch.randn(10)
    assert torch.equal(ours.module()(x), x * 2) and _rejects(ours, torch.randn(7))


def test_split_covers_both_sides_of_a_branch_on_an_auto_dim():
    program = shapeproof.export(Parity(), (torch.randn(4),), dynamic_shapes={"x": {0: AUTO}}, split=True)
    for n in (2, 3, 8, 11):
        x = torch.randn(n)
        assert torch.equal(program.module()(x), Parity()(x))


def test_without_conds_a_branch_on_a_named_dim_is_still_an_error():
    """A named Dim promises its range (torch raises "Constraints violated")."""
    with pytest.raises(ExportError) as err:
        shapeproof.export(Parity(), (torch.randn(4),), dynamic_shapes={"x": {0: Dim("n")}},
                          cond_branches=False)
    assert "x.size(0) % 2" in str(err.value)


@pytest.mark.parametrize("spec", [{"x": {0: AUTO}}, {"x": {0: Dim("n")}}], ids=["auto", "named"])
def test_a_branch_that_returns_early_is_a_cond_over_every_size(spec):
    """The same branch (it returns early) runs as a cond: one program over the whole range, no warning, no
    input check, eager's answer on both sides."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program = shapeproof.export(Parity(), (torch.randn(4),), dynamic_shapes=spec)
    assert any(n.target is torch.ops.higher_order.cond for n in program.graph.nodes)
    for n in (2, 3, 8, 11, 1000):
        x = torch.randn(n)
        assert torch.equal(program.module()(x), Parity()(x))


def test_two_named_dims_that_must_be_equal_are_an_error_with_the_shared_dim_fix():
    """torch: "The values of dy ... must always be equal to dx"; shapeproof says which Dim to share."""
    with pytest.raises(ExportError) as err:
        shapeproof.export(Add(), (torch.randn(3), torch.randn(3)),
                          dynamic_shapes={"x": {0: Dim("dx")}, "y": {0: Dim("dy")}})
    assert any(f.kind == "equal" for ex in err.value.violations for f in ex.fixes)


class Flatten(torch.nn.Module):
    def forward(self, x, y):
        return x.reshape(-1) + y.reshape(-1)


def test_a_relation_between_named_dims_is_an_input_check_like_torchs():
    """torch keeps dx0*dx1 == dy0*dy1 as an input check; so does shapeproof, and says so."""
    spec = {"x": {0: Dim("a"), 1: Dim("b")}, "y": {0: Dim("c"), 1: Dim("d")}}
    args = (torch.randn(3, 4), torch.randn(4, 3))
    _torch(Flatten(), args, spec)
    with pytest.warns(UserWarning, match="relations between named dims"):
        ours = shapeproof.export(Flatten(), args, dynamic_shapes=spec)
    x, y = torch.randn(6, 5), torch.randn(10, 3)
    assert torch.equal(ours.module()(x, y), Flatten()(x, y))
    assert _rejects(ours, torch.randn(6, 5), torch.randn(4, 5))


class FlattenInto(torch.nn.Module):
    def forward(self, x, z):
        return x.reshape(-1) + z


class ViewPairs(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 2)


class SquaresBranch(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 if x.size(0) ** 2 - y.size(0) ** 2 >= 4 else x * 3


def test_a_relation_that_excludes_sizes_of_one_named_dim_is_still_an_input_check():
    """torch keeps a*b == c, x**2 - y**2 >= 4 and (a*b) // 2 != a as input checks although no (a, b) fits a
    prime c, no y fits x = 2 and no a fits b = 2: it raises only on guards of one dim, and no op asks these
    dim by dim (as a view that splits T by T // 2 does)."""
    cases = ((FlattenInto(), (torch.randn(6, 8), torch.randn(48)),
              {"x": (Dim("a", min=2), Dim("b", min=2)), "z": (Dim("c", min=4),)}),
             (SquaresBranch(), (torch.randn(5), torch.randn(3)), {"x": (Dim("dx"),), "y": (Dim("dy"),)}),
             (ViewPairs(), (torch.randn(4, 6),), {"x": (Dim("a"), Dim("b"))}))
    for model, args, spec in cases:
        _torch(model, args, spec)
        with pytest.warns(UserWarning, match="(checks these relations|input checks)"):
            ours = shapeproof.export(model, args, dynamic_shapes=spec)
        assert torch.equal(ours.module()(*args), model(*args))
    flat = shapeproof.export(FlattenInto(), cases[0][1], dynamic_shapes=cases[0][2])
    x, z = torch.randn(5, 8), torch.randn(40)
    assert torch.equal(flat.module()(x, z), FlattenInto()(x, z))
    assert _rejects(flat, torch.randn(5, 8), torch.randn(41))


class AfterFirst(torch.nn.Module):
    def forward(self, u, w):
        return u[1:] + w


def test_the_range_of_a_dynamic_dim_tied_to_a_named_one_stays_an_input_check():
    """``u[1:] + w`` ties the Dim.DYNAMIC ``w`` to ``u - 1``, and torch's 0/1 rule (``w >= 2``) reads
    ``u - 1 >= 2``, a guard on the named ``u`` alone: torch, which roots the pair at ``w``, keeps it as an
    input check, and so does shapeproof."""
    spec = {"u": (Dim("u"),), "w": (DYNAMIC,)}
    args = (torch.randn(5), torch.randn(4))
    theirs = _torch(AfterFirst(), args, spec)
    ours = shapeproof.export(AfterFirst(), args, dynamic_shapes=spec)
    for n in (3, 9):
        u, w = torch.randn(n), torch.randn(n - 1)
        assert torch.equal(ours.module()(u, w), AfterFirst()(u, w))
    assert _rejects(theirs, torch.randn(2), torch.randn(1)) and _rejects(ours, torch.randn(2), torch.randn(1))


class Pool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool1d(x, 2)


def test_an_auto_program_is_at_least_as_wide_as_torchs():
    """torch's program for avg_pool1d under Dim.AUTO rejects short inputs; shapeproof's traces again there
    and accepts them (same graph)."""
    spec = ({2: AUTO},)
    ours = shapeproof.export(Pool(), (torch.randn(2, 3, 40),), dynamic_shapes=spec)
    theirs = _torch(Pool(), (torch.randn(2, 3, 40),), spec)
    for t in (2, 3, 41, 1000):
        x = torch.randn(2, 3, t)
        if not _rejects(theirs, x):
            assert not _rejects(ours, x)
        assert torch.equal(ours.module()(x), Pool()(x))


class BatchedMatmul(torch.nn.Module):
    def forward(self, a, b, c):
        return torch.baddbmm(a, b, c)


def test_backed_size_oblivious_keeps_an_example_of_one_dynamic():
    """torch's baddbmm export test sets backed_size_oblivious: a Dim whose example is 1 is not specialized."""
    batch = Dim("batch")
    spec = {"a": {0: batch}, "b": {0: batch}, "c": {0: batch}}
    args = (torch.randn(1, 3, 5), torch.randn(1, 3, 4), torch.randn(1, 4, 5))
    with torch.fx.experimental._config.patch(backed_size_oblivious=True):
        _torch(BatchedMatmul(), args, spec)
        program = shapeproof.export(BatchedMatmul(), args, dynamic_shapes=spec)
    for n in (1, 5):
        a, b, c = torch.randn(n, 3, 5), torch.randn(n, 3, 4), torch.randn(n, 4, 5)
        torch.testing.assert_close(program.module()(a, b, c), torch.baddbmm(a, b, c))
    # without the switch torch specializes the named Dim (an error); shapeproof traces at another batch and
    # checks the program at 1 (test_zero_one)
    program = shapeproof.export(BatchedMatmul(), args, dynamic_shapes=spec)
    for n in (1, 5):
        a, b, c = torch.randn(n, 3, 5), torch.randn(n, 3, 4), torch.randn(n, 4, 5)
        torch.testing.assert_close(program.module()(a, b, c), torch.baddbmm(a, b, c))


def test_an_assert_on_data_becomes_a_runtime_assert():
    """torch turns a Python ``assert`` on an unbacked value into a runtime assertion of the program."""
    program = shapeproof.export(PositiveMax(), (torch.randn(3), torch.tensor([1, 2])))
    x = torch.randn(3)
    assert torch.equal(program.module()(x, torch.tensor([3, 1])), x + 1)
    assert _rejects(program, x, torch.tensor([0, -1]))


class Shift(torch.nn.Module):
    def forward(self, x, y):
        return x + y[1:]


def test_two_named_dims_related_by_an_offset_get_the_derived_dim_fix_that_works():
    """torch suggests ``dy = dx + 1``; shapeproof offers the same verified fix, and it exports."""
    spec = {"x": {0: Dim("dx")}, "y": {0: Dim("dy")}}
    args = (torch.randn(5), torch.randn(6))
    with pytest.raises(ExportError) as err:
        shapeproof.export(Shift(), args, dynamic_shapes=spec)
    (tie,) = [f for ex in err.value.violations for f in ex.fixes if f.kind == "equal"]
    assert (tie.dim, tie.other, tie.scale, tie.offset) == ("dy", "dx", 1, 1)
    program = shapeproof.export(Shift(), args,
                                dynamic_shapes=shapeproof.suggest_dynamic_shapes(err.value, spec))
    x, y = torch.randn(9), torch.randn(10)
    assert torch.equal(program.module()(x, y), x + y[1:])


def test_export_takes_torch_exports_keyword_arguments():
    """A drop-in takes torch.export.export's signature: strict, preserve_module_call_signature and
    prefer_deferred_runtime_asserts_over_guards reach torch (strict=True is traced non-strict, with a
    warning)."""
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.inner(x).relu()

    args, spec = (torch.randn(3, 4),), {"x": {0: AUTO}}
    with pytest.warns(UserWarning, match="non-strict"):
        program = shapeproof.export(Outer(), args, dynamic_shapes=spec, strict=True,
                                    preserve_module_call_signature=("inner",),
                                    prefer_deferred_runtime_asserts_over_guards=True)
    preserved = {e.fqn: e.signature is not None for e in program.module_call_graph}
    assert preserved == {"": True, "inner": True}      # without the option, inner has no signature


class Twice(torch.nn.Module):
    def forward(self, x, y):
        return x + y[1:]


@pytest.mark.parametrize("order", ["root first", "derived first"])
def test_an_example_that_breaks_a_derived_dim_gets_torchs_message(order):
    """torch: "Expected input L['y'].size()[0] to be equal to 2*dimx, where dimx = 5, but got 6" (not a
    fake-tensor broadcast error from deep in the trace)."""
    dimx = Dim("dimx", min=3, max=6)
    if order == "root first":
        model, args, spec = Twice(), (torch.randn(5), torch.randn(6)), ({0: dimx}, {0: 2 * dimx})
    else:
        class Swapped(torch.nn.Module):
            def forward(self, y, x):
                return x + y[1:]
        model, args, spec = Swapped(), (torch.randn(6), torch.randn(5)), ({0: 2 * dimx}, {0: dimx})
    with pytest.raises(torch._dynamo.exc.UserError) as theirs:
        _torch(model, args, spec)
    with pytest.raises(torch._dynamo.exc.UserError) as ours:
        shapeproof.export(model, args, dynamic_shapes=spec)
    assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]
    assert "to be equal to 2*dimx, where dimx = 5, but got 6" in str(ours.value)


class IntSize(torch.nn.Module):
    def forward(self, x):
        size = (operator.index(x.shape[-2]), operator.index(x.shape[-1]))
        return torch.nn.functional.interpolate(x, size=size, mode="bilinear")


def test_a_dynamic_dim_that_the_code_specializes_is_an_error_with_the_fix():
    """``operator.index(x.shape[-1])`` asks for a real int, which specializes the dim; under Dim.DYNAMIC
    torch raises and says to use Dim.STATIC or Dim.AUTO; shapeproof names the dim, the line and the fix."""
    spec = {"x": {2: DYNAMIC, 3: DYNAMIC}}
    with pytest.raises(ExportError) as err:
        shapeproof.export(IntSize(), (torch.randn(1, 3, 8, 8),), dynamic_shapes=spec)
    text = str(err.value)
    assert "x.size(3)" in text and "Dim.DYNAMIC" in text and "operator.index(x.shape[-2])" in text
    assert any(f.kind == "static" for ex in err.value.violations for f in ex.fixes)


@pytest.mark.parametrize("spec", [{"x": {2: DYNAMIC, 3: DYNAMIC}}, ({2: DYNAMIC, 3: DYNAMIC},),
                                  [[None, None, DYNAMIC, DYNAMIC]]], ids=["by name", "positional", "lists"])
def test_the_suggested_spec_makes_the_dynamic_dims_the_code_fixes_static_and_exports(spec):
    example = torch.randn(1, 3, 8, 8)
    with pytest.raises(ExportError) as err:
        shapeproof.export(IntSize(), (example,), dynamic_shapes=spec)
    fixed = shapeproof.suggest_dynamic_shapes(err.value, spec)
    entry = fixed["x"] if isinstance(fixed, dict) else fixed[0]
    static = (lambda d: d not in entry) if isinstance(entry, dict) else (lambda d: entry[d] is None)
    assert static(2) and static(3)                          # operator.index(...) specializes both
    assert spec != fixed                                    # the caller's spec is left as it was
    program = shapeproof.export(IntSize(), (example,), dynamic_shapes=fixed)
    assert torch.allclose(program.module()(example), IntSize()(example))


class IntOfSize(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.interpolate(x, size=(int(x.shape[-2]), int(x.shape[-1])), mode="bilinear")


def test_int_of_a_size_keeps_it_dynamic():
    """torch specializes ``int(x.shape[-1])`` (Python's ``int`` of a SymInt, ``__int__``) and raises under
    Dim.DYNAMIC; in shapeproof's traces ``int`` of a size is the size (``symbolic_casts``), as it is in eager,
    so the program serves every size."""
    spec = {"x": {2: DYNAMIC, 3: DYNAMIC}}
    with pytest.raises(torch._dynamo.exc.UserError):
        _torch(IntOfSize(), (torch.randn(1, 3, 8, 8),), spec)
    program = shapeproof.export(IntOfSize(), (torch.randn(1, 3, 8, 8),), dynamic_shapes=spec)
    for h, w in ((8, 8), (3, 17), (30, 5)):
        x = torch.randn(1, 3, h, w)
        assert torch.equal(program.module()(x), IntOfSize()(x))


class IntThroughFloats(torch.nn.Module):
    def forward(self, x):
        even = int(math.ceil(x.shape[-1] / 2) * 2)
        return torch.nn.functional.pad(x, (0, even - x.shape[-1]))


def test_int_of_a_size_computed_through_floats_specializes_as_in_torch():
    """Kept symbolic, such a size would bring float arithmetic to every later question (symbolic_casts):
    ``int`` specializes it as torch does, and both programs check it on their inputs alike."""
    spec, example = {"x": {3: DYNAMIC}}, (torch.randn(1, 3, 8, 9),)
    theirs = _torch(IntThroughFloats(), example, spec)
    ours = shapeproof.export(IntThroughFloats(), example, dynamic_shapes=spec)
    widths = range(2, 21)
    accepted = [w for w in widths if not _rejects(ours, torch.randn(1, 3, 8, w))]
    assert accepted == [w for w in widths if not _rejects(theirs, torch.randn(1, 3, 8, w))] == [9, 10]


def test_a_time_budget_stops_the_region_search():
    """issue 17: a caller bounds the whole search; with no time left no second trace starts."""
    with pytest.raises(ExportError) as err:
        shapeproof.export(Parity(), (torch.randn(4),), dynamic_shapes={"x": {0: Dim("n")}}, split=True,
                          time_budget=0.0, cond_branches=False)
    assert "time budget ran out after 1 traces" in str(err.value)
    program = shapeproof.export(Parity(), (torch.randn(4),), dynamic_shapes={"x": {0: Dim("n")}}, split=True,
                                cond_branches=False)
    assert len(program.programs) == 2


class UnshuffleConv(torch.nn.Module):
    """pixel_unshuffle(2) then a conv that takes 12 channels: only C = 3 works, which torch reads off no
    single guard (the conv's check is ``C*(H//(H//2))*(W//(W//2)) == 12``, with ``H//2 != 1``...)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(12, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(torch.nn.functional.pixel_unshuffle(x, 2))


def test_a_dynamic_dim_that_checks_over_several_dims_leave_one_size_exports_like_torch_with_a_warning():
    """torch.export exports this without a word (no single guard says ``C == 3``); shapeproof exports the
    same program (both reject C = 4) and warns that its checks accept one size of the Dim.DYNAMIC dim."""
    model = UnshuffleConv().eval()
    spec = {"x": {0: DYNAMIC, 1: DYNAMIC, 2: DYNAMIC, 3: DYNAMIC}}
    args = (torch.randn(2, 3, 8, 12),)
    theirs = _torch(model, args, spec)
    with pytest.warns(UserWarning, match=r"accept one size only of these Dim.DYNAMIC.*: x.size\(1\) = 3;"):
        ours = shapeproof.export(model, args, dynamic_shapes=spec)
    x = torch.randn(3, 3, 6, 10)
    with torch.no_grad():
        assert torch.allclose(ours.module()(x), model(x), atol=1e-6)
    for program in (theirs, ours):
        with pytest.raises(Exception):
            program.module()(torch.randn(3, 4, 6, 10))


def test_no_warning_when_the_checks_leave_the_dynamic_dim_more_than_one_size():
    """The same checks with the channel dim static: nothing is pinned, and nothing is said of it."""
    model = UnshuffleConv().eval()
    spec = {"x": {0: DYNAMIC, 2: DYNAMIC, 3: DYNAMIC}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shapeproof.export(model, (torch.randn(2, 3, 8, 12),), dynamic_shapes=spec)
    assert not [w for w in caught if "accept one size only" in str(w.message)]


class CheckedSize(torch.nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def forward(self, x):
        torch._check(x.shape[0] == self.size)
        return x * 2


def test_a_dynamic_dim_that_must_be_one_under_backed_size_oblivious_exports_like_torch_with_a_warning():
    """torch lets a Dim.DYNAMIC dim become 0 or 1 (its constraint never complains of those) and checks it
    on the inputs; shapeproof exports the same program, and says that it accepts that one size."""
    spec = {"x": (DYNAMIC, None)}
    args = (torch.randn(1, 4),)
    with torch.fx.experimental._config.patch(backed_size_oblivious=True):
        theirs = _torch(CheckedSize(1), args, spec)
        with pytest.warns(UserWarning, match=r"accept one size only of these Dim.DYNAMIC.* x.size\(0\) = 1;"):
            ours = shapeproof.export(CheckedSize(1), args, dynamic_shapes=spec)
    for program in (theirs, ours):
        assert torch.equal(program.module()(args[0]), args[0] * 2)
        assert _rejects(program, torch.randn(2, 4))


def test_a_dynamic_dim_that_must_be_another_single_size_is_still_an_error():
    """The same check of size 3: torch's Dim.DYNAMIC error, and shapeproof's naming the dim."""
    spec = {"x": (DYNAMIC, None)}
    args = (torch.randn(3, 4),)
    with torch.fx.experimental._config.patch(backed_size_oblivious=True):
        with pytest.raises(Exception, match="Constraints violated"):
            _torch(CheckedSize(3), args, spec)
        with pytest.raises(ExportError, match=r"x.size\(0\)"):
            shapeproof.export(CheckedSize(3), args, dynamic_shapes=spec)


class AddShifted(torch.nn.Module):
    def forward(self, x, y):
        return x + y[1:]


def test_a_dim_and_its_derived_dim_specialized_by_an_example_of_one_are_one_requirement():
    """torch: "Constraints violated (dx, dx + 1)" with the fix ``dx = 1``; shapeproof names the Dim once,
    with the input that gave it, and the same fix."""
    dx = Dim("dx", min=1, max=4)
    args, spec = (torch.randn(1, 2), torch.randn(2, 2)), ({0: dx}, {0: dx + 1})
    with pytest.raises(Exception, match=r"dx = 1"):
        _torch(AddShifted(), args, spec)
    with pytest.raises(ExportError) as caught:
        shapeproof.export(AddShifted(), args, dynamic_shapes=spec)
    message = str(caught.value)
    assert "1 requirement(s)" in message and message.count("is declared dynamic") == 1
    assert "dx (x.size(0) = 1) is declared dynamic [1, 4]" in message and "(dx = 1)" in message


class HalfView(torch.nn.Module):
    def forward(self, x):
        return x.view(x.shape[0] // 2, -1) * 2


class BranchOnSize(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x * 2
        return x + 1


def _asserts(program) -> int:
    return sum(1 for n in program.graph.nodes if n.target is torch.ops.aten._assert_scalar.default)


def test_deferred_asserts_replace_guards_like_torchs_and_what_they_reject_is_said():
    """``prefer_deferred_runtime_asserts_over_guards``: torch exports the view over a named dim with its
    guards as asserts in the graph (rejecting n = 7, which eager accepts) and says nothing; shapeproof's
    program asserts in the graph too, rejects the same sizes, and warns."""
    spec, args = {"x": {0: Dim("n", min=2, max=64)}}, (torch.randn(8, 3),)
    options = dict(prefer_deferred_runtime_asserts_over_guards=True)
    theirs = torch.export.export(HalfView(), args, dynamic_shapes=spec, strict=False, **options)
    with pytest.warns(UserWarning, match=r"asserts at run time .* \(n % \(n // 2\)\) == 0"):
        ours = shapeproof.export(HalfView(), args, dynamic_shapes=spec, **options)
    assert _asserts(theirs) and _asserts(ours) and not ours._guards_code
    for n in (6, 7, 9):
        x = torch.randn(n, 3)
        assert _rejects(ours, x) == _rejects(theirs, x) == (n != 6)
    x = torch.randn(6, 3)
    torch.testing.assert_close(ours.module()(x), HalfView()(x))


def test_a_deferred_guard_that_narrows_a_named_range_is_still_an_error():
    """torch narrows n to 5..64 with the branch guard (no assert is left) and fails on the named Dim; the
    engine must see that guard too, or the program would run the x > 4 path for n = 3."""
    spec, args = {"x": {0: Dim("n", min=2, max=64)}}, (torch.randn(8, 3),)
    options = dict(prefer_deferred_runtime_asserts_over_guards=True)
    with pytest.raises(Exception, match=r"Constraints violated \(n\)"):
        torch.export.export(BranchOnSize(), args, dynamic_shapes=spec, strict=False, **options)
    with pytest.raises(ExportError, match=r"n > 4"):
        shapeproof.export(BranchOnSize(), args, dynamic_shapes=spec, cond_branches=False, **options)
    auto = {"x": {0: AUTO}}
    theirs = torch.export.export(BranchOnSize(), args, dynamic_shapes=auto, strict=False, **options)
    ours = shapeproof.export(BranchOnSize(), args, dynamic_shapes=auto, cond_branches=False, **options)
    for program in (theirs, ours):
        assert _rejects(program, torch.randn(3, 3)) and not _rejects(program, torch.randn(5, 3))


class BranchOnWidth(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] > 100:
            return x * 2
        return x + 1


class PinnedWidth(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[1] == 128)
        return x * 2


def test_a_guard_on_the_root_of_a_derived_dim_no_input_carries_is_an_input_check_like_torchs():
    """``x.size(1) = 32*h``: torch keeps ``x.size(1) > 100`` as an input check (h >= 4), no error; shapeproof
    exports the same program (the other side is another program) and says what it accepts."""
    h = Dim("h", min=1, max=8)
    spec, args = {"x": {1: 32 * h}}, (torch.randn(2, 128),)
    theirs = _torch(BranchOnWidth(), args, spec)
    accepts = r"needs of h, the root\(s\) of derived dims .* accepts 5 of 7 \(h\): h in 4\.\.8"
    with pytest.warns(UserWarning, match=accepts):
        ours = shapeproof.export(BranchOnWidth(), args, dynamic_shapes=spec, cond_branches=False)
    for width in (96, 128, 256):
        x = torch.randn(2, width)
        assert _rejects(ours, x) == _rejects(theirs, x) == (width < 100)
        if width > 100:
            torch.testing.assert_close(ours.module()(x), x * 2)


def test_a_guard_that_makes_such_a_root_a_constant_is_still_an_error():
    """torch: "specialized it to be a constant (128)"; shapeproof names the guard."""
    h = Dim("h", min=1, max=8)
    spec, args = {"x": {1: 32 * h}}, (torch.randn(2, 128),)
    with pytest.raises(Exception, match="specialized it to be a constant"):
        _torch(PinnedWidth(), args, spec)
    with pytest.raises(ExportError, match=r"the program needs"):
        shapeproof.export(PinnedWidth(), args, dynamic_shapes=spec)


class CachedHeight(torch.nn.Module):
    """A table cached for height 8, recomputed for any other height (``x.size(1) = 2*h``)."""

    def __init__(self, mode: str):
        super().__init__()
        self.height, self.mode = 8, mode
        self.table = torch.nn.Parameter(torch.randn(1, 4, 8))

    def forward(self, x):
        height = x.shape[1] // 2
        table = self.table
        if self.height != height:
            table = torch.nn.functional.interpolate(table, size=height, mode=self.mode)
        return x[:, ::2] + table[0].t()


def test_a_root_pinned_by_a_guard_torch_does_not_solve_is_an_input_check_like_torchs():
    """At the cached height the example takes the branch's other side, and the guard ``x.size(1) // 2 == 8``
    leaves h one size: torch does not solve it (not linear in the input's dim) and exports with it as an
    input check; so does shapeproof with the branch left a guard, saying the program accepts 1 of 31 sizes."""
    h = Dim("h", min=2, max=32)
    spec, args = ({1: 2 * h},), (torch.randn(2, 16, 4),)
    theirs = _torch(CachedHeight("linear"), args, spec)
    with pytest.warns(UserWarning, match=r"accepts 1 of 31 \(h\): h in 8"):
        ours = shapeproof.export(CachedHeight("linear"), args, dynamic_shapes=spec, cond_branches=False)
    for height in (7, 8, 9):
        x = torch.randn(2, 2 * height, 4)
        assert _rejects(ours, x) == _rejects(theirs, x) == (height != 8)


def test_a_table_resized_only_at_other_heights_runs_as_a_cond_for_every_height():
    """By default the branch of the same model is one ``torch.cond``: the resize where the height differs
    from the cached one, the cached table where not; one program for every height."""
    h = Dim("h", min=2, max=32)
    spec, args, model = ({1: 2 * h},), (torch.randn(2, 16, 4),), CachedHeight("linear")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = shapeproof.export(model, args, dynamic_shapes=spec)
    assert any(n.target is torch.ops.higher_order.cond for n in ours.graph.nodes)
    for height in (2, 7, 8, 9, 32):
        x = torch.randn(2, 2 * height, 4)
        with torch.no_grad():
            torch.testing.assert_close(ours.module()(x), model(x))


def test_a_cached_table_resized_only_at_other_heights_is_one_program_for_every_height():
    """With an exact resize (nearest) the branch's two sides agree where the height is the cached one, so
    the trace takes the resize for every height: torch's program accepts only h = 8, shapeproof's all."""
    h = Dim("h", min=2, max=32)
    spec, args = ({1: 2 * h},), (torch.randn(2, 16, 4),)
    theirs = _torch(CachedHeight("nearest"), args, spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = shapeproof.export(CachedHeight("nearest"), args, dynamic_shapes=spec)
    model = CachedHeight("nearest")
    model.load_state_dict(ours.module().state_dict(), strict=False)
    for height in (2, 7, 8, 9, 32):
        x = torch.randn(2, 2 * height, 4)
        assert _rejects(theirs, x) == (height != 8)
        torch.testing.assert_close(ours.module()(x), model(x), rtol=0, atol=0)


class PadToThree(torch.nn.Module):
    def forward(self, x):
        pad = (3 - x.shape[1] % 3) % 3
        if pad > 0:
            x = torch.nn.functional.pad(x, (0, pad))
        return x.view(x.shape[0], -1, 3).sum(-1)


def test_a_pad_branch_on_such_a_root_exports_one_program_for_every_multiple():
    """The pad branch over ``32*h``: torch keeps the branch as an input check; shapeproof's region search
    finds that the padding program serves the other side too (a pad of 0), so no check is left."""
    h = Dim("h", min=1, max=8)
    spec, args = {"x": {1: 32 * h}}, (torch.randn(2, 64),)
    theirs = _torch(PadToThree(), args, spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = shapeproof.export(PadToThree(), args, dynamic_shapes=spec)
    assert not [w for w in caught if "root(s) of derived dims" in str(w.message)]
    assert _rejects(theirs, torch.randn(2, 96))        # 96 % 3 == 0: the other side of torch's check
    for width in (64, 96, 128, 192, 256):
        x = torch.randn(2, width)
        torch.testing.assert_close(ours.module()(x), PadToThree()(x))


class StridedConvs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = torch.nn.Sequential(*[torch.nn.Conv2d(3 if i == 0 else 4, 4, 3, stride=2, padding=1)
                                           for i in range(5)])

    def forward(self, x):
        return self.convs(x).mean((2, 3))


def test_dynamic_strided_convs_keep_feature_maps_of_width_one():
    """torch keeps ``1 + (W - 1) // 32 != 1`` (a feature map of width 1) as an input check of its program:
    the question comes from labelling a graph node with its memory format, which decides nothing the
    program computes, so shapeproof's one program serves narrow images too, with no input check."""
    model, spec = StridedConvs().eval(), {"x": {0: DYNAMIC, 2: DYNAMIC, 3: DYNAMIC}}
    args = (torch.randn(2, 3, 64, 64),)
    theirs = _torch(model, args, spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = shapeproof.export(model, args, dynamic_shapes=spec)
    narrow = torch.randn(1, 3, 64, 20)
    assert _rejects(theirs, narrow) and not _rejects(ours, narrow)
    with torch.no_grad():
        for shape in [(1, 3, 64, 20), (2, 3, 20, 20), (3, 3, 33, 2), (1, 3, 200, 65)]:
            x = torch.randn(*shape)
            torch.testing.assert_close(ours.module()(x), model(x))


class _FloorPinned(torch.nn.Module):
    def forward(self, x):                 # BigBird: seq % block == 0, then seq // block == 16 blocks
        torch._check(x.shape[0] % 4 == 0)
        torch._check(x.shape[0] // 4 == 16)
        return x * 2


class _EquationPinned(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] == 64)
        return x * 2


def test_a_dynamic_dim_left_one_size_only_by_checks_torch_does_not_solve_exports_like_torch():
    """torch makes a Dim.DYNAMIC dim a constant (its "specialized" error) only from guards it solves for the
    dim (``s == 64``); ``s // 4 == 16`` with ``s % 4 == 0`` it keeps as input checks and exports (BigBird
    under Dim.DYNAMIC): shapeproof exports the same program, with a warning naming the one size."""
    spec, x = ({0: Dim.DYNAMIC},), torch.randn(64, 3)
    torchs = torch.export.export(_FloorPinned(), (x,), dynamic_shapes=spec)
    with pytest.warns(UserWarning, match=r"accept one size only of these Dim.DYNAMIC.*x.size\(0\) = 64"):
        ours = shapeproof.export(_FloorPinned(), (x,), dynamic_shapes=spec)
    for n in (60, 64, 68):
        accepted = []
        for program in (torchs, ours):
            try:
                accepted.append(torch.equal(program.module()(torch.ones(n, 3)), torch.full((n, 3), 2.0)))
            except AssertionError:
                accepted.append(False)
        assert accepted == [n == 64] * 2, n
    with pytest.raises(torch._dynamo.exc.UserError):
        torch.export.export(_EquationPinned(), (x,), dynamic_shapes=spec)
    with pytest.raises(ExportError, match="x.size\\(0\\)"):
        shapeproof.export(_EquationPinned(), (x,), dynamic_shapes=spec)
