"""The one door to torch's private APIs (torch 2.13); ``tests/test_torch_internals.py`` pins each name.

Everything shapeproof uses from torch that is not public API is imported
here and only here, so a torch upgrade that moves one of them fails loudly in
one test instead of somewhere deep in a trace.
"""
from __future__ import annotations

import importlib
from types import CodeType, FunctionType

import torch
from torch._C._dynamo.eval_frame import reset_code as reset_dynamo_code
from torch.fx.experimental import _config as fx_experimental_config
from torch._dynamo.exc import UserError, UserErrorType
from torch._C import DispatchKey
import torch._export.utils as export_utils  # noqa: F401  (size_asserts wraps its assert lowering)
from torch._export.utils import _compiling_state_context as compiling_state_context
from torch._guards import TracingContext, tracing
import torch._higher_order_ops  # noqa: F401  (registers the higher-order operators by name)
from torch._higher_order_ops.scan import scan
# cond's kernels and dynamo's speculation of its sides (control/cond.py wraps them)
from torch._higher_order_ops.cond import cond_op
import torch._higher_order_ops.utils as higher_order_utils  # (and this module's _hop_compile_and_call)
from torch._higher_order_ops.utils import _maybe_run_with_interpreter as run_with_interpreter
from torch._higher_order_ops.utils import reenter_make_fx
import torch.fx.experimental.proxy_tensor as proxy_tensor
from torch.fx.experimental.proxy_tensor import get_proxy_slot
from torch._guards import ShapeGuard
from torch._ops import HigherOrderOperator, OpOverload
# the strides torch gives a contiguous tensor of a shape: its fake tensors' allocations and views use it, so
# strides made by it are recognised by their form (branch_merge's layout checks)
from torch._prims_common import make_contiguous_strides_for as contiguous_strides
from torch._ops import _higher_order_ops as _HIGHER_ORDER_OPERATORS
import torch._subclasses.fake_impls as fake_impls
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._subclasses.fake_tensor import (
    DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException,
)
from torch.export._draft_export import DraftExportReport
from torch.export.dynamic_shapes import _DerivedDim as DerivedDim
from torch.export.exported_program import _convert_guards_to_code as convert_guards_to_code
from torch.fx.experimental.sym_node import SymNode
# graph modules with their fake tensors and symbolic sizes, pickled (trace_pool ships a child's program so)
from torch.fx._graph_pickler import GraphPickler, Options as GraphPicklerOptions
from torch.fx._graph_pickler import _GraphUnpickler as GraphUnpickler, _UnpickleState as GraphUnpickleState
from torch.fx._graph_pickler import _ShapeEnvPickleData as ShapeEnvPickleData
from torch.fx._graph_pickler import patch_pytree_map_over_slice as graph_pickling
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, RelaxedUnspecConstraint
from torch.fx.experimental.symbolic_shapes import DimDynamic, StrictMinMaxConstraint, uninteresting_files
from torch.fx.experimental.symbolic_shapes import ShapeEnv as TorchShapeEnv
# exact_cancel patches this module (pinned in tests)
import torch.utils._sympy.functions as sympy_functions  # noqa: F401
from torch.utils._sympy.functions import (
    CeilToInt, CleanDiv, FloatPow, FloatTrueDiv, FloorDiv, FloorToInt, Identity, IntTrueDiv, LShift, Max, Min,
    Mod, ModularIndexing, OpaqueUnaryFn_sqrt, PowByNatural, PythonMod, RoundToInt, RShift, ToFloat,
    TruncToInt,
)
import torch.utils._pytree as pytree
from torch.utils._sympy.numbers import IntInfinity, NegativeIntInfinity
from torch.utils._sympy.value_ranges import ValueRanges

# the check symbolic_casts makes before torch.sym_sqrt (math.sqrt raises below 0)
check = torch._check

# the module of torch.cond (its package's attribute ``cond`` is the function): control/cond.py swaps its
# ``_merge_output``
cond_module = importlib.import_module("torch._higher_order_ops.cond")



def dispatch_mode_active() -> bool:
    """Whether a torch dispatch mode (a user's, or torch's fake, proxy or functional mode) is on this thread:
    without one, an operator runs eagerly on the tensors it is given."""
    infra_modes = torch._C._TorchDispatchModeKey.__members__.values()
    return torch._C._len_torch_dispatch_stack() > 0 or any(
        torch._C._get_dispatch_mode(key) is not None for key in infra_modes)


