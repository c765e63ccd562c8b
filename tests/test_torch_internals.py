"""Every private torch name shapeproof touches, pinned: a torch release that moves one fails here, loudly."""
import ast
import inspect
from pathlib import Path

import pytest
import sympy
import torch

from shapeproof.tracer import torch_internals as door
from shapeproof.tracer.engine_env import EngineShapeEnv


def test_torch_version_is_in_the_supported_range():
    major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    assert (2, 13) <= (major, minor) < (2, 15)


@pytest.mark.parametrize("name", sorted(door.PINNED))
def test_pinned_name_exists(name):
    obj = door.PINNED[name]
    assert obj is not None and (inspect.isclass(obj) or callable(obj) or inspect.iscode(obj)), name


@pytest.mark.parametrize("method", sorted(door.OVERRIDDEN_SHAPE_ENV_METHODS))
def test_overridden_shape_env_method_keeps_its_parameters(method):
    base = getattr(door.TorchShapeEnv, method)
    params = inspect.signature(base).parameters
    for name in door.OVERRIDDEN_SHAPE_ENV_METHODS[method]:
        assert name in params, f"torch.ShapeEnv.{method} lost parameter {name!r}"
    assert method in EngineShapeEnv.__dict__, f"EngineShapeEnv no longer overrides {method}"


_FAKE_MODE_METHODS = {**door.OVERRIDDEN_FAKE_MODE_METHODS, **door.CALLED_FAKE_MODE_METHODS}


@pytest.mark.parametrize("method", sorted(_FAKE_MODE_METHODS))
def test_fake_mode_method_keeps_its_parameters(method):
    from shapeproof.tracer.fake_mode import EngineFakeTensorMode

    expected = _FAKE_MODE_METHODS[method]
    params = inspect.signature(getattr(door.FakeTensorMode, method)).parameters
    assert list(params)[1:] == expected, f"FakeTensorMode.{method} changed its parameters: {list(params)}"
    if method in door.OVERRIDDEN_FAKE_MODE_METHODS:
        assert method in EngineFakeTensorMode.__dict__, f"EngineFakeTensorMode no longer overrides {method}"


def test_shape_env_attributes_we_read_exist():
    env = EngineShapeEnv(tracked_fakes=[])
    for name in door.READ_SHAPE_ENV_ATTRIBUTES:
        assert hasattr(env, name), name


def test_maybe_evaluate_static_keeps_a_cache_clear():
    # torch's _refine_ranges calls self._maybe_evaluate_static.cache_clear()
    assert callable(EngineShapeEnv._maybe_evaluate_static.cache_clear)


def test_non_strict_export_reuses_an_ambient_tracing_context():
    """The injection point: make_fake_inputs takes the fake mode of an active TracingContext."""
    import torch._export.non_strict_utils as non_strict_utils

    source = inspect.getsource(non_strict_utils.make_fake_inputs)
    assert "TracingContext.try_get()" in source and "context.fake_mode" in source


def test_derived_dims_expose_root_and_fn():
    h = torch.export.Dim("h", min=2, max=9)
    d = 3 * h + 1
    assert isinstance(d, door.DerivedDim) and d.root is h and (d.fn(0), d.fn(1)) == (1, 4)


def test_constraints_can_be_demoted_to_warnings():
    """EngineShapeEnv.produce_guards_verbose rebuilds contexts with warn_only constraints."""
    import dataclasses

    from torch.fx.experimental.symbolic_shapes import StatelessSymbolicContext, StrictMinMaxConstraint
    from torch.utils._sympy.value_ranges import ValueRanges

    assert {f.name for f in dataclasses.fields(StrictMinMaxConstraint)} >= {door.CONSTRAINT_FIELDS[
        "StrictMinMaxConstraint"], "vr"}
    assert door.CONSTRAINT_FIELDS["StatelessSymbolicContext"] in {
        f.name for f in dataclasses.fields(StatelessSymbolicContext)}
    c = StrictMinMaxConstraint(warn_only=False, vr=ValueRanges(2, 8))
    assert dataclasses.replace(c, warn_only=True).warn_only


def test_exported_programs_keep_input_checks_in_guards_code():
    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2

    ep = torch.export.export(M(), (torch.ones(3, 4),), strict=False)
    assert isinstance(getattr(ep, door.EXPORTED_PROGRAM_GUARDS_ATTRIBUTE), list)


def test_export_consults_forced_specializations_after_producing_guards():
    import importlib

    from torch.fx.experimental.symbolic_shapes import DimConstraints

    module, function, method = door.FORCED_SPECIALIZATIONS
    source = inspect.getsource(getattr(importlib.import_module(module), function))
    assert f"dim_constraints.{method}()" in source
    assert callable(getattr(DimConstraints, method))
    assert f"dim_constraints.{door.PRETTIFY_RESULTS}(" in source
    assert f"dim_constraints.{door.SOLVE_CONSTRAINTS}()" in source


