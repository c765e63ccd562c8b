"""Parity cases: torch's own dynamic-shape examples and tests, run under torch.export and shapeproof side by
side.

``CASES[name]`` is a ``ParityCase``: ``build()`` returns fresh ``(model, args,
kwargs, dynamic_shapes)`` (seeded, small tensors), ``context()`` the context
both exporters run under (e.g. ``backed_size_oblivious``), ``extra_probes()``
inputs worth trying beyond the generated shapes (data that breaks a deferred
assert, ExportDB's ``extra_args``).

Sources:

- every ExportDB example (``torch._export.db.examples``, shipped with torch),
  imported here and used directly: with its own spec (group ``exportdb``), and
  with every dim of every tensor input ``Dim.AUTO`` / ``Dim.DYNAMIC``
  (``exportdb-auto`` / ``exportdb-dynamic``);
- cases written for this suite following the documented behaviour of the
  dynamic-shape tests of torch's ``test/export/test_export.py`` (each names
  the test it follows in ``source``) and the ``torch.export`` docs on
  ``Dim``/``Dim.AUTO``/``Dim.DYNAMIC``/``ShapesCollection``: groups
  ``test_export`` (torch exports), ``spec-errors`` (torch rejects the spec),
  ``patterns`` (ops whose shapes relate dims), ``zero-one`` (0/1 example
  sizes, ``backed_size_oblivious``) and ``deferred`` (runtime asserts on data).

``python -m bench.parity`` runs them; ``tests/test_parity.py`` asserts parity.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch import nn
from torch.export import Dim, ShapesCollection, dims

AUTO, DYNAMIC, STATIC = Dim.AUTO, Dim.DYNAMIC, Dim.STATIC


@dataclass(frozen=True)
class ParityCase:
    name: str
    group: str
    source: str                                   # the torch test or doc the case follows
    factory: Callable[[], tuple]                  # -> (model, args, kwargs, dynamic_shapes)
    context_factory: Callable[[], contextlib.AbstractContextManager] | None = None
    probes_factory: Callable[[], list] | None = None   # -> [(args, kwargs), ...]

    def build(self) -> tuple:
        """Fresh ``(model, args, kwargs, dynamic_shapes)``; the same weights and inputs on every call."""
        torch.manual_seed(0)
        model, args, kwargs, spec = self.factory()
        return model, args, kwargs or {}, spec

    def context(self) -> contextlib.AbstractContextManager:
        return self.context_factory() if self.context_factory else contextlib.nullcontext()

    def extra_probes(self) -> list[tuple[tuple, dict]]:
        if self.probes_factory is None:
            return []
        torch.manual_seed(1)
        return [(tuple(a), dict(k or {})) for a, k in self.probes_factory()]


CASES: dict[str, ParityCase] = {}


def oblivious():
    """torch's switch that keeps sizes 0/1 symbolic (set by its baddbmm and repeat_interleave tests)."""
    return torch.fx.experimental._config.patch(backed_size_oblivious=True)


def case(name: str, source: str, group: str = "test_export", context=None, probes=None):
    """Register the decorated factory as ``CASES[name]``."""
    def register(factory):
        assert name not in CASES, name
        CASES[name] = ParityCase(name, group, source, factory, context, probes)
        return factory
    return register


def module(forward, **children) -> nn.Module:
    """A fresh module whose ``forward`` is ``forward`` (written as ``def forward(self, ...)``)."""
    m = type("M", (nn.Module,), {"forward": forward})()
    for key, child in children.items():
        setattr(m, key, child)
    return m.eval()


r = torch.randn


def each_dim(kind, model, args, kwargs) -> dict:
    """A spec giving ``kind`` to every dim of every tensor input, keyed by the forward's argument names."""
    bound = inspect.signature(model.forward).bind(*args, **(kwargs or {})).arguments

    def leaf(x):
        return {i: kind for i in range(x.dim())} if isinstance(x, torch.Tensor) else None

    return {name: pytree.tree_map(leaf, value) for name, value in bound.items()}


# ---------------------------------------------------------------------------------------------- ExportDB

def _exportdb_cases() -> None:
    """Every ExportDB example with its own spec, and with every tensor dim AUTO, and DYNAMIC."""
    from torch._export.db.examples import all_examples

    for name, example in sorted(all_examples().items()):
        def factory(example=example, kind=None):
            model = copy.deepcopy(example.model)
            args, kwargs = copy.deepcopy((tuple(example.example_args), dict(example.example_kwargs or {})))
            spec = example.dynamic_shapes if kind is None else each_dim(kind, model, args, kwargs)
            return model, args, kwargs, spec

        def probes(example=example):
            extra = getattr(example, "extra_args", None)
            return [(copy.deepcopy(tuple(extra)),
                     copy.deepcopy(dict(example.example_kwargs or {})))] if extra else []

        source = f"ExportDB {name} ({example.support_level.name})"
        for group, kind in (("exportdb", None), ("exportdb-auto", AUTO), ("exportdb-dynamic", DYNAMIC)):
            CASES[f"{group}:{name}"] = ParityCase(
                f"{group}:{name}", group, source, lambda f=factory, k=kind: f(kind=k), None, probes)


_exportdb_cases()


# ---------------------------------------------------------------------------------------------- test_export
# Cases torch exports, each following the named test of torch's test/export/test_export.py.

@case("derived_dim_plus_one", "test_derived_dim_basic")
def _():
    def forward(self, x, y):
        return x + y[1:]
    dx = Dim("dx", min=3, max=6)
    return module(forward), (r(5), r(6)), {}, ({0: dx}, {0: dx + 1})


@case("derived_dim_odd_stride", "test_derived_dim_nested")
def _():
    def forward(self, x, y):
        return x * y[1::2]
    dx = Dim("dx", min=3, max=6)
    return module(forward), (r(5), r(11)), {}, ({0: dx}, {0: 2 * dx + 1})


@case("derived_dim_two_minus_one", "test_derived_dim_nested")
def _():
    def forward(self, z, y):
        return z[1:] - y[1::2]
    dx = Dim("dx", min=3, max=6)
    return module(forward), (r(6), r(11)), {}, ({0: dx}, {0: 2 * dx - 1})


@case("derived_dim_nested_root_plus_one", "test_derived_dim_nested")
def _():
    def forward(self, z, y):
        return z[1:] + y[1::2]
    dx = Dim("dx", min=3, max=6)
    return module(forward), (r(6), r(11)), {}, ({0: dx + 1}, {0: 2 * dx + 1})


@case("derived_dim_even_branch", "test_derived_dim_integer")
def _():
    def forward(self, w):
        return w[::2] if w.shape[0] % 2 == 0 else w[1:-1:2]
    return module(forward), (r(10),), {}, ({0: 2 * Dim("dx", min=3, max=6)},)


@case("derived_dim_repeated", "test_derived_dim_repeat_derived")
def _():
    def forward(self, u, v):
        return u[::2] * v[::2]
    dw = 2 * Dim("dx", min=3, max=6)
    return module(forward), (r(10), r(10)), {}, ({0: dw}, {0: dw})


@case("derived_dim_out_of_order", "test_derived_dim_out_of_order")
def _():
    def forward(self, x, y, z):
        return x + y[1:] + z[2:]
    dy = Dim("dy", min=5, max=7)
    return module(forward), (r(5), r(6), r(7)), {}, ({0: dy - 1}, {0: dy}, {0: dy + 1})


@case("derived_dim_out_of_order_repeated", "test_derived_dim_out_of_order_repeat_derived")
def _():
    def forward(self, a, b, c, d, e):
        return a + b[1:] + c[2:] + d + e
    dy = Dim("dy", min=5, max=7)
    dx = dy - 1
    dz = dy + 1
    shapes = ({0: dx}, {0: dy}, {0: dz}, {0: dx}, {0: dz - 2})
    return module(forward), (r(5), r(6), r(7), r(5), r(5)), {}, shapes


@case("derived_dim_out_of_order_simplified", "test_derived_dim_out_of_order_simplified")
def _():
    def forward(self, x, y, z):
        return x * y[1:] * z[2:]
    base = Dim("base", min=6, max=8)
    dx = base - 2
    return module(forward), (r(5), r(6), r(7)), {}, ({0: dx}, {0: base - 1}, {0: dx + 2})


@case("derived_dim_repeat_non_derived", "test_derived_dim_out_of_order_simplified_repeat_non_derived")
def _():
    def forward(self, x, y, y1, z):
        return x + y[1:] + y1[1:] + z[2:]
    base = Dim("base", min=6, max=8)
    dy = base - 1
    shapes = ({0: dy - 1}, {0: dy}, {0: dy}, {0: base})
    return module(forward), (r(5), r(6), r(6), r(7)), {}, shapes


@case("static_dims_in_spec", "test_static_dim_constraints")
def _():
    def forward(self, x, y, z):
        return self.lin(x) + y[1:], z * 2.0
    dx = Dim("dx", min=3, max=6)
    shapes = ({0: dx, 1: 6}, {0: dx + 1, 1: 4}, {0: Dim("dz", min=3, max=6), 1: 3})
    return module(forward, lin=nn.Linear(6, 4)), (r(4, 6), r(5, 4), r(3, 3)), {}, shapes


@case("static_dims_none_and_ints", "test_static_dim_constraints")
def _():
    def forward(self, x, y, z):
        return self.lin(x) + y[1:], z * 2.0
    shapes = ((None, 6), (5, None), (STATIC, STATIC))
    return module(forward, lin=nn.Linear(6, 4)), (r(4, 6), r(5, 4), r(3, 3)), {}, shapes


@case("conv_shared_batch", "test_conv_dynamic")
def _():
    def forward(self, x, y):
        a = self.conv(x)
        a.add_(y)
        return self.pool(torch.relu(a))
    batch = Dim("batch")
    conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
    return (module(forward, conv=conv, pool=nn.MaxPool2d(3)), (r(2, 3, 12, 12), r(2, 8, 12, 12)), {},
            {"x": {0: batch}, "y": {0: batch}})


@case("symint_output", "test_symint_output")
def _():
    def forward(self, x):
        rows, cols = x.size()
        return rows + cols + x[0], rows
    return module(forward), (r(2, 3),), {}, {"x": tuple(dims("dim0_x", "dim1_x"))}


@case("statically_known_slice_end", "test_export_statically_known_true")
def _():
    def forward(self, x, y):
        end = y.shape[0] ** 2 - 3 * y.shape[0]
        return x[:, :end]
    return module(forward), (r(4, 4), r(4, 4)), {}, ((DYNAMIC, DYNAMIC), (DYNAMIC, DYNAMIC))


@case("auto_and_named_dims", "test_dim_auto_and_dim")
def _():
    def forward(self, x, y):
        return x - y
    shapes = {"x": (AUTO, Dim("d1", min=3)), "y": (Dim("d0", max=8), DYNAMIC)}
    return module(forward), (r(4, 4), r(4, 4)), {}, shapes


@case("auto_and_derived_dims", "test_dim_auto_and_dim")
def _():
    def forward(self, x, y, z):
        return x + y[1::3] + z
    dx = Dim("dx", min=2, max=10)
    return module(forward), (r(4), r(13), r(4)), {}, {"x": (dx,), "y": (3 * dx + 1,), "z": (AUTO,)}


@case("causal_mask_slice_assign", "test_issue_157289")
def _():
    def forward(self, causal_mask, fill_value):
        causal_mask = causal_mask.clone()
        mask_length = fill_value.shape[-1]
        causal_mask[:, :, :, :mask_length] = fill_value
        return causal_mask
    shapes = {"causal_mask": {3: Dim("M")}, "fill_value": {3: Dim("N")}}
    return module(forward), (r(2, 2, 3, 4), r(2, 2, 3, 3)), {}, shapes


@case("hint_ranges", "test_dim_hint_ranges")
def _():
    def forward(self, x, y):
        return x + y
    shapes = {"x": (AUTO(min=4), AUTO), "y": (DYNAMIC(max=16), AUTO(max=32))}
    return module(forward), (r(6, 4), r(6, 4)), {}, shapes


@case("range_constraints_with_replacement", "test_range_constraints_with_replacement")
def _():
    def forward(self, x, y):
        return (x + y)[:3]
    return module(forward), (r(4), r(4)), {}, ((DYNAMIC,), (DYNAMIC,))


@case("dynamic_batch_shared_linear", "test_dynamic_shapes_wrapped_with_shape_guards")
def _():
    def forward(self, x, y):
        return torch.sigmoid(self.linear(x + y))
    return module(forward, linear=nn.Linear(5, 3)), (r(2, 5), r(2, 5)), {}, ({0: DYNAMIC}, {0: DYNAMIC})


@case("dynamic_batch_varargs", "test_dynamic_shapes_wrapped_with_shape_guards")
def _():
    def forward(self, *args):
        return torch.sigmoid(self.linear(args[0] + args[1]))
    spec = {"args": ({0: DYNAMIC}, {0: DYNAMIC})}
    return module(forward, linear=nn.Linear(5, 3)), (r(2, 5), r(2, 5)), {}, spec


@case("shapes_collection_nested", "test_dynamic_shapes_builder_basic")
def _():
    def forward(self, x, y, z):
        return x + y[0] + z["k"]
    x, y, z = r(4), [r(4)], {"k": r(4)}
    shapes = ShapesCollection()
    dim = Dim("dim", max=10)
    shapes[x] = (dim,)
    shapes[y[0]] = (dim,)
    shapes[z["k"]][0] = dim
    return module(forward), (x, y, z), {}, shapes


@case("shapes_collection_kwargs", "test_dynamic_shapes_builder_kwargs")
def _():
    def forward(self, x, y, z):
        return x + y[0] + z["k"]
    x, y, z = r(4), [r(4)], {"k": r(4)}
    shapes = ShapesCollection()
    dim = Dim("dim", max=10)
    for t in (x, y[0], z["k"]):
        shapes[t] = (dim,)
    return module(forward), (x,), {"z": z, "y": y}, shapes


