"""``torch.cond`` with each side traced under its own condition, and one output size where the sides agree.

torch traces both sides of ``torch.cond(pred, true_fn, false_fn, operands)``
over the whole symbolic domain, without ``pred`` as an assumption, so a side
that is valid only under its condition cannot be traced
(``x.reshape(B, -1, 32)`` on the side where ``T % 4 == 0``: torch checks
``16*T % 64 == 0`` at the example, which took the other side).  For a
predicate on the sizes of an engine's trace:

* ``torch.cond`` compiles itself with dynamo, whose speculation of each side
  runs in a shape environment of its own (the predicate a fresh symbol
  there); in an engine trace it calls the operator directly
  (``_compiled_unless_sizes``), doing what dynamo does for it: each side is
  traced into a graph, and the tensors of the enclosing trace a side reads
  (a module's weights) are lifted from that graph's constants into operands
  of both sides (``_cond_with_free_tensors_lifted``);
* cond's kernels (by mode and by dispatch key) call each side under its
  condition (``_Side``: ``EngineShapeEnv.assuming``, ``tracer/cond_sides.py``);
* where the sides' outputs differ in a size, the merge gives one backed size
  equal to each side's where it runs (``_merge_output``:
  ``EngineShapeEnv.unified_size``), not torch's fresh unbacked one.

The kernels find the engine from the predicate's own shape environment, so
torch tracing a program's graphs again after export (``run_decompositions``,
``torch.onnx.export``) traces its sides under their conditions too: the
wrapped kernels stay while such a program's environment lives (``_hold_for``).
For any other cond, and a predicate on data, every wrapper is torch's own.
"""
from __future__ import annotations

import functools
import threading
import weakref
from contextlib import nullcontext
from typing import Any, Callable

import sympy
import torch

from ..patching import SharedPatch, on_engine_thread
from ..torch_internals import (
    FakeTensor, Max, Min, cond_module, cond_op, contiguous_strides, dispatch_mode_active, get_proxy_slot,
    higher_order_utils, make_fx_tracer, pytree, reenter_make_fx, run_with_interpreter,
)

__all__ = ["conds_under_their_conditions", "indicator"]


def _engine_env_of(pred):
    """The engine's ShapeEnv a SymBool predicate belongs to (a trace's, or an exported program's); None for a
    tensor (data), a Python bool, or a size of torch's own ShapeEnv."""
    env = pred.node.shape_env if isinstance(pred, torch.SymBool) else None
    return env if hasattr(env, "assuming") else None


class _Side:
    """One side of a ``torch.cond``, called under its condition."""

    def __init__(self, fn: Callable, env, condition: sympy.Basic, taken: bool):
        self.fn, self.env, self.condition, self.taken = fn, env, condition, taken
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args):
        with self.env.assuming(self.condition, self.taken):
            return run_with_interpreter(self.fn)(*args)


def _sides_wrapped(args: tuple) -> tuple[tuple, tuple[_Side, _Side] | None]:
    """``args`` of a cond kernel with its two sides wrapped (found as the two callables after the
    predicate, wherever the kernel's own leading arguments end)."""
    for i in range(1, len(args) - 1):
        if callable(args[i]) and callable(args[i + 1]):
            env = _engine_env_of(args[i - 1])
            if env is None:
                return args, None
            condition = args[i - 1].node.expr
            sides = _Side(args[i], env, condition, True), _Side(args[i + 1], env, condition, False)
            return (*args[:i], *sides, *args[i + 2:]), sides
    return args, None


def _kernel(original: Callable) -> Callable:
    @functools.wraps(original)
    def kernel(*args, **kwargs):
        args, sides = _sides_wrapped(args)
        if sides is None:
            taken = None if kwargs else _taken_side_run_eagerly(args)
            return original(*args, **kwargs) if taken is None else taken()
        previous = getattr(_merging, "condition", None)
        _merging.condition = sides[0].condition
        try:
            # torch tracing a program's graphs again (run_decompositions) does so with the engine's patches
            with nullcontext() if on_engine_thread() else sides[0].env.retracing():
                return original(*args, **kwargs)
        finally:
            _merging.condition = previous
    return kernel