def test_equality_constraints_can_be_demoted_to_warnings():
    import dataclasses

    from torch.fx.experimental.symbolic_shapes import EqualityConstraint

    assert "warn_only" in {f.name for f in dataclasses.fields(EqualityConstraint)}


def test_floordiv_cancels_through_the_module_sympy_global():
    """tracer/exact_cancel.py swaps the ``sympy`` global of torch's functions module to reach these calls."""
    import sympy

    assert door.sympy_functions.sympy is sympy
    source = inspect.getsource(door.FloorDiv.eval)
    assert "sympy.simplify(base / gcd)" in source and "sympy.simplify(divisor / gcd)" in source


@pytest.mark.parametrize("method", sorted(door.CALLED_SHAPE_ENV_METHODS))
def test_called_shape_env_method_keeps_its_parameters(method):
    params = inspect.signature(getattr(door.TorchShapeEnv, method)).parameters
    for name in door.CALLED_SHAPE_ENV_METHODS[method]:
        assert name in params, f"torch.ShapeEnv.{method} lost parameter {name!r}"


def test_sym_nodes_keep_their_unreplaced_expression():
    """compute_unbacked_bindings reads ``node._expr`` (not ``expr``): a bound symbol stays findable there."""
    import torch.fx.experimental.symbolic_shapes as symbolic_shapes

    assert f"s.node.{door.SYM_NODE_UNREPLACED_EXPRESSION}" in inspect.getsource(
        symbolic_shapes._free_unbacked_symbols_with_path)


def test_sym_nodes_keep_the_cache_of_their_replaced_expression():
    """sym_expr_cache reads these attributes of every SymNode."""
    node = door.SymNode(sympy.Symbol("s0", integer=True), door.TorchShapeEnv(), int, 2)
    for name in door.SYM_NODE_EXPRESSION_CACHE:
        assert hasattr(node, name), name


def test_fake_tensors_keep_constant_and_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        t = torch.empty(2)
    for name in door.FAKE_TENSOR_ATTRIBUTES:
        assert hasattr(t, name), name
    assert t.fake_mode is mode


def test_recurrent_ops_are_decomposed_by_python_kernels():
    """rnn_shapes wraps these kernels; torch must still register the decomposition under these keys."""
    from shapeproof.tracer.sizes.rnn_shapes import _KEYS, RNN_OPS

    for op in RNN_OPS:
        for table in door.OPERATOR_KERNEL_TABLES:
            assert isinstance(getattr(op, table), dict), (op, table)
        for key in _KEYS:
            assert key in op.py_kernels, (op, key)


def test_runtime_asserts_are_worded_with_their_expression():
    from torch.fx.passes import runtime_assert

    assert door.RUNTIME_ASSERT_MESSAGE in inspect.getsource(runtime_assert.insert_deferred_runtime_asserts)


def test_shape_env_replacements_are_versioned():
    """size_tracking lifts its replacements while asserts are lowered; SymNode.expr caches by this counter."""
    from torch.fx.experimental import sym_node

    env = EngineShapeEnv(tracked_fakes=[])
    for name in door.REPLACEMENT_ATTRIBUTES:
        assert hasattr(env, name), name
    assert "_replacements_version_counter" in inspect.getsource(sym_node.SymNode.expr.fget)


def test_export_lowers_runtime_asserts_through_a_module_global():
    """size_asserts wraps torch._export.utils.insert_deferred_runtime_asserts, called by that name."""
    function, call = door.LOWER_ASSERTS
    assert call in inspect.getsource(getattr(door.export_utils, function))
    assert callable(door.export_utils.insert_deferred_runtime_asserts)


def test_operator_overloads_keep_their_schema():
    """size_ops/size_tracking name arguments and find in-place writes, merge.py finds mutating ops, by it."""
    schema = door.op_schema(torch.ops.aten.add_.Tensor)
    assert [a.name for a in schema.arguments][:2] == ["self", "other"] and schema.is_mutable
    assert schema.arguments[0].alias_info.is_write
    assert not door.op_schema(torch.ops.aten.view.default).is_mutable


@pytest.mark.parametrize("name", sorted(n for n in door.PINNED if n.startswith("aten.")))
def test_private_aten_operators_keep_their_names(name):
    op = door.PINNED[name]
    assert isinstance(op, door.OpOverload) and str(op) == name


def test_draft_export_leaves_its_report_on_the_program():
    """shapeproof.engine()'s draft_export sets the report where torch's does (torch.onnx reads it there)."""
    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2

    ep = torch.export.draft_export(M(), (torch.ones(3, 4),))
    assert isinstance(getattr(ep, door.DRAFT_EXPORT_REPORT_ATTRIBUTE), door.DraftExportReport)


ROOT = Path(__file__).resolve().parents[1]


