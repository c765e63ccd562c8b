"""torch.export's spec objects and control-flow operators through shapeproof.export, checked against eager.

Each test follows a documented torch.export behaviour (torch 2.13 docs,
"torch.export" and "Dynamic shapes"): ``ShapesCollection`` and ``Dim.AUTO``
specs, keyword inputs with dict specs, ``torch._check_is_size`` on an
``.item()`` value, and ``map`` over the leading dim.
"""
from __future__ import annotations

import pytest
import torch
from functorch.experimental.control_flow import map as control_flow_map
from torch.export import Dim, ShapesCollection

import shapeproof


def _same(program, model, *args, **kwargs):
    with torch.no_grad():
        expected, got = model(*args, **kwargs), program.module()(*args, **kwargs)
    return torch.allclose(expected, got)


class Pool(torch.nn.Module):
    def forward(self, x, mask=None):
        y = torch.nn.functional.avg_pool1d(x, 2)          # floor(T / 2)
        return y if mask is None else y * mask[..., : y.shape[-1]]


def test_shapes_collection_spec():
    """Docs: "ShapesCollection ... assigns dynamic shapes to tensors by identity"."""
    x = torch.randn(2, 3, 40)
    spec = ShapesCollection()
    spec[x] = {2: Dim("T", min=4, max=200)}
    program = shapeproof.export(Pool(), (x,), dynamic_shapes=spec)
    for t in (4, 5, 199, 200):
        assert _same(program, Pool(), torch.randn(2, 3, t))


def test_dim_auto_lets_the_engine_infer_the_range():
    """Docs: "Dim.AUTO ... the dimension may be dynamic; its range is inferred from tracing"."""
    program = shapeproof.export(Pool(), (torch.randn(2, 3, 40),), dynamic_shapes=({2: Dim.AUTO},))
    for t in (2, 3, 41, 1000):
        assert _same(program, Pool(), torch.randn(2, 3, t))


def test_keyword_inputs_with_a_dict_spec():
    """Docs: dynamic_shapes "can be a dict mapping argument names to their specs"."""
    t = Dim("T", min=4, max=128)
    x, mask = torch.randn(2, 3, 40), torch.ones(2, 3, 40)
    program = shapeproof.export(Pool(), (x,), {"mask": mask}, dynamic_shapes={"x": {2: t}, "mask": {2: t}})
    for n in (4, 9, 128):
        assert _same(program, Pool(), torch.randn(2, 3, n), mask=torch.rand(2, 3, n))
    with pytest.raises(Exception):
        program.module()(torch.randn(2, 3, 9), mask=torch.rand(2, 3, 10))   # T must agree across inputs