def _taken_side_run_eagerly(args: tuple) -> Callable[[], Any] | None:
    """The call of the taken side of a cond an engine traced, where the cond runs eagerly: real tensors, no
    dispatch mode (a program's module called with weights that require grad).  torch's autograd kernel
    first traces both sides at the inputs' sizes, which a side valid only under its condition fails; cond
    in eager is the taken side's call, whose operations autograd records as it goes."""
    if len(args) != 4 or not (callable(args[1]) and callable(args[2])) or dispatch_mode_active():
        return None
    pred, true_fn, false_fn, operands = args
    if isinstance(pred, torch.Tensor):
        if type(pred) is not torch.Tensor or pred.numel() != 1:
            return None
    elif not isinstance(pred, (bool, int)):
        return None
    tensors = [t for t in pytree.tree_leaves(operands) if isinstance(t, torch.Tensor)]
    if any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in tensors):
        return None
    if not (_traced_by_engine(true_fn) and _traced_by_engine(false_fn)):
        return None
    side = true_fn if bool(pred) else false_fn
    return lambda: side(*operands)


_engine_traced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _traced_by_engine(fn) -> bool:
    """Whether ``fn`` is a side's graph an engine traced: its values' sizes are the engine's symbols."""
    if not isinstance(fn, torch.fx.GraphModule):
        return False
    if fn not in _engine_traced:
        _engine_traced[fn] = any(hasattr(size.node.shape_env, "assuming")      # an engine's ShapeEnv
                                 for node in fn.graph.nodes for size in _sizes_of(node.meta.get("val")))
    return _engine_traced[fn]


def _sizes_of(value) -> list[torch.SymInt]:
    """The symbolic sizes in a node's value (a tensor's shape, a size, or containers of them)."""
    leaves = pytree.tree_leaves(value)
    sizes = [s for t in leaves if isinstance(t, torch.Tensor) for s in t.shape] + leaves
    return [s for s in sizes if isinstance(s, torch.SymInt)]


# -- one output from the two sides' -------------------------------------------------------------------

_merging = threading.local()          # the condition of the cond whose outputs are being merged
_torch_merge_output = cond_module._merge_output


def _merge_output(a, b, mode):
    """torch's merge of a true-side and a false-side output, where the sides differ in a size: one backed
    size equal to each side's where it runs (``unified_size``), and contiguous strides where both sides
    are laid out contiguously (torch's merge: a fresh unbacked size, and strides it cannot always find)."""
    env = mode.shape_env
    condition = getattr(_merging, "condition", None)
    if condition is None or not hasattr(env, "assuming"):
        return _torch_merge_output(a, b, mode)
    if isinstance(a, (int, torch.SymInt)) and isinstance(b, (int, torch.SymInt)):
        size = env.unified_size(condition, a, b)
        return _torch_merge_output(a, b, mode) if size is None else size
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() != b.dim():
        return _torch_merge_output(a, b, mode)
    sizes = [env.unified_size(condition, s, t) for s, t in zip(a.shape, b.shape)]
    laid_out = all(env.equal_on_side(condition, taken, stride, expected)
                   for t, taken in ((a, True), (b, False))
                   for stride, expected in zip(t.stride(), contiguous_strides(t.shape)) if t.shape)
    if any(s is None for s in sizes) or not laid_out or not _same_meta(a, b):
        return _torch_merge_output(a, b, mode)
    with mode:
        return torch.empty_strided(sizes, contiguous_strides(sizes), dtype=a.dtype, device=a.device,
                                   requires_grad=a.requires_grad or b.requires_grad)


def _same_meta(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype, a.device, a.layout, a.is_quantized, a.is_conj(), a.is_sparse) == (
        b.dtype, b.device, b.layout, b.is_quantized, b.is_conj(), b.is_sparse) and (
        a.storage_offset() == 0 == b.storage_offset())