def _private_torch_names(path: Path) -> set[str]:
    """Private torch names in ``path``'s code: imports from ``torch._x`` (or of ``_x`` from torch), and
    attributes like ``torch._C.x`` or ``aten._to_copy`` (``aten`` being ``torch.ops.aten``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, tuple(a.name for a in node.names))]
        elif isinstance(node, ast.Attribute):
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in ("torch", "aten"):
                dotted = [inner.id, *reversed(parts)]
                if any(p.startswith("_") and not p.startswith("__") for p in dotted[1:]):
                    found.add(".".join(dotted))
            continue
        else:
            continue
        for module, names in modules:
            parts = module.split(".")
            if parts[0] == "torch" and any(p.startswith("_") for p in parts[1:] + list(names)):
                found.add(module)
    return found


@pytest.mark.parametrize("layer", ["tracer", "export"])
def test_private_torch_names_go_through_the_door(layer):
    outside = {f"{path.name}: {name}" for path in sorted((ROOT / layer).glob("*.py"))
               if path.name != "torch_internals.py" for name in _private_torch_names(path)}
    assert not outside, "private torch names outside the door:\n" + "\n".join(sorted(outside))


def test_bool_of_a_symbool_reaches_evaluate_expr_through_the_pinned_path():
    """branch_merge reads the ``if`` of the frame above BOOL_GUARD_PATH's last function."""
    import sys

    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
    from torch._dynamo.source import ConstantSource

    from shapeproof.tracer.torch_internals import BOOL_GUARD_PATH

    seen = []

    class Recording(ShapeEnv):
        def evaluate_expr(self, *args, **kwargs):
            frame, names = sys._getframe(1), []
            for _ in BOOL_GUARD_PATH:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            seen.append((names, frame.f_code.co_name))
            return super().evaluate_expr(*args, **kwargs)

    env = Recording()
    size = env.create_symintnode(env.create_symbol(6, ConstantSource("n"), dynamic_dim=DimDynamic.DYNAMIC),
                                 hint=6)

    def asking():
        return bool(size % 4 != 0)

    assert asking()
    assert seen == [(list(BOOL_GUARD_PATH), "asking")]


def test_scan_compiles_its_body_through_a_nested_function():
    """A rolled loop (tracer/control/loops.py) clears dynamo's cache for this code around each scan."""
    assert door.scan_compiled_code().co_name == door.SCAN_COMPILED_FUNCTION


def test_dynamo_can_allocate_sizes_without_specializing_them_at_zero_and_one():
    from torch.fx.experimental import _config

    assert getattr(_config, door.BACKED_SIZE_OBLIVIOUS) is False
    with door.zero_one_unspecialized():
        assert getattr(_config, door.BACKED_SIZE_OBLIVIOUS) is True


def test_the_places_that_call_an_operators_kernel_hold_it_in_the_named_local():
    """hintless reads the operator whose C++ kernel asks from these frames' locals (``door.OP_CALLS``)."""
    import torch._export.utils as export_utils
    assert "self" in inspect.signature(torch._ops.OpOverload.__call__).parameters
    assert "self" in inspect.signature(torch._ops.OpOverload.decompose).parameters
    source = inspect.getsource(export_utils._get_decomp_for_cia)
    assert "def _special_op_to_decompose_cia(" in source and 'kernel = kwargs["kernel"]' in source
    assert set(door.OP_CALLS) == {("torch._ops", "__call__"), ("torch._ops", "decompose"),
                                  ("torch._export.utils", "_special_op_to_decompose_cia")}


def test_torch_cond_compiles_itself_through_the_pinned_helper_and_merges_through_the_module_global():
    """control/cond.py replaces ``_hop_compile_and_call`` (cond imports it at call time) and ``_merge_output``
    (cond's fake kernel calls it by its module global), and wraps cond's kernels by mode and key."""
    source = inspect.getsource(door.cond_module.cond)
    assert "from torch._higher_order_ops.utils import _hop_compile_and_call" in source
    assert "def _cond_op_wrapper(" in source
    assert list(inspect.signature(door.higher_order_utils._hop_compile_and_call).parameters) == [
        "fn", "args", "kwargs"]
    assert list(inspect.signature(door.cond_module._merge_output).parameters) == ["a", "b", "mode"]
    assert "_merge_output(" in inspect.getsource(door.cond_module.cond_fake_tensor_mode)
    modes = {k.__name__ for k in door.cond_op.python_key_table}
    assert {"ProxyTorchDispatchMode", "FakeTensorMode"} <= modes


def test_the_make_fx_tracer_under_way_is_a_module_global_of_proxy_tensor():
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    seen = []

    def f(x):
        seen.append(door.make_fx_tracer())
        return x + 1

    assert door.make_fx_tracer() is None
    proxy_tensor.make_fx(f)(torch.ones(2))
    assert isinstance(seen[0], proxy_tensor.PythonKeyTracer) and door.make_fx_tracer() is None


def test_a_dispatch_mode_is_seen_whether_it_is_a_users_or_one_of_torchs_infra_modes():
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    seen = []

    def f(x):
        seen.append(door.dispatch_mode_active())
        return x + 1

    assert not door.dispatch_mode_active()
    with Passing():
        assert door.dispatch_mode_active()
    with door.FakeTensorMode():
        assert door.dispatch_mode_active()
    proxy_tensor.make_fx(f)(torch.ones(2))
    assert seen == [True] and not door.dispatch_mode_active()