def make_fx_tracer():
    """The fx tracer of the make_fx trace under way on this thread (export's, or a side's), if any."""
    current = proxy_tensor._CURRENT_MAKE_FX_TRACER
    return None if current is None else current.fx_tracer


# (name, object) pairs the pin test checks; add a row when touching a new private name.
PINNED = {
    "TracingContext": TracingContext, "tracing": tracing, "OpOverload": OpOverload,
    "FakeTensorMode": FakeTensorMode, "DerivedDim": DerivedDim,
    "convert_guards_to_code": convert_guards_to_code, "DispatchKey": DispatchKey,
    "HigherOrderOperator": HigherOrderOperator, "FakeTensor": FakeTensor,
    "GuardOnDataDependentSymNode": GuardOnDataDependentSymNode, "TorchShapeEnv": TorchShapeEnv,
    "RelaxedUnspecConstraint": RelaxedUnspecConstraint, "StrictMinMaxConstraint": StrictMinMaxConstraint,
    "DimDynamic": DimDynamic, "uninteresting_files": uninteresting_files, "UserError": UserError,
    "UserErrorType": UserErrorType,
    "CeilToInt": CeilToInt, "CleanDiv": CleanDiv, "FloatTrueDiv": FloatTrueDiv, "FloorDiv": FloorDiv,
    "FloorToInt": FloorToInt, "Identity": Identity, "IntTrueDiv": IntTrueDiv, "LShift": LShift, "Max": Max,
    "Min": Min, "Mod": Mod, "ModularIndexing": ModularIndexing, "PowByNatural": PowByNatural,
    "PythonMod": PythonMod, "RShift": RShift, "ToFloat": ToFloat, "TruncToInt": TruncToInt,
    "IntInfinity": IntInfinity, "NegativeIntInfinity": NegativeIntInfinity, "ValueRanges": ValueRanges,
    "DraftExportReport": DraftExportReport,
    "DataDependentOutputException": DataDependentOutputException,
    "DynamicOutputShapeException": DynamicOutputShapeException,
    "UnsupportedOperatorException": UnsupportedOperatorException,
    "compiling_state_context": compiling_state_context,
    "RoundToInt": RoundToInt, "SymNode": SymNode, "FloatPow": FloatPow,
    "OpaqueUnaryFn_sqrt": OpaqueUnaryFn_sqrt, "check": check, "contiguous_strides": contiguous_strides,
    "GraphPickler": GraphPickler, "GraphPicklerOptions": GraphPicklerOptions,
    "GraphUnpickler": GraphUnpickler, "GraphUnpickleState": GraphUnpickleState,
    "ShapeEnvPickleData": ShapeEnvPickleData, "graph_pickling": graph_pickling,
    "cond_op": cond_op, "run_with_interpreter": run_with_interpreter, "ShapeGuard": ShapeGuard,
    "cond_module._merge_output": cond_module._merge_output,
    "higher_order_utils._hop_compile_and_call": higher_order_utils._hop_compile_and_call,
    "reenter_make_fx": reenter_make_fx, "get_proxy_slot": get_proxy_slot,
    "dispatch_mode_active": dispatch_mode_active,
}
# Private ATen operators (a leading underscore), each pinned by the name torch prints it with.
_aten = torch.ops.aten
UNSAFE_VIEW = _aten._unsafe_view.default      # a view: an identity (export), elements kept (size tracker)
TO_COPY = _aten._to_copy.default              # a dtype conversion (size tracker)
LOCAL_SCALAR_DENSE = _aten._local_scalar_dense.default    # .item(): the size tracker binds its result
ASSERT_SCALAR = _aten._assert_scalar.default  # a runtime assert in an exported graph (size_asserts)
# interpolate(mode="nearest-exact") of 3-, 4- and 5-d inputs: an identity at scale 1 (export)
UPSAMPLE_NEAREST_EXACT = (_aten._upsample_nearest_exact1d.vec, _aten._upsample_nearest_exact2d.vec,
                          _aten._upsample_nearest_exact3d.vec)