@case("additional_inputs_inferred", "test_dynamic_shapes_inferred_basic")
def _():
    def forward(self, x, y, z):
        return (x + y[0])[:3] * z["k"]
    args = (r(4), [r(4)], {"k": r(3)})
    more = torch.export.AdditionalInputs()
    more.add((r(5), [r(5)], {"k": r(3)}))
    return module(forward), args, {}, more


def _nested_pair(spec):
    """``x["k"]["k"][0] + x["k"]["k"][1]`` over a nested dict and list of two tensors, with ``spec``."""
    def forward(self, x):
        return x["k"]["k"][0] + x["k"]["k"][1]
    return module(forward), ({"k": {"k": [r(4), r(4)]}},), {}, spec


@case("nested_list_spec", "test_mismatched_dynamic_shapes")
def _():
    dim = Dim("dim")
    return _nested_pair(({"k": {"k": [(dim,), (dim,)]}},))


@case("nested_dict_keys_any_order", "test_mismatched_dynamic_shapes")
def _():
    def forward(self, x):
        return x["k"]["k1"][0] + x["k"]["k2"][0]
    dim = Dim("dim")
    return (module(forward), ({"k": {"k1": [r(4)], "k2": [r(4)]}},), {},
            ({"k": {"k2": [(dim,)], "k1": [(dim,)]}},))


@case("dynamic_divisibility_branch", "test_dim_dynamic_divisibility")
def _():
    def forward(self, x):
        return x.clone() * 2 if x.size(0) % 2 == 0 else x.clone() * 0
    return module(forward), (r(4),), {}, {"x": {0: DYNAMIC}}