def indicator(condition: sympy.Basic) -> sympy.Expr | None:
    """``condition`` as an integer expression that is 1 where it holds and 0 where not (min/max of its
    comparisons' sides, which torch and the engine both read); None for any other condition."""
    if isinstance(condition, sympy.Not):
        inner = indicator(condition.args[0])
        return None if inner is None else 1 - inner
    if isinstance(condition, (sympy.And, sympy.Or)):
        parts = [indicator(a) for a in condition.args]
        if any(p is None for p in parts):
            return None
        return (Min if isinstance(condition, sympy.And) else Max)(*parts)
    if not isinstance(condition, sympy.core.relational.Relational):
        return None
    d = condition.lhs - condition.rhs
    distance = Min(Max(d, -d), 1)                        # 0 where equal, 1 where not (integers)
    table = {sympy.Eq: 1 - distance, sympy.Ne: distance,
             sympy.Gt: Min(Max(d, 0), 1), sympy.Ge: Min(Max(d + 1, 0), 1),
             sympy.Lt: Min(Max(-d, 0), 1), sympy.Le: Min(Max(1 - d, 0), 1)}
    return table.get(type(condition))


# -- torch.cond outside dynamo ----------------------------------------------------------------------------

_hop_compile_and_call = higher_order_utils._hop_compile_and_call


def _compiled_unless_sizes(fn, args, kwargs=None):
    """torch.cond compiles itself with dynamo, whose speculation of each side runs in a ShapeEnv of its own
    (the predicate a fresh symbol there), so no condition can reach it: a cond on sizes in an engine trace
    calls the operator directly, its sides traced by make_fx under their conditions.  Any other is
    torch's."""
    env = _engine_env_of(args[0]) if args else None
    if (getattr(fn, "__name__", "") == "_cond_op_wrapper" and len(args) == 4 and not kwargs
            and env is not None and on_engine_thread() and make_fx_tracer() is not None):
        _hold_for(env)
        return _cond_with_free_tensors_lifted(*args)
    return _hop_compile_and_call(fn, args, kwargs)


def _cond_with_free_tensors_lifted(pred: torch.SymBool, true_fn: Callable, false_fn: Callable, operands):
    """The cond operator called as dynamo would call it: each side traced into a graph (under its
    condition), and what it reads of the enclosing trace lifted into operands of both sides: the tensors
    and sizes the sides close over (traced as inputs, after the operands), and the tensors read through
    attributes (a module's weights: constants of the side's graph, made inputs)."""
    flat, spec = pytree.tree_flatten(operands)
    condition = pred.node.expr
    closed = _closed_over(true_fn, false_fn)
    count = len(flat)

    env = _engine_env_of(pred)

    def side(fn: Callable, taken: bool) -> torch.fx.GraphModule:
        def on_flat(*xs):
            out = fn(*pytree.tree_unflatten(list(xs[:count]), spec))
            return pytree.tree_map_only(torch.Tensor, lambda t: _dense(env, condition, taken, t), out)
        return reenter_make_fx(_Side(on_flat, env, condition, taken))(*flat, *closed)

    outer = make_fx_tracer()
    before = set(outer.graph.nodes)
    graphs = [side(true_fn, True), side(false_fn, False)]
    for node in reversed([n for n in outer.graph.nodes if n not in before]):
        # what these traces left in the enclosing graph: the tensors they read, as constants, and their
        # sizes (the cond's own trace reads the tensors as operands)
        if node.users or not (node.op == "get_attr" or node.target in _SIZE_QUERIES):
            continue
        outer.graph.erase_node(node)
        if node.op == "get_attr" and hasattr(outer.root, node.target):
            delattr(outer.root, node.target)
    free: dict[int, torch.Tensor] = {}
    for graph in graphs:
        for node in graph.graph.nodes:
            value = getattr(graph, node.target, None) if node.op == "get_attr" else None
            if isinstance(value, torch.Tensor) and _of_the_enclosing_trace(value, outer):
                free.setdefault(id(value), value)
    lifted = list(free.values())
    graphs = [_taking(graph, count + len(closed), lifted) for graph in graphs]
    return cond_op(pred, graphs[0], graphs[1], (*flat, *closed, *lifted))


def _of_the_enclosing_trace(tensor: torch.Tensor, outer) -> bool:
    """Whether a tensor a side's graph holds as a constant is one the enclosing trace has: one it traced,
    or a fake one it has not read yet (a module's weight read first by a cond nested in a side: lifted
    there too, so that it reaches the program's inputs through every level)."""
    if get_proxy_slot(tensor, outer, None) is not None:
        return True
    return isinstance(tensor, FakeTensor) and tensor.constant is None