PINNED.update({
    "aten._unsafe_view.default": UNSAFE_VIEW, "aten._to_copy.default": TO_COPY,
    "aten._local_scalar_dense.default": LOCAL_SCALAR_DENSE, "aten._assert_scalar.default": ASSERT_SCALAR,
    "aten._upsample_nearest_exact1d.vec": UPSAMPLE_NEAREST_EXACT[0],
    "aten._upsample_nearest_exact2d.vec": UPSAMPLE_NEAREST_EXACT[1],
    "aten._upsample_nearest_exact3d.vec": UPSAMPLE_NEAREST_EXACT[2],
})
# Higher-order operators whose body runs once per step of a loop (loop_bodies), by the name torch registers
# each under (importing torch._higher_order_ops registers them).
LOOP_OPERATORS = ("while_loop", "while_loop_stack_output", "scan", "map_impl", "associative_scan")


def higher_order_operator(name: str) -> HigherOrderOperator:
    return _HIGHER_ORDER_OPERATORS[name]


PINNED.update({f"higher-order operator {name}": _HIGHER_ORDER_OPERATORS.get(name) for name in LOOP_OPERATORS})
# A loop rolled into one scan (loops) calls torch's ``scan``, which traces its body with dynamo (fullgraph)
# through its nested function ``run_flattened_scan``; dynamo's cache for that code is cleared around each call
# (an entry cached by an earlier trace would give this one a body without asking its guards again).
SCAN_COMPILED_FUNCTION = "run_flattened_scan"


def scan_compiled_code() -> CodeType:
    """The code object of ``scan``'s nested function that dynamo compiles."""
    return next(c for c in scan.__code__.co_consts
                if isinstance(c, CodeType) and c.co_name == SCAN_COMPILED_FUNCTION)


PINNED.update({"torch._higher_order_ops.scan.scan": scan,
               "torch._C._dynamo.eval_frame.reset_code": reset_dynamo_code})
# dynamo traces that body in a ShapeEnv of its own, whose size symbols it specializes at 0 and 1: guards
# ``2 <= s`` which its guard check, run on the trace's own sizes, hands back to the trace as guards on the
# loop's inputs that the Python loop never asked.  With this config flag the symbols start at [0, inf).
BACKED_SIZE_OBLIVIOUS = "backed_size_oblivious"


def zero_one_unspecialized():
    """A context in which dynamo allocates size symbols without specializing them at 0 and 1."""
    return fx_experimental_config.patch(**{BACKED_SIZE_OBLIVIOUS: True})  # type: ignore[attr-defined]
# torch.utils._pytree functions (export's input flattening, the size tracker's and closed_forms' leaves)
PYTREE_FUNCTIONS = ["tree_flatten_with_path", "tree_unflatten", "keystr", "tree_leaves"]
PINNED.update({f"pytree.{name}": getattr(pytree, name) for name in PYTREE_FUNCTIONS})

# ShapeEnv methods EngineShapeEnv overrides, with the parameters it relies on.
OVERRIDDEN_SHAPE_ENV_METHODS = {
    "_init": [],
    "create_symbol": ["val", "source", "dynamic_dim", "constraint_dim", "positive",
                      "do_not_specialize_zero_one", "symbolic_context"],
    "create_unbacked_symint": ["source"],
    "create_unbacked_symbool": [],
    "_constrain_range_for_size": ["a", "min", "max"],
    "_maybe_evaluate_static": ["expr", "unbacked_only", "compute_hint", "size_oblivious", "axioms",
                               "var_to_range"],
    "evaluate_expr": ["orig_expr", "hint", "fx_node", "size_oblivious", "fallback_value", "forcing_spec"],
    "guard_or_defer_runtime_assert": ["orig_expr", "msg", "fx_node"],
    "produce_guards_verbose": ["placeholders", "sources", "input_contexts"],
    "_get_user_frame": [],
    "_set_replacement": ["a", "tgt", "msg"],
}
# FakeTensorMode methods EngineFakeTensorMode overrides (fake_mode: views skip the dispatch cache) or calls.
OVERRIDDEN_FAKE_MODE_METHODS = {"_cached_dispatch_impl": ["func", "types", "args", "kwargs"]}
CALLED_FAKE_MODE_METHODS = {"_dispatch_impl": ["func", "types", "args", "kwargs"]}
# ShapeEnv attributes EngineShapeEnv and the region search read (the size tracker also resets a bound
# symbol's var_to_range).
READ_SHAPE_ENV_ATTRIBUTES = ["guards", "deferred_runtime_asserts", "var_to_range",
                             "source_name_to_debug_name", "var_to_sources", "dim_constraints",
                             "backed_var_to_val", "replacements"]
