"""The model's inputs at a point of the declared ranges: the example's values cut or repeated to other
sizes."""
from __future__ import annotations

import inspect
import math
import mmap

import torch
from sympy import Expr

from shapeproof.solver import evaluate_term, symbol
from shapeproof.tracer.torch_internals import pytree

# Below a page or so an anonymous map saves nothing over torch.zeros.
_LAZY_ZEROS_BYTES = 1 << 16

__all__ = ["bound_arguments", "input_sizes", "inputs_at", "lazy_zeros"]



def bound_arguments(model, args: tuple, kwargs: dict | None) -> inspect.BoundArguments:
    """The call bound to ``model.forward``'s signature, as torch binds it to read ``dynamic_shapes``."""
    return inspect.signature(model.forward).bind(*args, **(kwargs or {}))


def input_sizes(sizes: dict[str, Expr], point: dict[str, int]) -> dict[str, int]:
    """The size of every dynamic input dim (by torch's source name) at a canonical point."""
    env = {symbol(k): v for k, v in point.items()}
    return {name: int(evaluate_term(term, env)) for name, term in sizes.items()}


def inputs_at(model, args: tuple, kwargs: dict | None, sizes: dict[str, int],
              resized=None) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with every dim named in ``sizes`` resized.

    Non-strict export replaces inputs by fake tensors, so only shapes and
    dtypes matter; values are zeros (``lazy_zeros``), or what
    ``resized(tensor, shape)`` makes.
    """
    bound = bound_arguments(model, args, kwargs)
    leaves, treespec = pytree.tree_flatten_with_path(dict(bound.arguments))
    new_leaves = []
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            prefix = "L" + pytree.keystr(path)
            shape = [sizes.get(f"{prefix}.size()[{d}]", n) for d, n in enumerate(leaf.shape)]
            if list(shape) != list(leaf.shape):
                leaf = resized(leaf, shape) if resized else lazy_zeros(shape, leaf.dtype, leaf.device)
        new_leaves.append(leaf)
    resized = pytree.tree_unflatten(new_leaves, treespec)
    return _as_called(bound.signature, resized, len(args), kwargs or {})


def _as_called(signature: inspect.Signature, values: dict, positional: int,
               kwargs: dict) -> tuple[tuple, dict]:
    """The bound ``values`` passed as the call passed them: ``positional`` arguments by position, the
    keywords of ``kwargs`` by keyword (``BoundArguments.args`` would move keywords to positions, and a
    program traced from such a call takes them positionally: calling it with the keywords fails)."""
    params = signature.parameters.values()
    leading = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var_positional = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), None)
    var_keyword = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    named = [values[name] for name in leading[:positional]]
    extra = list(values[var_positional]) if var_positional and positional > len(leading) else []
    by_keyword = {key: values[key] if key in keywords else values[var_keyword][key] for key in kwargs}
    return tuple(named + extra), by_keyword


def lazy_zeros(shape: list[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zeros that take no memory until written.

    Each program keeps its example inputs, and nothing writes them (the
    trace sees fake tensors): a region search at a batch of 8 images of
    219x84 would otherwise hold tens of MB per trace.  Pages of an
    anonymous map read as zero and are only allocated when touched.  The
    tensor owns the map's storage rather than viewing a flat tensor of it:
    export fakifies a view's ``_base`` too, and its size would become one
    more symbol of the trace (``x._base.size()[0]``).
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if device.type != "cpu" or nbytes < _LAZY_ZEROS_BYTES:
        return torch.zeros(shape, dtype=dtype, device=device)
    try:
        flat = torch.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype)
    except (TypeError, ValueError, RuntimeError):     # a dtype frombuffer does not take
        return torch.zeros(shape, dtype=dtype, device=device)
    contiguous = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    return torch.empty(0, dtype=dtype).set_(flat.untyped_storage(), 0, shape, contiguous)