def _dense(env, condition: sympy.Basic, taken: bool, t: torch.Tensor) -> torch.Tensor:
    """``t``, or a contiguous copy where it is not laid out contiguously on its side: the sides' outputs
    merge into one laid out contiguously (torch's merge refuses outputs laid out in different orders)."""
    if all(env.equal_on_side(condition, taken, stride, expected)
           for stride, expected in zip(t.stride(), contiguous_strides(t.shape))):
        return t
    return t.clone(memory_format=torch.contiguous_format)


def _closed_over(*functions: Callable) -> list:
    """The tensors and sizes (SymInts) the functions' closures and defaults hold, once each, in order (a
    container of them included: a tuple of sizes)."""
    found: dict[int, Any] = {}
    for fn in functions:
        cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or () if _filled(c)]
        for value in [*cells, *(getattr(fn, "__defaults__", None) or ())]:
            for leaf in pytree.tree_leaves(value) if isinstance(value, (tuple, list, dict)) else [value]:
                if isinstance(leaf, (torch.Tensor, torch.SymInt)):
                    found.setdefault(id(leaf), leaf)
    return list(found.values())


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:                 # a cell not yet bound
        return False
    return True


_SIZE_QUERIES = (torch.ops.aten.sym_size.int, torch.ops.aten.sym_stride.int, torch.ops.aten.sym_numel.default,
                 torch.ops.aten.sym_storage_offset.default)


def _taking(graph: torch.fx.GraphModule, count: int, lifted: list[torch.Tensor]) -> torch.fx.GraphModule:
    """``graph`` with the ``lifted`` tensors it held as constants taken as inputs after its ``count``
    operands (every side takes them all, in one order)."""
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == count, "a side's graph takes the cond's operands"
    at = placeholders[-1] if placeholders else None
    inputs = {}
    for i, tensor in enumerate(lifted):
        with graph.graph.inserting_after(at) if at is not None else graph.graph.inserting_before():
            at = inputs[id(tensor)] = graph.graph.placeholder(f"lifted_{i}")
            at.meta["val"] = tensor
    taken = set()        # a constant read twice has two get_attr nodes: its attribute goes after both
    for node in list(graph.graph.nodes):
        value = getattr(graph, node.target, None) if node.op == "get_attr" else None
        if isinstance(value, torch.Tensor) and id(value) in inputs:
            node.replace_all_uses_with(inputs[id(value)])
            graph.graph.erase_node(node)
            taken.add(node.target)
    for target in taken:
        delattr(graph, target)
    graph.recompile()
    return graph


# -- installing ------------------------------------------------------------------------------------------

_saved: dict = {}


def _install() -> None:
    tables: list[dict] = [cond_op.python_key_table, cond_op.py_kernels]
    for table in tables:
        for key, original in list(table.items()):
            _saved[id(table), key] = (table, original)
            table[key] = _kernel(original)
    cond_op._dispatch_cache.clear()
    cond_module._merge_output = _merge_output  # type: ignore[attr-defined]
    higher_order_utils._hop_compile_and_call = _compiled_unless_sizes


def _restore() -> None:
    for (_, key), (table, original) in _saved.items():
        table[key] = original
    _saved.clear()
    cond_op._dispatch_cache.clear()
    cond_module._merge_output = _torch_merge_output  # type: ignore[attr-defined]
    higher_order_utils._hop_compile_and_call = _hop_compile_and_call


# Within: each side of a ``torch.cond`` on sizes is traced under its condition (engine threads).
conds_under_their_conditions = SharedPatch(_install, _restore)

_held: weakref.WeakSet = weakref.WeakSet()


def _hold_for(env) -> None:
    """Keep the kernels wrapped while ``env`` lives: a program holding a cond on its sizes is traced again
    by torch (``run_decompositions``, ``torch.onnx.export``) outside any engine trace, and its sides need
    their conditions then too.  For any other cond the wrapped kernels are torch's."""
    if env not in _held:
        _held.add(env)
        conds_under_their_conditions.acquire()
        weakref.finalize(env, conds_under_their_conditions.release)