@case("auto_no_duck_sizing", "test_dont_duck_size_for_auto_dynamic")
def _():
    def forward(self, x, y):
        assert y.shape[1] == 4
        assert x.shape[0] == y.shape[0] - 1
        return x * 2, y * 2
    return module(forward), (r(4, 4), r(5, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@case("view_even_multiple", "test_export_mod_constraints",
      probes=lambda: [((r(3, 5),), {}), ((r(5, 6),), {})])
def _():
    def forward(self, x):
        return x.view(x.shape[0] - 1, -1)
    return module(forward), (r(3, 4),), {}, {"x": (None, 2 * Dim("half", max=4000))}


@case("interpolate_down_up_auto", "test_solver_unsupported_sympy_function")
def _():
    def forward(self, x, y):
        x = F.interpolate(x, scale_factor=0.5, mode="bilinear")
        return F.interpolate(x, scale_factor=2.0, mode="bilinear") + y
    spec = {"x": {2: AUTO, 3: AUTO}, "y": {2: AUTO, 3: AUTO}}
    return module(forward), (r(1, 1, 16, 16), r(1, 1, 16, 16)), {}, spec


@case("max_of_dims_pad", "test_export_max_onnx_reported")
def _():
    def forward(self, x, y):
        rows = max(x.shape[0], y.shape[0])
        cols = max(x.shape[1], y.shape[1])
        z = torch.zeros((rows, cols), dtype=x.dtype)
        z[: x.shape[0], : x.shape[1]] = x
        z[: y.shape[0], : y.shape[1]] += y
        return z
    spec = ({0: DYNAMIC, 1: DYNAMIC}, {0: DYNAMIC, 1: DYNAMIC})
    return module(forward), (torch.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(3, 2) * 10), {}, spec


@case("sym_max_min_of_dims", "test_export_max_nonstrict")
def _():
    def forward(self, x, y):
        return max([x.shape[0], y.shape[0], x.shape[0]]) + min([x.shape[0], y.shape[0], x.shape[0]])
    return module(forward), (r(4, 4), r(4, 4)), {}, {"x": {0: AUTO}, "y": {0: AUTO}}


@case("int_inputs_dynamic_auto", "test_symint_input_basic")
def _():
    def forward(self, x, y):
        return x * y
    return module(forward), (4, 5), {}, {"x": DYNAMIC, "y": AUTO}


@case("int_input_static_and_auto", "test_symint_input_basic")
def _():
    def forward(self, x, y):
        return x * y
    return module(forward), (5, 5), {}, {"x": None, "y": AUTO}


@case("int_in_dict_input", "test_symint_input_basic")
def _():
    def forward(self, x, y):
        return x["moo"] * y
    return module(forward), ({"moo": 2}, torch.ones(3, 3)), {}, {"x": {"moo": DYNAMIC}, "y": {0: DYNAMIC}}


@case("int_input_auto_specialized", "test_symint_input_specialization")
def _():
    def forward(self, x, y):
        assert x == 3
        assert y.shape[0] == 4
        return x * y
    return module(forward), (3, r(4, 4)), {}, (AUTO, None)


@case("int_input_range", "test_symint_input_ranges")
def _():
    def forward(self, x, y):
        return x * y
    return module(forward), (3, r(4, 4)), {}, (DYNAMIC(min=3, max=10), None)


@case("int_input_range_narrowed_by_asserts", "test_symint_input_ranges")
def _():
    def forward(self, x, y):
        assert x > 3
        assert x <= 5
        return x * y
    return module(forward), (4, r(4, 4)), {}, (DYNAMIC(min=3, max=10), None)


@case("int_input_range_wider_asserts", "test_symint_input_ranges")
def _():
    def forward(self, x, y):
        assert x > 1
        assert x < 20
        return x * y
    return module(forward), (4, r(4, 4)), {}, (DYNAMIC(min=3, max=10), None)


@case("matmul_shared_batch", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch = Dim("batch")
    return module(forward), (r(10, 2, 3), r(10, 3, 4)), {}, {k: {0: batch} for k in ("x", "y")}


@case("matmul_batch_kwarg", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch = Dim("batch")
    return module(forward), (r(10, 2, 3),), {"y": r(10, 3, 4)}, {k: {0: batch} for k in ("x", "y")}


@case("matmul_bounded_batch_square", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch, size = Dim("batch", min=8, max=64), Dim("size")
    return module(forward), (r(10, 3, 3), r(10, 3, 3)), {}, {"x": (batch, size, size),
                                                             "y": (batch, size, size)}


@case("matmul_all_named", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch, m, k, n = dims("batch", "M", "K", "N")
    return module(forward), (r(10, 2, 3), r(10, 3, 4)), {}, {"x": (batch, m, k), "y": (batch, k, n)}


@case("matmul_dict_input", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, inputs):
        return torch.matmul(inputs["x"], inputs["y"])
    batch = Dim("batch")
    args = ({"x": r(10, 2, 3), "y": r(10, 3, 4)},)
    return module(forward), args, {}, {"inputs": {k: {0: batch} for k in ("x", "y")}}


@case("matmul_list_input", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, inputs):
        return torch.matmul(inputs[0], inputs[1])
    batch = Dim("batch")
    return module(forward), ([r(10, 2, 3), r(10, 3, 4)],), {}, {"inputs": [{0: batch}, {0: batch}]}


@case("suggested_root_retry", "test_suggested_fixes_new_roots")
def _():
    def forward(self, x, y, z):
        if x.shape[0] >= 5 and x.shape[0] <= 36 and y.shape[0] % 3 == 0:
            return x + y[1:] + z[3:]
        return None
    root = Dim("_dx", min=2, max=12)
    return module(forward), (r(11), r(12), r(14)), {}, {"x": (3 * root - 1,), "y": (3 * root,),
                                                        "z": (3 * root + 2,)}


@case("pytree_spec_uniform_batch", "test_dynamic_shapes_spec_with_pytree")
def _():
    def forward(self, inputs):
        return inputs["tensor"] + inputs["dict_of_tensors"]["A"] + inputs["list_of_tensors"][0]
    inputs = {"tensor": r(3), "dict_of_tensors": {k: r(3) for k in "ABCD"},
              "list_of_tensors": [r(3) for _ in range(4)]}
    batch = Dim("batch")
    return module(forward), (inputs,), {}, {"inputs": pytree.tree_map(lambda _: {0: batch}, inputs)}


@case("tuple_spec_second_arg", "test_non_arg_name_dynamic_shapes_api")
def _():
    def forward(self, a, b):
        return a.sum() + b.sum()
    return module(forward), (r(4, 4), r(4, 4)), {}, (None, {0: Dim("dim")})


@case("tuple_spec_with_kwargs", "test_non_arg_name_dynamic_shapes_api_with_kwarg")
def _():
    def forward(self, a, b, kw1, kw2):
        return a.sum() + b.sum() + kw1.sum() - kw2.sum()
    kwargs = {"kw2": torch.ones(4, 4), "kw1": torch.zeros(4, 4)}
    return module(forward), (r(4, 4), r(4, 4)), kwargs, (None, {0: Dim("dim")}, {0: Dim("dim_kw1")}, None)


@case("tuple_spec_container_min", "test_non_arg_name_dynamic_shapes_api_with_container_type")
def _():
    def forward(self, a, b):
        return a[0].sum() + a[1].sum() + b.sum()
    return module(forward), ((r(4, 4), r(4, 4)), r(4, 4)), {}, ((None, {0: Dim("dim", min=3)}), None)


@case("int_input_static_guard", "test_runtime_assert_for_prim")
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (torch.ones(7, 5), 5), {}, {"x": {0: Dim("dim0_x", min=6)}, "y": None}


@case("sym_sqrt_of_dim", "test_sym_sqrt")
def _():
    def forward(self, x):
        return x / torch.sym_sqrt(x.shape[0])
    return module(forward), (torch.ones(16, 4),), {}, {"x": {0: Dim("dim")}}


@case("round_half_length", "test_dynamic_sym_round")
def _():
    def forward(self, x):
        return x[: round(x.shape[0] / 2.0)]
    return module(forward), (r(8),), {}, {"x": {0: Dim("n", min=5, max=10)}}


@case("shift_of_length", "test_dynamic_lr_shift")
def _():
    def forward(self, x):
        return x[: x.shape[0] >> 1], x[: x.shape[0] << 1]
    return module(forward), (r(8),), {}, {"x": {0: Dim("N", min=5, max=10)}}


@case("pad_sequence_three", "test_pad_sequence")
def _():
    def forward(self, x, y, z):
        return torch._C._nn.pad_sequence([x, y, z])
    shapes = {"x": {0: Dim("batch_size")}, "y": {0: Dim("y")}, "z": {0: Dim("z")}}
    return module(forward), (r(5, 2), r(4, 2), r(3, 2)), {}, shapes


@case("input_mutation_tuple", "test_export_input_mutation_dynamic_shape")
def _():
    def forward(self, x, y):
        x[0].mul_(y)
        return x
    return module(forward), ((r(12), r(3, 2)), 2.0), {}, {"x": ({0: Dim("dim")}, None), "y": None}


@case("to_cpu_dynamic", "test_device_to_dynamic")
def _():
    def forward(self, x):
        return x.to("cpu")
    return module(forward), (torch.tensor([1, 2]),), {}, {"x": {0: Dim("i")}}


@case("linear_dynamic_batch", "test_export_decomps_dynamic")
def _():
    def forward(self, x):
        return self.lin(x)
    return module(forward, lin=nn.Linear(10, 1)), (r(5, 10),), {}, {"x": {0: Dim("batch")}}


@case("buffer_and_input_mutation", "test_export_for_training_with_dynamic_shapes")
def _():
    def forward(self, x):
        x.add_(5)
        self.buffer.add_(5)
        return x + self.buffer.sum()
    m = module(forward)
    m.register_buffer("buffer", torch.ones(4, 4))
    return m, (torch.ones(4, 4),), {}, ({0: Dim("x")},)


@case("kwargs_shared_name", "test_kwarg_dynamic_shapes_diff_order")
def _():
    def forward(self, baba, *, start, end):
        return baba.sum() + start.sum() + end.sum()
    end_dim = Dim("end_dim")
    spec = {"baba": {0: end_dim}, "end": {0: end_dim}, "start": {0: end_dim, 1: end_dim}}
    return module(forward), (torch.ones(4, 4),), {"end": torch.ones(4, 4, 4), "start": torch.ones(4, 4)}, spec


@case("intermediate_shape_arith", "test_intermediate_shape_comp")
def _():
    def forward(self, x, y):
        w = torch.cat([x, x], dim=0).repeat(y.shape[0])
        return w.shape[0] + x.shape[0]
    return module(forward), (r(6), r(4)), {}, {"x": (Dim("dx0"),), "y": (Dim("dy"),)}


@case("cond_on_dim", "test_export_cond_symbool_pred")
def _():
    def forward(self, x):
        return torch.cond(x.shape[0] > 4, lambda t: t.cos() + self.buf.cos().sum(), lambda t: t.sin(), [x])
    m = module(forward)
    m.register_buffer("buf", torch.ones(6, 4))
    return m, (torch.ones(6, 4),), {}, {"x": {0: Dim("dim0", min=3)}}


@case("vmap_dynamic", "test_vmap")
def _():
    def forward(self, x, y):
        return torch.vmap(lambda a, b: (a * b + 1).sum(dim=0))(x, y).sum(dim=0)
    args = (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.1, 0.2, 0.3]))
    return module(forward), args, {}, {"x": {0: DYNAMIC}, "y": {0: DYNAMIC}}


@case("where_single_arg_auto", "test_where_decomp")
def _():
    def forward(self, x):
        return torch.ops.aten.where.default(x > 0)
    x = r(2, 3)
    return module(forward), (x,), {}, ({0: AUTO, 1: AUTO},)


@case("slice_int_max_end", "test_export_slice_maxsize")
def _():
    def forward(self, *args):
        return torch.ops.aten.slice.Tensor(*args)
    return (module(forward), (r(10, 3, 8, 8), 0, 0, 9223372036854775807), {},
            (({0: Dim("dim")}, None, None, None),))


@case("reexported_program_dims", "test_retracable_ep")
def _():
    def forward(self, x):
        self.buf.add_(1)
        return x.sum() + self.buf.sum()
    m = module(forward)
    m.register_buffer("buf", torch.zeros(1))
    return m, (torch.ones(5, 5),), {}, ({0: Dim("dim0_x")},)


@case("branch_and_nested_inputs", "test_non_strict_dynamic_shapes")
def _():
    def forward(self, x, ys, zs, c):
        y = ys[0] + ys[1] + zs["a"] + zs["b"]
        w = self.u - self.v
        if x.shape[0] < 3 and c.shape[0] != 4:
            return x + w, x + y
        return x - w, x - y
    m = module(forward)
    m.register_buffer("u", torch.ones(1))
    m.register_buffer("v", torch.ones(1))
    dim = Dim("dim", min=3)
    args = (torch.ones(5), [torch.zeros(5), torch.ones(5)], {"a": torch.zeros(5), "b": torch.ones(5)},
            torch.ones(4))
    return m, args, {}, ({0: dim}, [{0: dim}, {0: dim}], {"a": {0: dim}, "b": {0: dim}}, None)


# Relations between named dims that torch keeps as input checks although they exclude sizes of one dim (it
# raises only on guards of one dim): shapeproof exports them too.

@case("relation_flatten_three_inputs", "test_disable_forced_specializations_ok (two flattened inputs)")
def _():
    def forward(self, x, y, z):
        return x.reshape([-1]) + y.reshape([-1]) + z
    spec = {"x": [Dim(f"dx{i}", min=2) for i in range(2)], "y": [Dim(f"dy{i}", min=2) for i in range(2)],
            "z": [Dim("dz0", min=4)]}
    return module(forward), (r(6, 8), r(3, 16), r(48)), {}, spec


@case("relation_flatten_3d", "test_disable_forced_specializations_ok (a 3-d input flattened)",
      probes=lambda: [((r(9, 7, 2), r(126)), {}), ((r(4, 3, 2), r(10)), {})])
def _():
    def forward(self, x, y):
        return x.reshape([-1]) + y
    spec = {"x": (Dim("dx0", min=2), Dim("dx1", min=2), Dim("dx2", min=2)), "y": (Dim("dy", min=8),)}
    return module(forward), (r(4, 3, 2), r(24)), {}, spec


@case("relation_branches_of_powers", "test_allow_explicit_guards_as_runtime_asserts",
      probes=lambda: [((r(9), r(27)), {}), ((r(4), r(4)), {}), ((r(10), r(9)), {})])
def _():
    def forward(self, x, y):
        if x.shape[0] == y.shape[0]:
            return x + y
        if x.shape[0] == y.shape[0] ** 3:
            return x + 2, y + 3
        if x.shape[0] ** 2 == y.shape[0] * 3:
            return x * 2.0, y * 3.0
    return module(forward), (r(6), r(12)), {}, {"x": [Dim("dx", min=4)], "y": [Dim("dy", min=4)]}


@case("relation_difference_of_squares", "test_cse_for_symint")
def _():
    def forward(self, x, y):
        d = x.shape[0] ** 2 - y.shape[0] ** 2
        if d >= 4 and d <= 20 and d != 15:
            return x * 2, y * 2
    return module(forward), (r(5), r(3)), {}, {"x": (Dim("dx"),), "y": (Dim("dy"),)}


@case("relation_view_pairs", "test_disable_forced_specializations_ok (view(-1, 2) over two named dims)",
      probes=lambda: [((r(3, 5),), {}), ((r(3, 4),), {}), ((r(5, 2),), {})])
def _():
    def forward(self, x):
        return x.view(-1, 2)
    return module(forward), (r(4, 6),), {}, {"x": (Dim("a"), Dim("b"))}


# A loop's body runs on other values at every step: a counter read with .item() is no constant.

def _while_loop_cases() -> None:
    from torch._higher_order_ops import while_loop

    def indexed(self, x, y0):
        def cond(i, out, y):
            return i < out.size(0)

        def body(i, out, y):
            k = i.item()
            torch._check(k >= 0)
            torch._check(k < x.size(0))
            y = x[k] + y
            out = out.clone()
            out[k] = y
            return i + 1, out, y

        return while_loop(cond, body, [torch.tensor(0), torch.zeros_like(x), y0])[1]

    def summed(self, x):
        def body(i, acc):
            return i + 1, acc + x[i.item()]
        return while_loop(lambda i, acc: i < 3, body, [torch.tensor(0), torch.zeros(x.shape[1])])[1]

    for name, forward, args in (("while_loop_item_index", indexed, (r(6, 4), r(4))),
                                ("while_loop_counter_item", summed, (r(5, 4),))):
        for suffix, kind in (("", None), ("_auto", AUTO), ("_dynamic", DYNAMIC)):
            def factory(forward=forward, args=args, kind=kind):
                model, inputs = module(forward), tuple(a.clone() for a in args)
                return model, inputs, {}, None if kind is None else each_dim(kind, model, inputs, {})
            case(name + suffix, "test_while_loop_tensor_constant_idx")(factory)


_while_loop_cases()


# ---------------------------------------------------------------------------------------------- spec-errors
# Specs torch rejects (UserError, ConstraintViolationError, ValueError, ...): shapeproof must too, as clearly.

def spec_error(name, source, **kw):
    return case(name, source, group="spec-errors", **kw)


@spec_error("example_below_min", "test_export_constraints_error_not_in_range")
def _():
    def forward(self, x):
        return x + 1
    return module(forward), (torch.zeros(3),), {}, {"x": {0: Dim("dim_x", min=6)}}


@spec_error("unrelated_dim_needs_plus_one", "test_derived_dim_basic")
def _():
    def forward(self, x, y):
        return x + y[1:]
    return module(forward), (r(5), r(6)), {}, ({0: Dim("dimx", min=3, max=6)}, {0: Dim("dimy", min=4, max=7)})


@spec_error("derived_twice_mismatch", "test_derived_dim_basic")
def _():
    def forward(self, x, y):
        return x + y[1:]
    dx = Dim("dimx", min=3, max=6)
    return module(forward), (r(5), r(6)), {}, ({0: dx}, {0: dx * 2})


@spec_error("derived_nested_mismatch", "test_derived_dim_nested")
def _():
    def forward(self, z, y):
        return z[1:] + y[1::2]
    dx = Dim("dimx", min=3, max=6)
    return module(forward), (r(6), r(11)), {}, ({0: dx + 1}, {0: dx * 2 - 1})


@spec_error("derived_not_integer", "test_derived_dim_integer")
def _():
    def forward(self, w):
        return w[::2] if w.shape[0] % 2 == 0 else w[1:-1:2]
    return module(forward), (r(10),), {}, ({0: Dim("dimx", min=3, max=6) * 2 + 1},)


@spec_error("separate_dim_needs_root", "test_derived_dim_out_of_order_simplified")
def _():
    def forward(self, x, y, z):
        return x + y[1:] + z[2:]
    root = Dim("_dimz", min=6, max=8)
    return module(forward), (r(5), r(6), r(7)), {}, ({0: root - 2}, {0: root - 1},
                                                     {0: Dim("dimz", min=6, max=8)})


@spec_error("derived_root_specializes", "test_specialize_derived_dim_roots")
def _():
    def forward(self, x, y):
        return x.reshape([-1]) + y
    dy = Dim("dy", min=6)
    return module(forward), (r(6, 2), r(12)), {}, {"x": (dy - 6, 2), "y": (dy,)}


@spec_error("derived_min_negative", "test_specialize_derived_dim_roots (a derived dim below 0)")
def _():
    def forward(self, x, y):
        return x + y[5:]
    dx = Dim("dx", min=3, max=10)
    return module(forward), (r(4), r(9)), {}, {"x": (dx,), "y": (dx - 5,)}


@spec_error("static_int_mismatch", "test_static_dim_constraints")
def _():
    def forward(self, x, y, z):
        return self.lin(x) + y[1:], z * 2.0
    return module(forward, lin=nn.Linear(6, 4)), (r(4, 6), r(5, 4), r(3, 3)), {}, ((5, None), None, None)


@spec_error("static_int_mismatch_with_dims", "test_static_dim_constraints")
def _():
    def forward(self, x, y, z):
        return self.lin(x) + y[1:], z * 2.0
    dx = Dim("dx", min=3, max=6)
    return (module(forward, lin=nn.Linear(6, 4)), (r(4, 6), r(5, 4), r(3, 3)), {},
            ((dx, 9), (dx + 1, 4), (3, 3)))


@spec_error("derived_dims_both_specialize", "test_issue_161902")
def _():
    def forward(self, x, y):
        return x + y
    dx = Dim("dx", min=1, max=2)
    return module(forward), (r(2, 3), r(2, 3)), {}, {"x": (2 * dx, STATIC), "y": (dx + 1, STATIC)}


@spec_error("static_against_named", "test_dim_auto_and_dim")
def _():
    def forward(self, x, y):
        return x - y
    return module(forward), (r(4), r(4)), {}, {"x": (STATIC,), "y": (Dim("dy"),)}


@spec_error("dynamic_zero_one_example", "test_dim_dynamic_specialization")
def _():
    def forward(self, x):
        return x + 2
    return module(forward), (r(0, 1),), {}, {"x": {0: DYNAMIC, 1: DYNAMIC}}


@spec_error("dynamic_min_specialized_by_assert", "test_dim_dynamic_specialization")
def _():
    def forward(self, x):
        assert x.shape[0] <= 32
        return x + 2
    return module(forward), (r(32),), {}, {"x": {0: DYNAMIC(min=32)}}


@spec_error("hint_max_below_inferred_min", "test_dim_hint_range_violations")
def _():
    def forward(self, xs):
        x, y = xs["data"][0]
        assert y.shape[0] <= 32
        return x[6:], y + 2
    x, y = r(8), r(8)
    shapes = ShapesCollection()
    shapes[x] = [DYNAMIC(max=5)]
    return module(forward), ({"data": [[x, y]]},), {}, shapes


@spec_error("hint_min_above_inferred_max", "test_dim_hint_range_violations")
def _():
    def forward(self, xs):
        x, y = xs["data"][0]
        assert y.shape[0] <= 32
        return x[6:], y + 2
    x, y = r(8), r(8)
    shapes = ShapesCollection()
    shapes[y] = [AUTO(min=48, max=62)]
    return module(forward), ({"data": [[x, y]]},), {}, shapes


@spec_error("static_hint_range_conflict", "test_dim_hint_range_violations")
def _():
    def forward(self, x):
        return x + 2
    return module(forward), (r(4),), {}, {"x": [STATIC(min=6, max=8)]}


@spec_error("hint_ranges_two_conflicts", "test_dim_hint_range_violations")
def _():
    def forward(self, x, y):
        assert x.shape[0] <= 32
        assert y.shape[0] >= 128
        return x + 2, y + 2
    return module(forward), (r(16), r(256)), {}, {"x": (DYNAMIC(min=33),), "y": (DYNAMIC(max=127),)}


@spec_error("spec_keys_not_arg_names", "test_mismatched_dynamic_shapes")
def _():
    dim = Dim("dim")
    return _nested_pair({"k": {"k": [dim, dim]}})


@spec_error("spec_rank_mismatch", "test_mismatched_dynamic_shapes")
def _():
    def forward(self, x):
        return x + 2
    return module(forward), (r(4, 8, 6),), {}, {"x": (Dim("dim"), None)}


@spec_error("same_name_two_definitions", "test_multiple_definitions_same_name_dim")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    a, b = Dim("C", min=3), Dim("C", max=12)
    return module(forward), (r(10, 10), r(10, 10)), {}, {"x": (a, b), "y": (b, a)}


@spec_error("named_batch_but_other_static", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    return module(forward), (r(10, 2, 3),), {"y": r(10, 3, 4)}, {"x": {0: Dim("batch")}, "y": None}


@spec_error("two_named_dims_must_be_equal", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch, m, k1, k2, n = dims("batch", "M", "K1", "K2", "N")
    return module(forward), (r(10, 2, 3), r(10, 3, 4)), {}, {"x": (batch, m, k1), "y": (batch, k2, n)}


@spec_error("named_dim_specialized_by_static_peer", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch, m, k1, n = dims("batch", "M", "K1", "N")
    return module(forward), (r(10, 2, 3), r(10, 3, 4)), {}, {"x": (batch, m, k1), "y": (batch, None, n)}


@spec_error("named_dims_branch_and_divisibility", "test_export_api_with_dynamic_shapes")
def _():
    def forward(self, x, y):
        if x.shape[0] < 16 and y.shape[1] % 3 == 0:
            return torch.matmul(x, y)
        return x + y
    batch, m, k, n = dims("batch", "M", "K", "N")
    return module(forward), (r(10, 2, 3), r(10, 3, 4)), {}, {"x": (batch, m, k), "y": (batch, k, n)}


@spec_error("new_root_needed", "test_suggested_fixes_new_roots")
def _():
    def forward(self, x, y, z):
        if x.shape[0] >= 5 and x.shape[0] <= 36 and y.shape[0] % 3 == 0:
            return x + y[1:] + z[3:]
        return None
    return module(forward), (r(11), r(12), r(14)), {}, {"x": (Dim("dx"),), "y": (Dim("dy"),),
                                                        "z": (Dim("dz"),)}


@spec_error("refine_to_static", "test_refine_dynamic_shapes_from_suggested_fixes")
def _():
    def forward(self, x, y, z):
        return x + y[1:] + z[2:], x @ self.w
    m = module(forward)
    m.register_buffer("w", torch.randn(4, 4))
    dx = Dim("dx", max=16)
    return m, (r(4), r(5), r(6)), {}, {"x": (dx,), "y": (dx + 1,), "z": (dx + 2,)}


@spec_error("refine_bounds", "test_refine_dynamic_shapes_from_suggested_fixes")
def _():
    def forward(self, x, y):
        if x.shape[0] >= 6 and y.shape[0] <= 16:
            return x * 2.0, y + 1
        return None
    return module(forward), (r(16), r(12)), {}, {"x": (Dim("dx"),), "y": (Dim("dy"),)}


@spec_error("refine_divisibility", "test_refine_dynamic_shapes_from_suggested_fixes")
def _():
    def forward(self, x):
        if x.shape[0] >= 9:
            return x.reshape([-1, 3])
        return None
    return module(forward), (r(15),), {}, ((Dim("dx"),),)


@spec_error("refine_to_relation", "test_refine_dynamic_shapes_from_suggested_fixes")
def _():
    def forward(self, x, y):
        return x + y[4:]
    spec = {"x": (Dim("dx0"), Dim("dx1")), "y": (Dim("dy0"), Dim("dy1"))}
    return module(forward), (r(6, 4), r(10, 4)), {}, spec


@spec_error("example_below_shared_min", "test_non_strict_dynamic_shapes")
def _():
    def forward(self, x, ys):
        return x + ys[0] + ys[1]
    dim = Dim("dim", min=3)
    return module(forward), (torch.ones(2),
                             [torch.zeros(2), torch.ones(2)]), {}, ({0: dim}, [{0: dim}, {0: dim}])


@spec_error("branch_needs_max", "test_non_strict_dynamic_shapes_suggested_fixes")
def _():
    def forward(self, x, c):
        if x.shape[0] <= 6:
            return x + 1, c + 2
        return x - 1, c - 2
    return module(forward), (torch.ones(5), torch.ones(4)), {}, ({0: Dim("dim", min=3)}, None)


@spec_error("int_input_dynamic_specialized", "test_symint_input_specialization")
def _():
    def forward(self, x, y):
        assert x == 3
        assert y.shape[0] == 4
        return x * y
    return module(forward), (3, r(4, 4)), {}, (DYNAMIC, None)


@spec_error("int_input_range_outside", "test_symint_input_ranges")
def _():
    def forward(self, x, y):
        assert x > 10
        assert x < 20
        return x * y
    return module(forward), (14, r(4, 4)), {}, (DYNAMIC(min=3, max=10), None)


@spec_error("shapes_collection_dynamic_specialized", "test_dynamic_shapes_bounds")
def _():
    def forward(self, x, y, zs):
        return x[:3] + y @ torch.cat(zs)
    x, y, zs = r(7, 5), r(3, 6), [r(2, 5), r(4, 5)]
    shapes = ShapesCollection()
    for t in (x, y, *zs):
        shapes[t] = (DYNAMIC, DYNAMIC)
    return module(forward), (x, y, zs), {}, shapes


@spec_error("interpolate_int_size_specializes", "test_int_shape_specialization")
def _():
    def forward(self, x):
        size = (int(x.shape[-2] / 1), int(x.shape[-1] / 1))
        return F.interpolate(x, size=size, mode="bilinear")
    return module(forward), (r(1, 3, 8, 8),), {}, {"x": {2: DYNAMIC, 3: DYNAMIC}}


@spec_error("two_named_dims_add", "torch.export docs: named Dims that must be equal (Constraints violated)")
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(4, 3), r(4, 3)), {}, {"x": (Dim("a"), None), "y": (Dim("b"), None)}


@spec_error("example_above_max", "test_export_constraints_error_not_in_range (max)")
def _():
    def forward(self, x):
        return x * 3
    return module(forward), (r(9),), {}, {"x": {0: Dim("n", max=8)}}


# ---------------------------------------------------------------------------------------------- patterns
# Ops that relate dims, under Dim.AUTO / Dim.DYNAMIC / named Dims (torch.export docs, "Dynamic shapes").

def pattern(name, source, **kw):
    return case(name, source, group="patterns", **kw)


@pattern("auto_add_equality", "issue 13's first example; test_dim_hint_ranges")
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(3, 4), r(3, 4)), {}, {"x": {0: AUTO, 1: AUTO}, "y": {0: AUTO, 1: AUTO}}


@pattern("dynamic_add_equality", "torch.export docs: Dim.DYNAMIC")
def _():
    def forward(self, x, y):
        return x * y
    return module(forward), (r(3, 4), r(3, 4)), {}, {"x": {0: DYNAMIC, 1: DYNAMIC},
                                                     "y": {0: DYNAMIC, 1: DYNAMIC}}


@pattern("auto_specialize_assert", "test_dont_duck_size_for_auto_dynamic")
def _():
    def forward(self, x, y):
        assert y.shape[1] == 4
        return x + y
    return module(forward), (r(5, 4), r(5, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("auto_linear_offset", "test_refine_dynamic_shapes_from_suggested_fixes (x + y[4:], AUTO)")
def _():
    def forward(self, x, y):
        return x + y[4:]
    return module(forward), (r(6, 4), r(10, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("auto_strided_relation", "test_dim_auto_and_dim (x[1::4] + y, AUTO)")
def _():
    def forward(self, x, y):
        return x[1::4] + y
    return module(forward), (r(13), r(3)), {}, {"x": (AUTO,), "y": (AUTO,)}


@pattern("auto_divisibility_branch", "test_dim_dynamic_divisibility (AUTO)")
def _():
    def forward(self, x):
        return x * 2 if x.size(0) % 2 == 0 else x * 0
    return module(forward), (r(4),), {}, {"x": {0: AUTO}}


@pattern("named_divisibility_branch", "test_dim_dynamic_divisibility (named Dim)")
def _():
    def forward(self, x):
        return x * 2 if x.size(0) % 2 == 0 else x * 0
    return module(forward), (r(4),), {}, {"x": {0: Dim("n")}}


@pattern("auto_bound_branch", "test_non_strict_dynamic_shapes_suggested_fixes (AUTO)")
def _():
    def forward(self, x):
        return x + 1 if x.shape[0] <= 6 else x - 1
    return module(forward), (r(5),), {}, {"x": {0: AUTO}}


@pattern("auto_slice_from_one", "test_derived_dim_basic (x[1:] + y, AUTO)")
def _():
    def forward(self, x, y):
        return x[1:] + y
    return module(forward), (r(5), r(4)), {}, {"x": (AUTO,), "y": (AUTO,)}


@pattern("reshape_flat_named", "issue 13: x.reshape(-1) + y.reshape(-1) needs dx0*dx1 == dy0*dy1")
def _():
    def forward(self, x, y):
        return x.reshape(-1) + y.reshape(-1)
    spec = {"x": (Dim("dx0"), Dim("dx1")), "y": (Dim("dy0"), Dim("dy1"))}
    return module(forward), (r(2, 6), r(3, 4)), {}, spec


@pattern("reshape_flat_auto", "issue 13: x.reshape(-1) + y.reshape(-1), AUTO")
def _():
    def forward(self, x, y):
        return x.reshape(-1) + y.reshape(-1)
    return module(forward), (r(2, 6), r(3, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("view_merge_batch_time", "torch.export docs: view with dynamic dims")
def _():
    def forward(self, x):
        b, t, d = x.shape
        return self.lin(x.view(b * t, d)).view(b, t, -1)
    return module(forward, lin=nn.Linear(8, 4)), (r(2, 5, 8),), {}, {"x": (Dim("b"), Dim("t"), None)}


@pattern("flatten_unflatten_auto", "torch.export docs: flatten/unflatten")
def _():
    def forward(self, x):
        return x.flatten(1).unflatten(1, (x.shape[1], -1)) * 2
    return module(forward), (r(2, 3, 4),), {}, {"x": (AUTO, AUTO, AUTO)}


@pattern("cat_independent_named", "torch.export docs: cat")
def _():
    def forward(self, x, y):
        return torch.cat([x, y]) * 2
    return module(forward), (r(3, 4), r(5, 4)), {}, {"x": (Dim("dx"), None), "y": (Dim("dy"), None)}


@pattern("cat_feature_auto", "torch.export docs: cat needs equal other dims")
def _():
    def forward(self, x, y):
        return torch.cat([x, y], dim=1)
    return module(forward), (r(3, 4), r(3, 2)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("stack_auto", "torch.export docs: stack")
def _():
    def forward(self, x, y):
        return torch.stack([x, y])
    return module(forward), (r(3, 4), r(3, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("split_fixed_size_named", "torch.export docs: split with a dynamic dim")
def _():
    def forward(self, x):
        return [part * 2 for part in x.split(3)]
    return module(forward), (r(9, 2),), {}, {"x": (Dim("n"), None)}


@pattern("chunk_even_derived", "torch.export docs: chunk of a derived dim")
def _():
    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        return a - b
    return module(forward), (r(3, 8),), {}, {"x": (Dim("b"), 2 * Dim("half"))}


@pattern("expand_to_batch", "torch.export docs: expand")
def _():
    def forward(self, x, y):
        return x.expand(y.shape[0], -1) + y
    return module(forward), (r(1, 4), r(3, 4)), {}, {"x": None, "y": {0: Dim("batch")}}


@pattern("repeat_dynamic", "torch.export docs: repeat")
def _():
    def forward(self, x):
        return x.repeat(2, 1)
    return module(forward), (r(3, 4),), {}, {"x": {0: Dim("n"), 1: Dim("m")}}


@pattern("repeat_interleave_oblivious", "test_export.py repeat_interleave tests (backed_size_oblivious)",
         context=oblivious)
def _():
    def forward(self, x):
        return x.repeat_interleave(2, dim=0)
    return module(forward), (r(1, 4),), {}, {"x": {0: Dim("n")}}


@pattern("conv2d_stride_named", "test_conv_dynamic (strided)")
def _():
    def forward(self, x):
        return self.conv(x)
    spec = {"x": {2: Dim("h", min=8, max=64), 3: Dim("w", min=8, max=64)}}
    return module(forward, conv=nn.Conv2d(3, 4, 3, stride=2)), (r(1, 3, 16, 12),), {}, spec


@pattern("conv1d_stride_auto", "test_conv_dynamic (Conv1d, AUTO)")
def _():
    def forward(self, x):
        return self.conv(x)
    return module(forward, conv=nn.Conv1d(2, 4, 5, stride=3)), (r(2, 2, 20),), {}, {"x": (AUTO, None, AUTO)}


@pattern("maxpool_ceil_named", "torch.export docs: pooling with ceil_mode")
def _():
    def forward(self, x):
        return self.pool(x)
    spec = {"x": {2: Dim("h", min=2), 3: Dim("w", min=2)}}
    return module(forward, pool=nn.MaxPool2d(2, ceil_mode=True)), (r(1, 2, 9, 8),), {}, spec


@pattern("avgpool_stride_dynamic", "torch.export docs: pooling, Dim.DYNAMIC")
def _():
    def forward(self, x):
        return self.pool(x)
    return module(forward, pool=nn.AvgPool1d(4, stride=2)), (r(2, 3, 12),), {}, {"x": {2: DYNAMIC}}


@pattern("pad_to_multiple_named", "torch.export docs: pad then reshape")
def _():
    def forward(self, x):
        x = F.pad(x, (0, 0, 0, (-x.shape[1]) % 4))
        b, t, d = x.shape
        return x.reshape(b, t // 4, 4 * d)
    return module(forward), (r(2, 10, 3),), {}, {"x": {0: Dim("b"), 1: Dim("t", min=2, max=256)}}


@pattern("pad_constant_dynamic", "torch.export docs: F.pad")
def _():
    def forward(self, x):
        return F.pad(x, (1, 2))
    return module(forward), (r(2, 5),), {}, {"x": {0: DYNAMIC, 1: DYNAMIC}}


@pattern("interpolate_scale_auto", "test_solver_unsupported_sympy_function (scale 2)")
def _():
    def forward(self, x):
        return F.interpolate(x, scale_factor=2, mode="nearest")
    return module(forward), (r(1, 2, 5, 6),), {}, {"x": {2: AUTO, 3: AUTO}}


@pattern("interpolate_to_other_auto", "torch.export docs: interpolate to another input's size")
def _():
    def forward(self, x, y):
        return F.interpolate(x, size=y.shape[-2:], mode="nearest") + y
    return module(forward), (r(1, 2, 4, 4), r(1, 2, 8, 8)), {}, {"x": {2: AUTO, 3: AUTO},
                                                                 "y": {2: AUTO, 3: AUTO}}


@pattern("batch_dynamic_features_static", "torch.export docs: dynamic batch")
def _():
    def forward(self, x):
        return torch.relu(self.lin(x))
    return module(forward, lin=nn.Linear(8, 4)), (r(3, 8),), {}, {"x": {0: Dim("batch", max=64)}}


@pattern("batch_and_seq_layernorm", "torch.export docs: dynamic batch and sequence")
def _():
    def forward(self, x):
        return self.lin(self.norm(x))
    m = module(forward, norm=nn.LayerNorm(6), lin=nn.Linear(6, 6))
    return m, (r(2, 7, 6),), {}, {"x": {0: Dim("batch"), 1: Dim("seq", max=128)}}


@pattern("slice_to_other_auto", "torch.export docs: slicing with a symbolic bound (AUTO)")
def _():
    def forward(self, x, y):
        return x[: y.shape[0]] + y
    return module(forward), (r(6, 2), r(4, 2)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("slice_to_other_named", "torch.export docs: slicing with a symbolic bound (named Dims)")
def _():
    def forward(self, x, y):
        return x[: y.shape[0]] + y
    return module(forward), (r(6, 2), r(4, 2)), {}, {"x": (Dim("dx"), None), "y": (Dim("dy"), None)}


@pattern("narrow_inner", "torch.export docs: narrow with symbolic length")
def _():
    def forward(self, x):
        return x.narrow(0, 1, x.shape[0] - 2)
    return module(forward), (r(6, 3),), {}, {"x": {0: Dim("n", min=3)}}


@pattern("kwargs_only_inputs", "test_kwargs_reorder with dynamic dims")
def _():
    def forward(self, *, x, y, z):
        return x + y + z
    batch = Dim("batch")
    kwargs = {"z": torch.ones(3), "y": torch.ones(3), "x": torch.ones(3)}
    return module(forward), (), kwargs, {"x": {0: batch}, "y": {0: batch}, "z": {0: batch}}


@pattern("nested_dict_list_batch", "test_export_func_with_pytree_kwargs with dynamic batch")
def _():
    def forward(self, x, a, b):
        return x + a["kw1"] + b[0], a["kw2"] * b[1]
    batch = Dim("batch")
    args = (r(2, 3),)
    kwargs = {"a": {"kw1": r(2, 3), "kw2": r(3, 4)}, "b": [r(2, 3), r(3, 4)]}
    spec = {"x": {0: batch}, "a": {"kw1": {0: batch}, "kw2": None}, "b": [{0: batch}, None]}
    return module(forward), args, kwargs, spec


@pattern("sdpa_dynamic_seq", "torch.export docs: attention with dynamic sequence")
def _():
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
    seq = Dim("seq", max=64)
    spec = {"q": {2: seq}, "k": {2: seq}, "v": {2: seq}}
    return module(forward), (r(1, 2, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), {}, spec


@pattern("embedding_dynamic_ids", "torch.export docs: integer inputs with dynamic length")
def _():
    def forward(self, ids):
        return self.emb(ids).sum(1)
    ids = torch.randint(0, 10, (2, 7))
    return module(forward, emb=nn.Embedding(10, 4)), (ids,), {}, {"ids": {0: Dim("batch"), 1: Dim("seq")}}


@pattern("arange_from_dim", "torch.export docs: tensor constructors from dims")
def _():
    def forward(self, x):
        return x + torch.arange(x.shape[1])
    return module(forward), (r(2, 5),), {}, {"x": {0: AUTO, 1: AUTO}}


@pattern("squeeze_static_one", "torch.export docs: Dim.STATIC with size 1")
def _():
    def forward(self, x):
        return x.squeeze(1) * 2
    return module(forward), (r(4, 1, 3),), {}, {"x": (Dim("b"), STATIC, Dim("c"))}


@pattern("matmul_inner_auto", "torch.export docs: matmul, AUTO")
def _():
    def forward(self, x, y):
        return x @ y
    return module(forward), (r(3, 4), r(4, 5)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@pattern("broadcast_mask_where", "torch.export docs: where with broadcasting")
def _():
    def forward(self, x, mask):
        return torch.where(mask, x, torch.zeros_like(x))
    mask = torch.rand(1, 5) > 0.5
    return module(forward), (r(3, 5), mask), {}, {"x": (Dim("b"), Dim("t")), "mask": (None, Dim("t"))}


@pattern("unsqueeze_transpose_named", "torch.export docs: permute/transposes keep dims")
def _():
    def forward(self, x):
        return x.unsqueeze(0).transpose(1, 2).contiguous().sum(0)
    return module(forward), (r(3, 5),), {}, {"x": (Dim("a"), Dim("b"))}


# ---------------------------------------------------------------------------------------------- zero-one
# 0/1 example sizes, with and without torch's backed_size_oblivious switch.

def zero_one(name, source, **kw):
    return case(name, source, group="zero-one", **kw)


@zero_one("named_example_one", "torch.export docs: 0/1 specialization (a named Dim with example 1)")
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(1, 3),), {}, {"x": (Dim("n"), None)}


@zero_one("named_example_one_oblivious", "test_baddbmm (backed_size_oblivious keeps 1 symbolic)",
          context=oblivious)
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(1, 3),), {}, {"x": (Dim("n"), None)}


@zero_one("named_example_zero", "torch.export docs: 0/1 specialization (a named Dim with example 0)")
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(0, 3),), {}, {"x": (Dim("n"), None)}


@zero_one("named_example_zero_oblivious", "test_ends_of_bounds_oblivious (example 0)", context=oblivious)
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(0, 3),), {}, {"x": (Dim("n"), None)}


@zero_one("auto_example_one", "torch.export docs: Dim.AUTO specializes 0/1")
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(1, 4), r(1, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@zero_one("auto_example_one_oblivious", "torch.export docs: Dim.AUTO with backed_size_oblivious",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(1, 4), r(1, 4)), {}, {"x": (AUTO, AUTO), "y": (AUTO, AUTO)}


@zero_one("dynamic_example_one", "test_dim_dynamic_specialization (example 1)")
def _():
    def forward(self, x):
        return x + 2
    return module(forward), (r(1, 4),), {}, {"x": {0: DYNAMIC}}


@zero_one("dynamic_example_one_oblivious", "test_dim_dynamic_specialization under backed_size_oblivious",
          context=oblivious)
def _():
    def forward(self, x):
        return x + 2
    return module(forward), (r(1, 4),), {}, {"x": {0: DYNAMIC}}


@zero_one("baddbmm_oblivious", "test_baddbmm", context=oblivious)
def _():
    def forward(self, x):
        return torch.ops.aten.baddbmm.default(self.bias, x, self.weight)
    m = module(forward)
    m.weight = nn.Parameter(r(4, 8, 12))
    m.bias = nn.Parameter(r(4, 1, 12))
    return m, (r(4, 1, 8),), {}, ({1: Dim("batch")},)


@zero_one("baddbmm_plain", "test_baddbmm without backed_size_oblivious")
def _():
    def forward(self, x):
        return torch.ops.aten.baddbmm.default(self.bias, x, self.weight)
    m = module(forward)
    m.weight = nn.Parameter(r(4, 8, 12))
    m.bias = nn.Parameter(r(4, 1, 12))
    return m, (r(4, 1, 8),), {}, ({1: Dim("batch")},)


@zero_one("buffer_slice_assign_oblivious", "test_ends_of_bounds_oblivious", context=oblivious)
def _():
    def forward(self, x, y):
        self.buf[0: x.shape[0]] = x
        return x + 2, y[:, ::1]
    m = module(forward)
    m.register_buffer("buf", torch.zeros(10))
    spec = {"x": {0: Dim("dx", min=1, max=10)}, "y": {0: Dim("dy0"), 1: Dim("dy1")}}
    return m, (r(10), r(8, 9)), {}, spec


@zero_one("nonzero_new_ones_oblivious", "test_colin_unbacked_backed_vr_sub", context=oblivious)
def _():
    def forward(self, a, b, c):
        nz = torch.nonzero(a)
        ones = a.new_ones([nz.size(0), b.size(0)])
        torch._check(ones.size(0) >= 1)
        return torch.add(ones, c)
    return module(forward), (torch.ones(16), r(8), r(16, 8)), {}, {"a": None, "b": None,
                                                                   "c": (DYNAMIC, STATIC)}


@zero_one("stack_reshape_oblivious", "test_reshape_view_backed_size_oblivious", context=oblivious)
def _():
    def forward(self, x):
        y = x[:-1, :]
        return torch.stack([y] * 3, dim=0).reshape(-1, 3, 8)
    return module(forward), (r(10, 8),), {}, {"x": (AUTO, STATIC)}


@zero_one("range_one_two", "test_dim_1_2")
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(2, 2),), {}, ({0: Dim("dx", min=1, max=2), 1: None},)


@zero_one("derived_range_one_two", "test_derived_dim_1_2")
def _():
    def forward(self, x, y):
        return x + y[1:]
    dx = Dim("dx", min=1, max=2)
    return module(forward), (r(2, 2), r(3, 2)), {}, ({0: dx, 1: None}, {0: dx + 1, 1: None})


@zero_one("broadcast_named_one", "torch.export docs: broadcasting against a size-1 example")
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(3, 4), r(1, 4)), {}, {"x": (Dim("b"), None), "y": (Dim("by"), None)}


@zero_one("declared_min_zero", "torch.export docs: Dim min=0")
def _():
    def forward(self, x):
        return x.sum(0) + x.shape[0]
    return module(forward), (r(3, 2),), {}, {"x": (Dim("n", min=0, max=16), None)}


# ---------------------------------------------------------------------------------------------- deferred
# Data-dependent values: torch keeps checks on them as runtime asserts in the program.

def deferred(name, source, **kw):
    return case(name, source, group="deferred", **kw)


@deferred("assert_item_positive", "issue 13: assert y.max().item() > 0 becomes a runtime assert",
          probes=lambda: [((r(3, 2), -torch.arange(1, 4)), {})])
def _():
    def forward(self, x, y):
        assert y.max().item() > 0
        return x * y.max()
    return module(forward), (r(3, 2), torch.tensor([1, 2, 3])), {}, {"x": (Dim("n"), None), "y": None}


@deferred("check_item_range", "test_constrain_size_with_constrain_value",
          probes=lambda: [((torch.tensor([[1, 1], [1, 1]]), torch.ones(2, 3, dtype=torch.int64)), {})])
def _():
    def forward(self, x, y):
        n = x.max().item()
        torch._check(n >= 2)
        torch._check(n <= 10)
        return y + n
    args = (torch.full((2, 2), 3), torch.ones(2, 3, dtype=torch.int64))
    return module(forward), args, {}, {"x": None, "y": {0: Dim("b")}}


@deferred("check_is_size_full", "TestDynamismExpression.test_export_inline_constraints")
def _():
    def forward(self, x):
        b = x.item()
        torch._check_is_size(b)
        return torch.full((b, 1), 1)
    return module(forward), (torch.tensor([3]),), {}, None


@deferred("item_bounded_by_size", "test_runtime_assert_with_size",
          probes=lambda: [((torch.tensor(12), torch.ones(10)), {})])
def _():
    def forward(self, x, y):
        a = x.item()
        torch._check_is_size(a)
        torch._check(a <= y.size(0))
        return y[:a]
    return module(forward), (torch.tensor(5), torch.ones(10)), {}, {"x": None, "y": {0: Dim("t")}}


@deferred("item_checks_in_submodules", "test_unflatten_asserts")
def _():
    def forward(self, x, y):
        b = x.item()
        torch._check_is_size(b)
        torch._check(b < y.size(0))
        return y[:b] * 2, y[: b // 2]
    return module(forward), (torch.tensor(3), r(10)), {}, {"x": None, "y": (Dim("moo"),)}


@deferred("narrow_unbacked_length", "TestDynamismExpression.test_export_slice_unbacked_dim1")
def _():
    def forward(self, x, seq_len):
        length = seq_len.item()
        torch._check_is_size(length, max=x.size(1))
        return x.narrow(1, 0, length)
    return module(forward), (r(10, 7), torch.tensor(5)), {}, {"x": (Dim("a"), Dim("b")), "seq_len": None}


@deferred("nonzero_bounded", "test_nonzero_dynamic")
def _():
    def forward(self, x):
        return torch.nonzero(x)
    spec = {"x": {0: Dim("dim0_x", max=100), 1: Dim("dim1_x_max", max=7)}}
    return module(forward), (r(3, 4, 5),), {}, spec


@deferred("masked_select_bounded", "test_masked_select_dynamic")
def _():
    def forward(self, x):
        return torch.masked_select(x, x.ge(0.5))
    spec = {"x": {0: Dim("dim0_x", max=100), 1: Dim("dim1_x_max", max=7)}}
    return module(forward), (r(3, 4, 5),), {}, spec


@deferred("nonzero_static_size", "test_mask_nonzero_static")
def _():
    def forward(self, seq_embeddings, mask, exp):
        index = torch.nonzero_static(mask, size=exp.shape[0])
        chunked = index.chunk(chunks=mask.dim(), dim=1)
        return seq_embeddings[chunked].squeeze() * 2
    batch = Dim("batch")
    spec = {"seq_embeddings": (batch, None), "mask": (batch, None), "exp": (Dim("exp_size", max=100),)}
    return module(forward), (r(5, 5), torch.ones(5, 5, dtype=torch.bool), r(25)), {}, spec


@deferred("nonzero_checked_lower", "test_redundant_assert_max_upper_bound",
          probes=lambda: [((torch.tensor([1, 0, 0, 0, 1]),), {})])
def _():
    def forward(self, x):
        b = x.nonzero()
        torch._check(b.shape[0] >= 3)
        return b
    return module(forward), (torch.tensor([1, 1, 1, 0, 1]),), {}, ((Dim("dim"),),)


@deferred("item_equals_dim", "test_replaced_unbacked_bindings")
def _():
    def forward(self, x, y, z):
        m, n = x.item(), y.item()
        torch._check(m == 4)
        torch._check(n == z.shape[0])
        return m + n + z
    return (module(forward), (torch.tensor(4), torch.tensor(5), r(5)), {},
            {"x": None, "y": None, "z": (Dim("dx", max=16),)})


@deferred("check_is_size_max_item", "test_constrain_size_in_eager")
def _():
    def forward(self, x, y):
        n = x.max().item()
        torch._check_is_size(n)
        return y + n
    args = (torch.randint(1, 2, (2, 2)), torch.randint(3, 5, (2, 3)))
    return module(forward), args, {}, {"x": None, "y": {0: Dim("b"), 1: Dim("c")}}


@deferred("conflicting_checks_example_fails", "TestDynamismExpression.test_export_constraints_error")
def _():
    def forward(self, x):
        b = x.item()
        torch._check_is_size(b)
        torch._check(b >= 4)
        torch._check(b <= 5)
        return torch.full((b, 1), 1)
    return module(forward), (torch.tensor([3]),), {}, None


@deferred("item_size_no_checks", "test_automatic_constrain_size",
          probes=lambda: [((torch.tensor(-1), torch.randn(4, 5)), {})])
def _():
    def forward(self, x, y):
        n = x.item()
        return y.sum() + torch.ones(n, 5).sum()
    return module(forward), (torch.tensor(1), torch.ones(4, 5)), {}, {"x": None, "y": (Dim("r"), None)}


@deferred("item_view_numel", "test_no_check_is_size_error")
def _():
    def forward(self, x):
        a = x.item()
        return torch.arange(24.0).view(a, 4)
    return module(forward), (torch.tensor(6),), {}, None


@deferred("sym_or_and_checks", "test_sym_or_sym_and",
          probes=lambda: [((torch.tensor([3, 6, 5]),), {}), ((torch.tensor([6, 6, 6]),), {})])
def _():
    from torch.fx.experimental.symbolic_shapes import sym_and, sym_or

    def forward(self, xs):
        u0, u1, u2 = xs.tolist()
        torch._check(sym_or(u0 == 2, u0 == 4, u0 == 6))
        torch._check(sym_and(u1 >= 4, u1 <= 8, u2 == 5))
        return u0 + u1 + u2
    return module(forward), (torch.tensor([2, 6, 5]),), {}, None


@deferred("branch_on_data_size", "test_raise_user_error_when_guard_on_data_dependent_operation")
def _():
    def forward(self, x):
        return x.cos() if x.nonzero().shape[0] > 2 else x.sin()
    return module(forward), (torch.tensor([2.0, 3.0, 5.0]),), {}, None


@deferred("item_slice_of_named", "torch.export docs: torch._check on an item used as a slice bound",
          probes=lambda: [((r(6, 2), torch.tensor(7)), {})])
def _():
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return x[:k] * 2
    return module(forward), (r(6, 2), torch.tensor(4)), {}, {"x": (Dim("rows"), None), "n": None}


@deferred("tolist_sizes_view", "test_simple_unbacked_view")
def _():
    def forward(self, x):
        u0 = x.item()
        return torch.zeros(5, u0).view(u0, 5)
    return module(forward), (torch.tensor([9]),), {}, None


@deferred("while_item_full_check", "test_export_with_inline_constraints (zeros instead of randn)",
          probes=lambda: [((torch.tensor([30]),), {})])
def _():
    def forward(self, x):
        a = x.item()
        torch._check(a >= 4)
        torch._check(a <= 7)
        return torch.zeros((a, 4))
    return module(forward), (torch.tensor([5]),), {}, None


# ---------------------------------------------------------------------------------------------- more cases
# Further cases following tests of torch's test/export/test_export.py, one section per group.

@dataclass
class _PairInput:
    a: torch.Tensor
    b: torch.Tensor


@dataclass
class _NestedInput:
    x: torch.Tensor
    ys: list
    zs: dict


@dataclass
class _MixedInput:
    flag: bool
    n: int
    scale: float
    t: torch.Tensor


for _cls in (_PairInput, _NestedInput, _MixedInput):
    torch.export.register_dataclass(_cls, serialized_type_name=f"tests.parity_cases.{_cls.__name__}")


@case("dataclass_input_shared_batch", "test_dynamic_shapes_dataclass")
def _():
    def forward(self, inputs):
        return torch.matmul(inputs.a, inputs.b)
    batch = Dim("batch")
    return (module(forward), (_PairInput(a=r(5, 2, 3), b=r(5, 3, 4)),), {},
            {"inputs": [{0: batch}, {0: batch}]})


@case("shapes_collection_dataclass", "test_dynamic_shapes_builder_pytree")
def _():
    def forward(self, inp):
        return inp.x + inp.ys[0] + inp.zs["k"]
    x, ys, zs = r(4), [r(4)], {"k": r(4)}
    m, args = module(forward), (_NestedInput(x, ys, zs),)
    shapes = ShapesCollection()
    dim = Dim("dim", max=10)
    for t in (x, ys[0], zs["k"]):
        shapes[t] = (dim,)
    return m, args, {}, shapes.dynamic_shapes(m, args)


def _mixed_inputs_case(second: _MixedInput):
    """A model over ``_MixedInput`` exported with ``AdditionalInputs`` of the example and ``second``."""
    def forward(self, d):
        return d.n + d.scale + d.t
    args = (_MixedInput(True, 3, 3.0, torch.ones(3)),)
    more = torch.export.AdditionalInputs()
    more.add(args)
    more.add((second,))
    return module(forward), args, {}, more


@case("additional_inputs_dataclass_int", "test_additional_inputs_constants")
def _():
    return _mixed_inputs_case(_MixedInput(True, 4, 3.0, torch.ones(4)))


@case("keyword_only_and_varargs", "test_export_func_with_keyword_only_args (dynamic dims)")
def _():
    def forward(self, arg1, arg2, *args, kw1, kw2):
        return arg1 + args[0] + kw1, arg2 + args[1] + kw2
    b, c = Dim("b"), Dim("c")
    args = (r(2, 3), r(3, 4), r(2, 3), r(3, 4))
    kwargs = {"kw1": r(2, 3), "kw2": r(3, 4)}
    spec = {"arg1": {0: b}, "arg2": {1: c}, "args": ({0: b}, {1: c}), "kw1": {0: b}, "kw2": {1: c}}
    return module(forward), args, kwargs, spec


@case("var_keyword_pytree_dynamic", "test_export_func_with_var_keyword_pytree_args (dynamic batch)")
def _():
    def forward(self, arg1, arg2, *args, kw1, kw2, **kwargs):
        return (arg1 + arg2[0][0] + args[0] + kw1[0] + kwargs["kw3"][0],
                arg2[1] + args[1] + kw2 + kwargs["kw4"])
    b = Dim("b")
    args = (r(2, 3), [(r(2, 3),), r(3, 4)], r(2, 3), r(3, 4))
    kwargs = {"kw1": (r(2, 3),), "kw2": r(3, 4), "kw3": (r(2, 3), r(3, 4)), "kw4": r(3, 4)}
    spec = {"arg1": {0: b}, "arg2": [({0: b},), None], "args": ({0: b}, None), "kw1": ({0: b},),
            "kw2": None, "kwargs": {"kw3": ({0: b}, None), "kw4": None}}
    return module(forward), args, kwargs, spec


@case("default_kwarg_int_dynamic_tensor", "test_export_func_with_default_kwargs (dynamic dims)")
def _():
    def forward(self, arg1, arg2, a, b=1):
        return arg1 + arg2, a["kw1"] + a["kw2"] + b
    n = Dim("n")
    args = (r(6, 4), r(1, 1))
    kwargs = {"a": {"kw1": r(1, 1), "kw2": r(6, 4)}, "b": 2}
    spec = {"arg1": {0: n}, "arg2": None, "a": {"kw1": None, "kw2": {0: n}}, "b": None}
    return module(forward), args, kwargs, spec


@case("symint_under_no_grad", "test_hoo_inline_users_issue")
def _():
    def forward(self, x):
        a = x.shape[0] + 2
        b = a + 2
        with torch.no_grad():
            c = a * 4
        return b, c, x * c
    return module(forward), (r(6),), {}, {"x": (Dim("dx"),)}


@case("cond_int_closure_dynamic", "test_cond_int_closure (dynamic x)")
def _():
    def forward(self, a, x):
        def true_fn(x):
            return x * self.num

        def false_fn(x):
            return x + self.num
        return torch.cond(a, true_fn, false_fn, (x,)) * 2
    m = module(forward)
    m.num = 4
    return m, (torch.tensor(True), r(10)), {}, {"a": None, "x": (Dim("n"),)}


@case("cond_unbacked_in_branches", "test_cond_contains_unbacked_no_escape (dynamic c)")
def _():
    def forward(self, a, b1, b2, c):
        def true_fn(x):
            return x * b1.item()

        def false_fn(x):
            return x * b2.item()
        return torch.cond(a, true_fn, false_fn, (c,)) * 2
    args = (torch.tensor(True), torch.tensor([4]), torch.tensor([4]), r(10))
    return module(forward), args, {}, {"a": None, "b1": None, "b2": None, "c": (DYNAMIC,)}


@case("cond_returns_int_index", "test_cond_branches_return_constant_int (AUTO x)")
def _():
    def forward(self, x):
        idx = torch.cond(x.sum() > 3, lambda: 0, lambda: 1, ())
        return x[idx]
    return module(forward), (r(3, 3),), {}, {"x": (AUTO, AUTO)}


@case("cond_int_inputs_dynamic", "test_cond_access_identical_symint_closure")
def _():
    def forward(self, x, trigger, target):
        return torch.cond(trigger == 1, lambda: x + target, lambda: x * target, ())
    return module(forward), (r(2), 0, 2), {}, (None, DYNAMIC, DYNAMIC)


@case("state_shape_attribute_dynamic", "test_state_shape_attribute_assignment (dynamic batch)")
def _():
    def forward(self, x):
        self.last_shape = x.shape
        return self.lin(x)
    m = module(forward, lin=nn.Linear(10, 10))
    m.last_shape = m.lin.weight.shape
    return m, (r(20, 10),), {}, {"x": {0: Dim("batch")}}


@case("named_dims_mostly_shared_square", "test_export_api_with_dynamic_shapes (bounds, mostly shared)")
def _():
    def forward(self, x, y):
        return torch.matmul(x, y)
    batch, size = Dim("batch", min=2, max=16), Dim("size")
    return module(forward), (r(4, 3, 3), r(4, 3, 3)), {}, {"x": (batch, size, size), "y": (batch, size, size)}


# ---- spec-errors

@spec_error("spec_tuple_for_list", "test_mismatched_dynamic_shapes (tuple where inputs has a list)")
def _():
    dim = Dim("dim")
    return _nested_pair(({"k": {"k": ((dim,), (dim,))}},))


@spec_error("spec_dim_for_list", "test_mismatched_dynamic_shapes (a Dim where inputs has a list)")
def _():
    return _nested_pair(({"k": {"k": Dim("dim")}},))


@spec_error("spec_bare_dims_per_tensor", "test_mismatched_dynamic_shapes (a bare Dim as a tensor's spec)")
def _():
    dim = Dim("dim")
    return _nested_pair(({"k": {"k": [dim, dim]}},))


@spec_error("spec_extra_top_key", "test_mismatched_dynamic_shapes (extra top-level key)")
def _():
    dim = Dim("dim")
    spec = {"x": {"k": {"k": [(dim,), (dim,)]}}, "k": {"k": [(dim,), (dim,)]}}
    return _nested_pair(spec)


@spec_error("spec_list_too_long", "test_mismatched_dynamic_shapes (arity mismatch)")
def _():
    dim = Dim("dim")
    return _nested_pair(({"k": {"k": [(dim,), (dim,), (dim,)]}},))


@spec_error("spec_inner_key_mismatch", "test_mismatched_dynamic_shapes (inner keys differ)")
def _():
    dim = Dim("dim")
    return _nested_pair(({"k": {"K": [(dim,), (dim,)]}},))


@spec_error("additional_inputs_float_changes", "test_additional_inputs_constants (a float differs)")
def _():
    return _mixed_inputs_case(_MixedInput(True, 3, 4.0, torch.ones(3)))


@spec_error("additional_inputs_bool_changes", "test_additional_inputs_constants (a bool differs)")
def _():
    return _mixed_inputs_case(_MixedInput(False, 3, 3.0, torch.ones(3)))


def _inferred_basic(bad):
    def forward(self, x, y, z):
        return (x + y[0])[:3] * z["k"]
    more = torch.export.AdditionalInputs()
    more.add(bad)
    return module(forward), (r(4), [r(4)], {"k": r(3)}), {}, more


@spec_error("additional_inputs_below_slice", "test_dynamic_shapes_inferred_basic (4->2 below the slice end)")
def _():
    return _inferred_basic((r(2), [r(2)], {"k": r(3)}))


@spec_error("additional_inputs_unequal_pair", "test_dynamic_shapes_inferred_basic (x and y[0] differ)")
def _():
    return _inferred_basic((r(6), [r(7)], {"k": r(3)}))


@spec_error("additional_inputs_static_varies", "test_dynamic_shapes_inferred_basic (z['k'] 3->4)")
def _():
    return _inferred_basic((r(5), [r(5)], {"k": r(4)}))


@spec_error("view_minus_one_named_dims", "test_export_mod_constraints (named dims, no deferred asserts)")
def _():
    def forward(self, x):
        return x.view(x.shape[0] - 1, -1)
    return module(forward), (r(3, 4),), {}, {"x": (Dim("dim0_x", min=3), Dim("dim1_x", max=8000))}


@spec_error("spec_int_for_tensor_mismatch", "test_static_dim_constraints (an int spec for a whole tensor)")
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(4, 3),), {}, {"x": 4}


@spec_error("spec_dim_index_out_of_range", "test_mismatched_dynamic_shapes (a dim index the tensor lacks)")
def _():
    def forward(self, x):
        return x * 2
    return module(forward), (r(4, 3),), {}, {"x": {2: Dim("d")}}


@case("auto_min_above_example", "test_dim_hint_range_violations (AUTO min above the example)")
def _():
    def forward(self, x):
        return x + 2
    return module(forward), (r(4),), {}, {"x": (AUTO(min=8),)}


@spec_error("static_batch_named_in_kwargs", "test_export_api_with_dynamic_shapes (partial, error), kwargs")
def _():
    def forward(self, x, *, y):
        return torch.matmul(x, y)
    return module(forward), (r(10, 2, 3),), {"y": r(10, 3, 4)}, {"x": {0: Dim("batch")}, "y": {1: Dim("k")}}


@spec_error("spec_for_missing_kwarg", "test_non_arg_name_dynamic_shapes_api_with_kwarg (unknown key)")
def _():
    def forward(self, a, b, kw1=None):
        return a.sum() + b.sum()
    return module(forward), (r(4, 4), r(4, 4)), {}, {"a": {0: Dim("d")}, "b": None, "kw2": {0: Dim("e")}}


# ---- patterns

@pattern("unfold_dynamic_length", "torch.export docs: unfold over a dynamic dim")
def _():
    def forward(self, x):
        return x.unfold(1, 4, 2).sum(-1)
    return module(forward), (r(2, 11),), {}, {"x": (Dim("b"), Dim("t", min=4))}


@pattern("interpolate_half_bilinear_named", "test_solver_unsupported_sympy_function (named Dims)")
def _():
    def forward(self, x, y):
        x = F.interpolate(x, scale_factor=0.5, mode="bilinear")
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear")
        return x + y
    h, w = Dim("h", min=2, max=64), Dim("w", min=2, max=64)
    return module(forward), (r(1, 1, 8, 8), r(1, 1, 8, 8)), {}, {"x": {2: h, 3: w}, "y": {2: h, 3: w}}


@pattern("conv_transpose_dynamic", "test_conv_dynamic (ConvTranspose2d, DYNAMIC)")
def _():
    def forward(self, x):
        return self.up(x)
    up = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)
    return module(forward, up=up), (r(2, 2, 5, 6),), {}, {"x": {0: DYNAMIC, 2: DYNAMIC, 3: DYNAMIC}}


@pattern("buffer_slice_by_input", "test_ends_of_bounds_oblivious without the switch (buffer[:n] + x)")
def _():
    def forward(self, x):
        return self.buf[: x.shape[0]] + x
    m = module(forward)
    m.register_buffer("buf", torch.arange(10.0))
    return m, (r(6),), {}, {"x": {0: Dim("n", min=2, max=10)}}


@pattern("cat_input_and_parameter", "torch.export docs: parameters whose shapes meet a dynamic input")
def _():
    def forward(self, x):
        return torch.cat([self.prefix.expand(x.shape[0], -1, -1), x], dim=1)
    m = module(forward)
    m.prefix = nn.Parameter(r(1, 2, 4))
    return m, (r(3, 5, 4),), {}, {"x": (Dim("b"), Dim("t"), None)}


@pattern("split_by_other_sizes", "torch.export docs: split_with_sizes from other inputs' dims")
def _():
    def forward(self, x, y, z):
        a, b = torch.split(x, [y.shape[0], z.shape[0]])
        return a + y, b * z
    spec = {"x": (AUTO, None), "y": (AUTO, None), "z": (AUTO, None)}
    return module(forward), (r(7, 2), r(3, 2), r(4, 2)), {}, spec


@pattern("topk_half_of_dim", "torch.export docs: a k computed from a dynamic dim")
def _():
    def forward(self, x):
        return x.topk(x.shape[1] // 2, dim=1).values
    return module(forward), (r(3, 8),), {}, {"x": (Dim("b"), Dim("n", min=2))}


@pattern("tril_mask_seq", "torch.export docs: causal mask from a dynamic sequence length")
def _():
    def forward(self, x):
        t = x.shape[1]
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        return x.unsqueeze(-1).expand(-1, -1, t).masked_fill(~mask, 0.0)
    return module(forward), (r(2, 5),), {}, {"x": (Dim("b"), Dim("t"))}


@pattern("pad_reflect_dynamic", "torch.export docs: reflect padding of a dynamic dim")
def _():
    def forward(self, x):
        return F.pad(x, (2, 2), mode="reflect")
    return module(forward), (r(2, 3, 8),), {}, {"x": {0: DYNAMIC, 2: Dim("t", min=3)}}


@pattern("index_select_from_other", "torch.export docs: indices sized by another input")
def _():
    def forward(self, x, idx):
        return x.index_select(0, idx) * 2
    idx = torch.tensor([0, 2, 1])
    return module(forward), (r(5, 3), idx), {}, {"x": (Dim("n"), None), "idx": (Dim("k"),)}


@pattern("constant_sized_arange_scaled", "test_export_statically_known_true (sizes folded from dims)")
def _():
    def forward(self, x):
        n = x.shape[0] * 2 + 1
        return torch.arange(n).float()[: x.shape[0]] + x
    return module(forward), (r(5),), {}, {"x": (DYNAMIC,)}


@pattern("einsum_shared_named", "torch.export docs: einsum with shared named dims")
def _():
    def forward(self, a, b):
        return torch.einsum("bij,bjk->bik", a, b)
    bt, i, j, k = dims("bt", "i", "j", "k")
    return module(forward), (r(2, 3, 4), r(2, 4, 5)), {}, {"a": (bt, i, j), "b": (bt, j, k)}


@pattern("view_as_other_auto", "torch.export docs: view_as between inputs")
def _():
    def forward(self, x, y):
        return x.view_as(y) + y
    return module(forward), (r(12), r(3, 4)), {}, {"x": (AUTO,), "y": (AUTO, AUTO)}


@pattern("mixed_static_auto_dynamic", "test_dim_auto_and_dim (STATIC, AUTO and DYNAMIC in one spec)")
def _():
    def forward(self, x, y):
        return x * y.sum(1, keepdim=True)
    return module(forward), (r(3, 4), r(3, 5)), {}, {"x": (DYNAMIC, STATIC), "y": (AUTO, DYNAMIC)}


@pattern("repeat_by_other_dim", "torch.export docs: repeat count from a dynamic dim")
def _():
    def forward(self, x, y):
        return x.repeat(y.shape[0], 1)
    return module(forward), (r(2, 3), r(4)), {}, {"x": (Dim("a"), None), "y": (Dim("c"),)}


@pattern("flatten_expand_batch_param", "torch.export docs: expand a parameter to a dynamic batch")
def _():
    def forward(self, x):
        pos = self.pos[: x.shape[1]].unsqueeze(0).expand(x.shape[0], -1, -1)
        return x + pos
    m = module(forward)
    m.pos = nn.Parameter(r(16, 4))
    return m, (r(2, 6, 4),), {}, {"x": (Dim("b"), Dim("t", max=16), None)}


# ---- zero-one

@zero_one("unbacked_backed_sub_plain", "test_colin_unbacked_backed_vr_sub without backed_size_oblivious")
def _():
    def forward(self, a, b, c):
        nz = torch.nonzero(a)
        ones = a.new_ones([nz.size(0), b.size(0)])
        torch._check(ones.size(0) >= 1)
        return torch.add(ones, c)
    return module(forward), (torch.ones(16), r(8), r(16, 8)), {}, {"a": None, "b": None,
                                                                   "c": (DYNAMIC, STATIC)}


@zero_one("buffer_slice_assign_plain", "test_ends_of_bounds_oblivious without backed_size_oblivious")
def _():
    def forward(self, x, y):
        self.buf[0: x.shape[0]] = x
        return x + 2, y[:, ::1]
    m = module(forward)
    m.register_buffer("buf", torch.zeros(10))
    spec = {"x": {0: Dim("dx", min=1, max=10)}, "y": {0: Dim("dy0"), 1: Dim("dy1")}}
    return m, (r(10), r(8, 9)), {}, spec


@zero_one("derived_root_example_one_oblivious", "test_derived_dim_1_2 under backed_size_oblivious",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x + y[1:]
    dx = Dim("dx", min=1, max=4)
    return module(forward), (r(1, 2), r(2, 2)), {}, ({0: dx, 1: None}, {0: dx + 1, 1: None})


@zero_one("derived_before_root_example_one_oblivious",
          "test_derived_dim_1_2 under backed_size_oblivious, the derived input first", context=oblivious)
def _():
    def forward(self, y, x):
        return x + y[1:]
    dx = Dim("dx", min=1, max=4)
    return module(forward), (r(2, 2), r(1, 2)), {}, ({0: dx + 1, 1: None}, {0: dx, 1: None})


@zero_one("broadcast_named_one_oblivious", "test_baddbmm: a size-1 example broadcasting (oblivious)",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(3, 4), r(1, 4)), {}, {"x": (Dim("b"), None), "y": (Dim("by"), None)}


@zero_one("auto_one_squeeze_oblivious", "test_reshape_view_backed_size_oblivious (squeeze of an AUTO 1)",
          context=oblivious)
def _():
    def forward(self, x):
        return x.squeeze(1) * 2
    return module(forward), (r(4, 1, 3),), {}, {"x": (AUTO, AUTO, STATIC)}


@zero_one("named_min_one_example_two", "test_dim_1_2 (min=1, example 2, then view)")
def _():
    def forward(self, x):
        return x.reshape(-1) * 2
    return module(forward), (r(2, 3),), {}, {"x": (Dim("dx", min=1, max=8), None)}


@zero_one("dynamic_one_expand_oblivious", "test_dim_dynamic_specialization: DYNAMIC example 1, expand",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x.expand(y.shape[0], -1) * y
    return module(forward), (r(1, 4), r(3, 4)), {}, {"x": (DYNAMIC, None), "y": (DYNAMIC, None)}


# ---- deferred

@deferred("unbacked_size_minus_one", "test_unbacked_infer_size",
          probes=lambda: [((torch.tensor([1]),), {}), ((torch.tensor([0]),), {})])
def _():
    def forward(self, x):
        u0 = x.item()
        torch._check_is_size(u0)
        t = torch.zeros(u0 - 1)
        return t + t
    return module(forward), (torch.tensor([5]),), {}, None


@deferred("unbacked_pad_tolist", "test_unbacked_pad",
          probes=lambda: [((torch.tensor([6, 6, 6]), torch.tensor([-5, 9, 0, 8])), {})])
def _():
    def forward(self, xs, pad):
        u0, u1, u2 = xs.tolist()
        x = torch.ones(u0, u1, u2)
        pl0, pr0, pl1, pr1 = pad.tolist()
        return F.pad(x, (pl0, pr0, pl1, pr1))
    return module(forward), (torch.tensor([6, 6, 6]), torch.tensor([2, -2, 1, 0])), {}, None


@deferred("unbacked_sum_unsqueeze", "test_unbacked_unsqueeze",
          probes=lambda: [((torch.tensor([1, 2]),), {})])
def _():
    def forward(self, xs):
        u0, u1 = xs.tolist()
        return torch.zeros(1, u0 + u1).contiguous().unsqueeze(-1)
    return module(forward), (torch.tensor([5, 6]),), {}, None


@deferred("unbacked_bincount_minlength", "test_unbacked_bincount",
          probes=lambda: [((torch.tensor([5, 10]),), {})])
def _():
    def forward(self, xs):
        u0, u1 = xs.tolist()
        return torch.bincount(torch.ones(u0, dtype=torch.int64), minlength=u1)
    return module(forward), (torch.tensor([20, 10]),), {}, None


@deferred("unbacked_expand_matmul", "test_unbacked_3d_matmul",
          probes=lambda: [((r(4, 3), torch.tensor(6, dtype=torch.int)), {})])
def _():
    def forward(self, x, repeat):
        u0 = repeat.item()
        t1 = x.unsqueeze(1).expand(x.size(0), u0 // 2, x.size(-1))
        return torch.matmul(t1, torch.ones(3))
    return module(forward), (r(4, 3), torch.tensor(2, dtype=torch.int)), {}, {"x": (Dim("n"), None),
                                                                             "repeat": None}


@deferred("layer_norm_unbacked_shape", "test_layer_norm_unbacked_normalized_shape")
def _():
    def forward(self, scalar, weight, bias):
        u1 = scalar.item()
        y = torch.ones(2, u1)
        return F.layer_norm(y, normalized_shape=(u1,), weight=weight, bias=bias)
    return module(forward), (torch.scalar_tensor(6, dtype=torch.int32), r(6), r(6)), {}, None


@deferred("check_eq_commuted", "test_torch_check_eq_commutativity (M1)",
          probes=lambda: [((torch.tensor(5), torch.tensor(3), torch.tensor(3), r(1)), {})])
def _():
    def forward(self, x1, x2, x3, y):
        z1, z2, z3 = x1.item(), x2.item(), x3.item()
        torch._check(z1 == (z2 + z3))
        return y * 2 if z2 + z3 == z1 else y + 3
    return module(forward), (torch.tensor(6), torch.tensor(3), torch.tensor(3), r(1)), {}, None


@deferred("check_ne_commuted", "test_torch_check_eq_commutativity (M2)",
          probes=lambda: [((torch.tensor(6), torch.tensor(3), torch.tensor(3), r(1)), {})])
def _():
    def forward(self, x1, x2, x3, y):
        z1, z2, z3 = x1.item(), x2.item(), x3.item()
        torch._check(z1 != (z2 + z3))
        return y * 2 if z2 + z3 == z1 else y + 3
    return module(forward), (torch.tensor(6), torch.tensor(6), torch.tensor(6), r(1)), {}, None


@deferred("item_select_2d", "test_multidimensional_slicing",
          probes=lambda: [((torch.tensor(12), torch.ones(10, 10)), {})])
def _():
    def forward(self, x, y):
        b = x.item()
        torch._check(b >= 0)
        torch._check(b < y.shape[0])
        return y[0, b]
    return module(forward), (torch.tensor(4), r(10, 10)), {}, {"x": None, "y": (Dim("a"), Dim("b"))}


@deferred("topk_nonzero_slice", "test_unbacked_slice")
def _():
    def forward(self, scores, score_thr, topk, results=None):
        valid_mask = scores > score_thr
        scores = scores[valid_mask]
        valid_idxs = torch.nonzero(valid_mask)
        num_topk = torch.minimum(topk, torch.tensor(valid_idxs.shape[0])).item()
        torch._check_is_size(num_topk)
        torch._check(scores.shape[0] >= num_topk)
        scores, idxs = scores.sort(descending=True)
        scores = scores[:num_topk]
        keep_idxs, labels = valid_idxs[idxs[:num_topk]].unbind(dim=1)
        return scores, labels, keep_idxs
    score = torch.tensor([[0.1, 0.3, 0.2], [0.12, 0.7, 0.9], [0.02, 0.8, 0.08], [0.4, 0.1, 0.08]])
    return module(forward), (score, 0.15, torch.tensor(4), {"bbox_pred": r(4, 2)}), {}, None


@deferred("masked_select_view_linear", "test_unbacked_linear_layer_norm_input")
def _():
    def forward(self, x, mask):
        view = x.masked_select(mask).view(-1, 12)
        return self.lin(view), self.norm(view)
    mask = torch.tensor([[True], [False], [True], [True], [False], [True]])
    m = module(forward, lin=nn.Linear(12, 4), norm=nn.LayerNorm(12))
    return m, (r(6, 12), mask), {}, None


@deferred("tolist_reshape_other", "test_simple_unbacked_view (Foov2)",
          probes=lambda: [((torch.tensor([5, 5]),), {}), ((torch.tensor([4, 5]),), {})])
def _():
    def forward(self, xs):
        a, b = xs.tolist()
        return torch.zeros(a).reshape(b)
    return module(forward), (torch.tensor([4, 4]),), {}, None


@deferred("item_min_pow", "test_math_pow",
          probes=lambda: [((torch.tensor(20), r(5)), {})])
def _():
    import math

    def forward(self, x, y):
        b = x.item()
        p = math.pow(min(b, 10), 2)
        return y * p
    return module(forward), (torch.tensor(5), r(5)), {}, {"x": None, "y": (Dim("n"),)}


@deferred("item_max_floor_ones", "test_export_max_nonstrict (FooMax)",
          probes=lambda: [((torch.tensor(2000),), {})])
def _():
    def forward(self, x):
        return torch.ones(max(x.item(), 16))
    return module(forward), (torch.tensor(4),), {}, None


@deferred("tolist_returned", "test_tolist")
def _():
    def forward(self, x):
        return x.tolist()
    return module(forward), (torch.ones(3, dtype=torch.int),), {}, None


@deferred("narrow_item_checked", "test_suggested_fixes_for_data_dependent_errors_puzzlers (cf_implicitsize)",
          probes=lambda: [((torch.tensor(-1), r(10)), {}), ((torch.tensor(12), r(10)), {})])
def _():
    def forward(self, x, y):
        i = x.item()
        torch._check(i >= 0)
        return y.narrow(0, i, 1).squeeze()
    return module(forward), (torch.tensor(2), r(10)), {}, {"x": None, "y": (Dim("n"),)}


@deferred("stack_narrow_item_checked",
          "test_suggested_fixes_for_data_dependent_errors_puzzlers (cf_stacklist)")
def _():
    def forward(self, xs, y):
        i = y.item()
        torch._check(i >= 0)
        return torch.stack(xs, 0).narrow(0, i, 1).squeeze()
    return module(forward), ([torch.ones(5) * i for i in range(6)], torch.tensor(2)), {}, None


@deferred("diff_tolist_split", "test_suggested_fixes_for_data_dependent_errors_puzzlers (cf_tensorsplit)")
def _():
    def forward(self, x, offsets):
        lengths = torch.diff(offsets).tolist()
        out, start = [], 0
        for length in lengths:
            out.append(x.narrow(0, start, length))
            start += length
        return out
    return module(forward), (torch.arange(10), torch.tensor([0, 2, 5, 7, 10])), {}, None


@deferred("narrow_item_unchecked", "test_no_suggested_fixes_for_data_dependent_errors")
def _():
    def forward(self, xs, y):
        return torch.stack(xs, 0).narrow(0, y.item(), 1).squeeze()
    return module(forward), ([torch.ones(5) * i for i in range(6)], torch.tensor(2)), {}, None


@deferred("items_view_reshape", "test_suggested_fixes_for_data_dependent_errors_basic (M_v0)",
          probes=lambda: [((torch.tensor([2, 3, 3], dtype=torch.int32),), {}),
                          ((torch.tensor([2, 3, 4], dtype=torch.int32),), {})])
def _():
    def forward(self, t):
        items = [t[i].item() for i in range(t.numel())]
        z = torch.ones([items[0], items[1]])
        return z.view(items[0], items[2]) + 1
    return module(forward), (torch.tensor([1, 4, 4], dtype=torch.int32),), {}, None


@deferred("nonzero_cond_size", "test_unbacked_to_cond",
          probes=lambda: [((torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0]),), {})])
def _():
    def forward(self, a):
        az = a.nonzero()
        return torch.cond(az.size(0) > 3, lambda x: (x + 1).sum(), lambda x: (x + 3).sum(), (az,)) * 2
    return module(forward), (torch.tensor([1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 5.0]),), {}, None


@deferred("nonzero_scalar_input", "test_nonzero_dynamic (0-d input)")
def _():
    def forward(self, x, as_tuple):
        return torch.nonzero(x, as_tuple=as_tuple)
    return module(forward), (torch.tensor(10), False), {}, {"x": None, "as_tuple": None}


# ---- second batch: 0/1 examples under backed_size_oblivious, unbacked sizes beside dynamic dims, more ops

@zero_one("derived_double_root_one_oblivious",
          "test_derived_dim_1_2 (2*dx, root example 1) under backed_size_oblivious",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x + y[::2]
    dx = Dim("dx", min=1, max=8)
    return module(forward), (r(1), r(2)), {}, ({0: dx}, {0: 2 * dx})


@zero_one("derived_root_only_oblivious",
          "test_derived_dim_basic (only the derived dim named) under backed_size_oblivious",
          context=oblivious)
def _():
    def forward(self, y):
        return y[1:] * 2
    dx = Dim("dx", min=1, max=8)
    return module(forward), (r(2),), {}, ({0: dx + 1},)


@zero_one("derived_root_example_one_plain", "test_derived_dim_1_2 (root example 1, no switch)")
def _():
    def forward(self, x, y):
        return x + y[1:]
    dx = Dim("dx", min=1, max=4)
    return module(forward), (r(1, 2), r(2, 2)), {}, ({0: dx, 1: None}, {0: dx + 1, 1: None})


@zero_one("dynamic_zero_example_oblivious",
          "test_dim_dynamic_specialization (example 0) under backed_size_oblivious",
          context=oblivious)
def _():
    def forward(self, x):
        return x.sum(0) + x.shape[0]
    return module(forward), (r(0, 3),), {}, {"x": {0: DYNAMIC}}


@zero_one("dynamic_one_broadcast_oblivious",
          "test_dim_dynamic_specialization: DYNAMIC example 1 broadcast (oblivious)",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x + y
    return module(forward), (r(1, 4), r(3, 4)), {}, {"x": (DYNAMIC, None), "y": None}


@zero_one("auto_slice_relation_oblivious",
          "test_dim_auto_and_dim (x[1:] + y, example 2 and 1) under oblivious",
          context=oblivious)
def _():
    def forward(self, x, y):
        return x[1:] + y
    return module(forward), (r(2), r(1)), {}, {"x": (AUTO,), "y": (AUTO,)}


@zero_one("reshape_batch_one_oblivious", "test_reshape_view_backed_size_oblivious (named batch example 1)",
          context=oblivious)
def _():
    def forward(self, x):
        return x.reshape(-1, 4).sum(0) + x.reshape(x.shape[0], 2, 2).sum((1, 2)).sum()
    return module(forward), (r(1, 4),), {}, {"x": (Dim("n"), None)}


@zero_one("matmul_batch_one_oblivious", "test_baddbmm (bmm with a batch of 1, oblivious)", context=oblivious)
def _():
    def forward(self, x, y):
        return torch.bmm(x, y)
    b = Dim("b")
    return module(forward), (r(1, 2, 3), r(1, 3, 4)), {}, {"x": (b, None, None), "y": (b, None, None)}


@zero_one("cat_named_one_oblivious",
          "torch.export docs: cat with a size-1 example (oblivious)", context=oblivious)
def _():
    def forward(self, x, y):
        return torch.cat([x, y], dim=0).mean(0)
    return module(forward), (r(1, 3), r(4, 3)), {}, {"x": (Dim("a"), None), "y": (Dim("c"), None)}


@zero_one("int_input_one_dynamic", "test_symint_input_basic (an int input of 1, DYNAMIC)")
def _():
    def forward(self, x, n):
        return x * n + x.shape[0]
    return module(forward), (r(3), 1), {}, {"x": (DYNAMIC,), "n": DYNAMIC}


@case("mark_dynamic_without_spec", "torch.export docs: torch._dynamo.mark_dynamic on an example input")
def _():
    def forward(self, x):
        return x * 2
    x = r(4, 3)
    torch._dynamo.mark_dynamic(x, 0)
    return module(forward), (x,), {}, None


@deferred("item_plus_dim_full", "test_export_inline_constraints with a dynamic dim",
          probes=lambda: [((r(5, 2), torch.tensor(-9)), {})])
def _():
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 0)
        return torch.zeros(x.shape[0] + k, x.shape[1])[: x.shape[0]] + x
    return module(forward), (r(4, 2), torch.tensor(3)), {}, {"x": (Dim("a"), Dim("b")), "n": None}


@deferred("nonzero_cat_dynamic", "test_nonzero_dynamic (cat with a dynamic input)")
def _():
    def forward(self, x, y):
        nz = torch.nonzero(x).float()
        return torch.cat([nz, y], dim=0)
    return module(forward), (torch.tensor([[1, 0], [0, 1], [1, 1]]), r(3, 2)), {}, {"x": (Dim("n"), None),
                                                                                    "y": (Dim("m"), None)}


@deferred("boolean_mask_index_dynamic", "test_masked_select_dynamic (x[mask] with a named dim)")
def _():
    def forward(self, x):
        return x[x > 0].sum() + x.shape[0]
    return module(forward), (r(6, 3),), {}, {"x": (Dim("n"), None)}


@deferred("item_equals_twice_dim", "test_replaced_unbacked_bindings (an item tied to 2 * a dim)",
          probes=lambda: [((r(4), torch.tensor(9)), {})])
def _():
    def forward(self, x, n):
        k = n.item()
        torch._check(k == 2 * x.shape[0])
        return torch.ones(k) * 3 + x.repeat(2)
    return module(forward), (r(4), torch.tensor(8)), {}, {"x": (Dim("d", max=32),), "n": None}


@deferred("repeat_interleave_tensor_repeats", "test_export.py repeat_interleave tests (tensor repeats)")
def _():
    def forward(self, x, reps):
        return x.repeat_interleave(reps, dim=0) * 2
    n = Dim("n")
    return module(forward), (r(3, 2), torch.tensor([1, 2, 3])), {}, {"x": (n, None), "reps": (n,)}


@deferred("split_by_tolist_checked",
          "test_suggested_fixes_for_data_dependent_errors_puzzlers (split by sizes)",
          probes=lambda: [((r(6), torch.tensor([1, 2, 4])), {})])
def _():
    def forward(self, x, sizes):
        parts = sizes.tolist()
        for p in parts:
            torch._check(p >= 0)
        torch._check(sum(parts) == x.shape[0])
        return [t * 2 for t in torch.split(x, parts)]
    return module(forward), (r(6), torch.tensor([1, 2, 3])), {}, {"x": (Dim("n"),), "sizes": None}


@deferred("unbacked_zeros_like_dim", "test_unbacked_infer_size with a dynamic feature dim")
def _():
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 1)
        z = torch.zeros(k, x.shape[1])
        return torch.cat([z, x]).sum(0)
    return module(forward), (r(3, 4), torch.tensor(2)), {}, {"x": (Dim("a"), Dim("b")), "n": None}


@pattern("chunk_three_auto", "torch.export docs: chunk of a dynamic dim")
def _():
    def forward(self, x):
        return [c.sum(0) for c in x.chunk(3)]
    return module(forward), (r(7, 2),), {}, {"x": (AUTO, None)}


@pattern("adaptive_pool_dynamic", "torch.export docs: adaptive pooling from dynamic H, W")
def _():
    def forward(self, x):
        return F.adaptive_avg_pool2d(x, (2, 2))
    return module(forward), (r(1, 2, 7, 9),), {}, {"x": {2: Dim("h", min=2), 3: Dim("w", min=2)}}


@pattern("conv1d_same_padding", "test_conv_dynamic (Conv1d padding='same', dilation 2)")
def _():
    def forward(self, x):
        return self.conv(x)
    conv = nn.Conv1d(2, 3, 3, padding="same", dilation=2)
    return module(forward, conv=conv), (r(2, 2, 9),), {}, {"x": (Dim("b"), None, Dim("t"))}


@pattern("gather_along_dynamic", "torch.export docs: gather with index sized by a dim")
def _():
    def forward(self, x, idx):
        return x.gather(1, idx)
    idx = torch.tensor([[0, 1], [2, 0], [1, 1]])
    return module(forward), (r(3, 4), idx), {}, {"x": (Dim("n"), Dim("m")), "idx": (Dim("n"), Dim("k"))}


@pattern("roll_flip_dynamic", "torch.export docs: roll and flip over dynamic dims")
def _():
    def forward(self, x):
        return x.roll(1, 0).flip(1) + x
    return module(forward), (r(4, 5),), {}, {"x": (DYNAMIC, DYNAMIC)}


@pattern("pixel_shuffle_dynamic", "torch.export docs: pixel_shuffle with dynamic H, W")
def _():
    def forward(self, x):
        return F.pixel_shuffle(x, 2)
    return module(forward), (r(2, 8, 3, 5),), {}, {"x": (Dim("b"), None, Dim("h"), Dim("w"))}


@pattern("heads_split_view", "torch.export docs: view into heads with dynamic batch and time")
def _():
    def forward(self, x):
        b, t, d = x.shape
        return x.view(b, t, 2, d // 2).transpose(1, 2).reshape(b * 2, t, d // 2)
    return module(forward), (r(2, 5, 8),), {}, {"x": (Dim("b"), Dim("t"), None)}


@pattern("slice_last_three_named", "test_export_slice_maxsize (negative start on a dynamic dim)")
def _():
    def forward(self, x):
        return x[-3:] * 2
    return module(forward), (r(5, 2),), {}, {"x": (Dim("n"), None)}


@pattern("interpolate_size_from_int", "test_symint_input_basic (an int input as an interpolate size)")
def _():
    def forward(self, x, n):
        return F.interpolate(x, size=(n, n), mode="nearest")
    return module(forward), (r(1, 2, 4, 4), 6), {}, {"x": (None, None, AUTO, AUTO), "n": DYNAMIC}


@pattern("scatter_add_dynamic", "torch.export docs: scatter_add into a dynamic dim")
def _():
    def forward(self, x, idx, src):
        return x.scatter_add(0, idx, src)
    idx = torch.tensor([[0, 1, 2], [1, 0, 0]])
    n, k = Dim("n"), Dim("k")
    return module(forward), (torch.zeros(3, 3), idx, r(2, 3)), {}, {"x": (n, None), "idx": (k, None),
                                                                    "src": (k, None)}