class TakeCount(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check_is_size(k)
        torch._check(k <= x.shape[0])
        return x[:k].sum(0)


def test_check_is_size_on_an_item_value():
    """Docs: "torch._check_is_size(u) ... tells the compiler u is a valid size", so slicing by it traces."""
    program = shapeproof.export(TakeCount(), (torch.randn(10, 3), torch.tensor(4)),
                                dynamic_shapes=({0: Dim("N", min=2, max=64)}, None))
    for rows, k in ((10, 4), (64, 64), (2, 0), (7, 3)):
        x, n = torch.randn(rows, 3), torch.tensor(k)
        assert _same(program, TakeCount(), x, n)
    with pytest.raises(Exception):          # the runtime assert of torch._check(k <= N)
        program.module()(torch.randn(5, 3), torch.tensor(6))


class MapRows(torch.nn.Module):
    def forward(self, xs, y):
        return control_flow_map(lambda x, y: x.reshape(-1, 2).sum(-1) + y, xs, y)


def test_map_over_the_leading_dim():
    """Docs: "map applies a function to the leading dimension of its inputs" (control-flow operators)."""
    spec = ({0: Dim("B", min=2, max=16), 1: 2 * Dim("h", min=1, max=32)}, {0: Dim("h", min=1, max=32)})
    program = shapeproof.export(MapRows(), (torch.randn(3, 8), torch.randn(4)), dynamic_shapes=spec)
    for b, h in ((2, 1), (16, 32), (5, 7)):
        assert _same(program, MapRows(), torch.randn(b, 2 * h), torch.randn(h))


def test_a_fix_that_leaves_one_size_makes_the_dim_static():
    # torch refuses Dim(min=k, max=k); a verified fix that keeps only the example's size drops the Dim
    from shapeproof.export.specs import apply_fixes
    from shapeproof.shapes.fixes import Fix

    h, w = Dim("H", min=32, max=256), Dim("W", min=32, max=256)
    spec = ({2: h, 3: w},)
    fixed = apply_fixes(spec,
                        [Fix("multiple", "H", "H = 32*Dim('H_32', min=2, max=2)", min=2, max=2, modulus=32),
                               Fix("range", "W", "W = Dim('W', min=96, max=96)", min=96, max=96)])
    assert fixed[0][2] is None and fixed[0][3] is None
    kept = apply_fixes(spec,
                       [Fix("multiple", "H", "H = 32*Dim('H_32', min=2, max=8)", min=2, max=8, modulus=32)])
    assert str(kept[0][2]) == str(32 * Dim("H_32", min=2, max=8)) and kept[0][3] is w


def test_a_fix_of_the_root_of_derived_dims_rewrites_the_root_and_keeps_the_relations():
    """The fix names ``h``, the spec holds ``32*h`` and ``32*h + 1``: both follow the one new root."""
    from shapeproof.export.specs import apply_fixes
    from shapeproof.shapes.fixes import Fix

    h = Dim("h", min=1, max=8)
    spec = {"x": {2: 32 * h}, "y": {0: 32 * h + 1}}
    fixed = apply_fixes(spec, [Fix("range", "h", "h = Dim('h', min=2, max=3)", min=2, max=3)])
    x_dim, y_dim = fixed["x"][2], fixed["y"][0]
    assert x_dim.root is y_dim.root and (x_dim.root.min, x_dim.root.max) == (2, 3)
    assert (x_dim.min, x_dim.max, y_dim.min, y_dim.max) == (64, 96, 65, 97)
    static = apply_fixes(spec, [Fix("range", "h", "h = 2", min=2, max=2)])
    assert static["x"][2] is None and static["y"][0] is None


class _Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class _HalfBatch(torch.nn.Module):
    def forward(self, x):
        return x.view(x.shape[0] // 2, 2, -1)


class _Capped(torch.nn.Module):
    def forward(self, x):
        torch._check(x.shape[0] <= 64)
        return x * 2


class _FourRows(torch.nn.Module):
    def forward(self, x):
        return x.reshape(4, -1) + torch.ones(4, 3)


class _RootNarrowed(torch.nn.Module):
    def forward(self, x, y):
        torch._check(x.shape[0] <= 3)
        return x.repeat(2, 1) + y


def _dims_of(spec) -> list:
    """Each dim of a spec as data: a Dim's name and range, a derived dim's root and relation, a static
    size (torch's refine writes the size, ``suggest_dynamic_shapes`` leaves the dim out)."""
    found = []

    def walk(entry):
        if isinstance(entry, dict):
            for key in sorted(entry):
                walk(entry[key])
        elif isinstance(entry, (list, tuple)):
            for item in entry:
                walk(item)
        elif entry is None or isinstance(entry, int):
            found.append("static")
        elif hasattr(entry, "root"):
            found.append((entry.root.__name__, entry.root.min, entry.root.max, entry.fn(0), entry.fn(1)))
        else:
            found.append((entry.__name__, entry.min, entry.max))

    walk(spec)
    return found


_h = Dim("h", min=2, max=8)
_SUGGESTED = {
    "tie": (_Add(), (torch.randn(5, 3), torch.randn(5, 3)),
            ({0: Dim("dx", min=2, max=100)}, {0: Dim("dy", min=2, max=100)}), ["dy = dx"]),
    "multiple": (_HalfBatch(), (torch.randn(6, 3),), ({0: Dim("B", min=2, max=100)},),
                 ["B_2 = Dim('B_2', min=1, max=50)", "B = 2*B_2"]),
    "range": (_Capped(), (torch.randn(6, 3),), ({0: Dim("B", min=2, max=100)},),
              ["B = Dim('B', min=2, max=64)"]),
    "static": (_FourRows(), (torch.randn(4, 3),), ({0: Dim("B", min=2, max=100)},), ["B = 4"]),
    "zero-one": (_Add(), (torch.randn(1, 3), torch.randn(1, 3)),
                 ({0: Dim("dx", min=2, max=100)}, {0: Dim("dx", min=2, max=100)}), ["dx = 1"]),
    "root": (_RootNarrowed(), (torch.randn(2, 3), torch.randn(4, 3)),
             ({0: _h}, {0: 2 * _h}), ["h = Dim('h', min=2, max=3)"]),
}


@pytest.mark.parametrize("case", sorted(_SUGGESTED))
def test_torch_refines_the_spec_from_the_message_as_suggest_dynamic_shapes_does(case):
    """Docs (refine_dynamic_shapes_from_suggested_fixes): "takes the ConstraintViolation error message and
    the original dynamic_shapes spec, and returns a new dynamic_shapes spec that incorporates the
    suggested fixes": a caller's ``except UserError`` loop written for torch.export works unchanged."""
    from torch._dynamo.exc import UserError
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

    model, args, spec, lines = _SUGGESTED[case]
    with pytest.raises(UserError) as caught:
        shapeproof.export(model, args, dynamic_shapes=spec)
    assert caught.value.msg.split("Suggested fixes:\n")[1].splitlines() == [f"  {line}" for line in lines]
    refined = refine_dynamic_shapes_from_suggested_fixes(caught.value.msg, spec)
    assert _dims_of(refined) == _dims_of(shapeproof.suggest_dynamic_shapes(caught.value, spec))
    program = shapeproof.export(model, args, dynamic_shapes=refined)
    assert all(torch.equal(a, b) for a, b in zip(torch.atleast_1d(program.module()(*args)),
                                                  torch.atleast_1d(model(*args))))


def test_an_int_in_the_spec_is_a_static_size_even_at_zero_or_one():
    """Docs: a dim given as an int in dynamic_shapes is static at that size (torch exports the 0/1 case;
    shapeproof took the int's range [1, 1] for a dynamic dim specialized on its example)."""
    args = (torch.randn(1, 3), torch.randn(1, 3))
    program = shapeproof.export(_Add(), args, dynamic_shapes=({0: 1}, {0: 1}))
    assert program.range_constraints == torch.export.export(_Add(), args, dynamic_shapes=({0: 1}, {0: 1})
                                                            ).range_constraints == {}
    assert torch.equal(program.module()(*args), _Add()(*args))


def test_the_call_takes_torch_export_exports_parameters_by_their_names():
    """A call written for torch.export.export (keywords included) works on shapeproof.export unchanged."""
    import inspect

    torchs = list(inspect.signature(torch.export.export).parameters)
    assert list(inspect.signature(shapeproof.export).parameters)[:len(torchs)] == torchs
    x = torch.randn(2, 3, 40)
    program = shapeproof.export(mod=Pool(), args=(x,), kwargs=None, dynamic_shapes=({2: Dim("T", min=4)},))
    assert _same(program, Pool(), torch.randn(2, 3, 9))


class _PadToFour(torch.nn.Module):
    def forward(self, x, *rest, scale=1.0):
        if x.shape[1] % 4:
            x = torch.nn.functional.pad(x, (0, (-x.shape[1]) % 4))
        return x.view(x.shape[0], -1, 4).sum(-1) * scale + sum(r.sum() for r in rest)


@pytest.mark.usefixtures("program_level_merges_only")
def test_a_program_traced_again_takes_its_inputs_as_the_call_gave_them():
    """The padding program, traced at a second point, serves the whole range; it must take ``x``,
    ``*rest`` and ``scale`` as the export call passed them (a keyword traced as a position made
    ``program.module()(x=...)`` raise "kwarg keyword mismatch").  (The trace itself would merge the pad.)"""
    from shapeproof.export import export_with_report

    t = Dim("T", min=5, max=64)
    for args, kwargs, spec in [((), {"x": torch.randn(2, 8)}, {"x": {1: t}}),
                               ((torch.randn(2, 8), torch.randn(3)), {"scale": 2.0},
                                {"x": {1: t}, "rest": (None,), "scale": None})]:
        result = export_with_report(_PadToFour(), args, kwargs, dynamic_shapes=spec)
        assert result.program is not result.regions.traces[0].program      # the second trace's program
        for n in (5, 8, 9, 64):
            resized = {**kwargs, "x": torch.randn(2, n)} if "x" in kwargs else kwargs
            call = (torch.randn(2, n), *args[1:]) if args else ()
            assert torch.allclose(result.program.module()(*call, **resized), _PadToFour()(*call, **resized))


class SumIs32(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y]).reshape(32, -1)


def test_a_relation_torchs_dim_cannot_declare_is_an_export_error_that_states_it():
    """``dy = 32 - dx`` decreases with ``dx``: no derived Dim says it.  The export's error is an
    ``ExportError`` naming the relation (writing its message once raised torch's NotImplementedError), its
    suggested-fix lines leave ``dy`` alone, and ``suggest_dynamic_shapes`` keeps it as declared."""
    dx, dy = Dim("dx", min=1, max=31), Dim("dy", min=1, max=31)
    spec = ({0: dx}, {0: dy})
    with pytest.raises(shapeproof.ExportError) as caught:
        shapeproof.export(SumIs32(), (torch.randn(10, 4), torch.randn(22, 4)), dynamic_shapes=spec)
    message = str(caught.value)
    assert "dy must be 32 - dx, which torch's Dim cannot declare" in message
    suggested = message.partition("Suggested fixes:")[2]
    assert "dy = " not in suggested
    assert shapeproof.suggest_dynamic_shapes(caught.value, spec)[1][0] is dy