# Private ShapeEnv methods and attributes the size tracker uses (it sets and, while torch lowers runtime
# asserts, lifts the replacements of the symbols it binds).
CALLED_SHAPE_ENV_METHODS = {"_set_replacement": ["a", "tgt", "msg"], "_update_version_counter": []}
REPLACEMENT_ATTRIBUTES = ["replacements", "_replacements_version_counter"]
# export lowers deferred runtime asserts through this module global of torch._export.utils
LOWER_ASSERTS = ("apply_runtime_assertion_pass", "insert_deferred_runtime_asserts(")
# Sizes followed through tensors (tracer/size_*.py, fake_mode.py, rnn_shapes.py) rely on: a SymNode's
# unreplaced expression, a fake tensor's constant and mode, operators' Python kernel tables, and the
# message insert_deferred_runtime_asserts gives each runtime assert.
SYM_NODE_UNREPLACED_EXPRESSION = "_expr"
# sym_expr_cache reads the replaced-expression cache of SymNode.expr; sizes/closed_forms resets it when it
# gives a node an equal expression
SYM_NODE_EXPRESSION_CACHE = ["_expr_cache", "_expr_ver"]
FAKE_TENSOR_ATTRIBUTES = ["constant", "fake_mode"]
OPERATOR_KERNEL_TABLES = ["py_kernels", "python_key_table", "_dispatch_cache"]
RUNTIME_ASSERT_MESSAGE = "Runtime assertion failed for expression {ra.expr} on node"
# export's non-strict path raises when DimConstraints.forced_specializations() is non-empty.
FORCED_SPECIALIZATIONS = ("torch._export.non_strict_utils", "produce_guards_and_solve_constraints",
                          "forced_specializations")
PRETTIFY_RESULTS = "prettify_results"     # DimConstraints method export calls for its message
SOLVE_CONSTRAINTS = "solve"               # and the one it calls first, which feeds only those two
# Symbolic contexts carry ``constraint_sizes`` of dataclass constraints with ``warn_only``
# (EngineShapeEnv demotes them); ExportedProgram keeps its input checks in ``_guards_code``.
CONSTRAINT_FIELDS = {"StrictMinMaxConstraint": "warn_only", "StatelessSymbolicContext": "constraint_sizes"}
EXPORTED_PROGRAM_GUARDS_ATTRIBUTE = "_guards_code"
# draft_export leaves its DraftExportReport on the program as ``ep._report`` (torch.onnx reads it); the
# program shapeproof.engine()'s draft_export returns carries one too.
DRAFT_EXPORT_REPORT_ATTRIBUTE = "_report"
# An operator overload's schema (its arguments by name, their aliasing, whether it writes in place) is
# ``OpOverload._schema``: the size tracker names arguments with it, the region search reads it to merge
# graphs.
OP_SCHEMA_ATTRIBUTE = "_schema"


# How ``bool(symbool)`` reaches ShapeEnv.evaluate_expr, innermost first: the frame above the last is the code
# that asked for the truth value (branch_merge reads its ``if`` from there).
BOOL_GUARD_PATH = ("evaluate_sym_node", "evaluate", "guard_bool", "bool_", "__bool__")
# the SymNode method every truth value of a SymBool (Python's or a tensor's) goes through: its ``self``
GUARD_BOOL, SYM_NODE_MODULE = "guard_bool", "torch.fx.experimental.sym_node"


# Questions torch asks only to lay out memory (hintless).  A size of 1 leaves its stride free, so torch's
# stride and memory-format code asks ``size == 1`` (or ``size > 1``): in these Python functions, and in the
# C++ kernels of these operators (reached from Python by an OpOverload call, ``torch._ops``' ``__call__``, or
# by a Tensor method through export's ``__torch_function__``, whose ``func`` it is).  The first Python frame
# outside torch's shape environment (SHAPE_ENV_MODULES) says which; a frame of ASSERTING_FUNCTIONS on the
# way means the question is an assertion (``torch._check``), never a layout question.
LAYOUT_FUNCTIONS = frozenset({
    ("torch._prims", "_collapse_view_helper"), ("torch._prims", "_broadcast_in_dim_meta"),
    ("torch._subclasses.fake_impls", "conv"), ("torch._subclasses.fake_impls", "_view_unbacked_meta"),
    # (a closure of make_fast_binary_impl: its guard_or_false only picks the fast or the slow meta)
    ("torch._subclasses.fake_impls", "fast_binary_impl"),
    # (its fast path for reduced dims of size 1 only picks the meta's route: export keeps the operator)
    ("torch._refs.linalg", "vector_norm"),
    *(("torch._prims_common", name) for name in (
        "check_contiguous_sizes_strides", "is_contiguous", "is_channels_last_contiguous_2d",
        "is_channels_last_contiguous_3d", "_is_non_overlapping_and_dense_or_false",
        "compute_elementwise_output_logical_to_physical_perm", "make_contiguous_strides_for",
        "are_strides_like_channels_last_or_false", "suggest_memory_format")),
})
# Broadcasting asks ``guard_or_false(size == 1)`` where either answer gives the same common shape (the size
# it compares, or 1 where it is 1) and the same expansion (an expand of 1 to 1 is the tensor itself); only
# those questions of these functions are answered as hintless ones.
BROADCAST_FUNCTIONS = frozenset({("torch._refs", "_broadcast_shapes"), ("torch._refs", "_maybe_broadcast"),
                                 ("torch._subclasses.fake_impls", "infer_size")})
LAYOUT_OPS = frozenset({"aten::reshape", "aten::view", "aten::flatten", "aten::contiguous",
                        "aten::convolution", "aten::_convolution", "aten::linear", "aten::matmul"})
LAYOUT_METHODS = frozenset({"reshape", "view", "flatten", "contiguous"})
# the Python frames that call an operator's C++ kernel, and the local holding the operator: a call, a
# decomposition of a composite op (fake tensors'), export's decomposition of one (run_decompositions)
OP_CALLS = {("torch._ops", "__call__"): "self", ("torch._ops", "decompose"): "self",
            ("torch._export.utils", "_special_op_to_decompose_cia"): "kernel"}
TORCH_FUNCTION_HOOK = "__torch_function__"
SHAPE_ENV_MODULES = frozenset({"torch.fx.experimental.symbolic_shapes", "torch.fx.experimental.sym_node"})
ASSERTING_FUNCTIONS = frozenset({"expect_true", "expect_size", "_check_with",
                                 "guard_or_defer_runtime_assert"})
# A view's fake output: torch computes it without asking whether a size is 1 (``_view_unbacked_meta``, its
# meta for sizes without a hint) when this test of fake_impls says some size has none.
VIEW_HINT_TEST = "_view_has_unbacked_input"
PINNED.update({f"fake_impls.{VIEW_HINT_TEST}": getattr(fake_impls, VIEW_HINT_TEST, None),
               "fake_impls._view_unbacked_meta": getattr(fake_impls, "_view_unbacked_meta", None)})


def _defined_in(module_name: str, name: str):
    """The function ``name`` of the module, or the code of a function by that name nested one level in one
    of its functions (a closure torch builds per operator); None if neither."""
    module = importlib.import_module(module_name)
    if hasattr(module, name):
        return getattr(module, name)
    return next((const for value in vars(module).values() if isinstance(value, FunctionType)
                 for const in value.__code__.co_consts
                 if isinstance(const, CodeType) and const.co_name == name), None)


PINNED.update({f"{module}.{name}": _defined_in(module, name)
               for module, name in LAYOUT_FUNCTIONS | BROADCAST_FUNCTIONS})


def view_hint_test():
    return getattr(fake_impls, VIEW_HINT_TEST)


def set_view_hint_test(test) -> None:
    setattr(fake_impls, VIEW_HINT_TEST, test)


def op_schema(op):
    """``op``'s ``torch.FunctionSchema`` (``arguments``, ``is_mutable``), or None if it has none."""
    return getattr(op, OP_SCHEMA_ATTRIBUTE, None)
