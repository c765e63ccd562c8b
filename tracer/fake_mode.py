"""The fake mode of an engine trace: torch's ``FakeTensorMode`` with four additions.

* an output's size of one input dim nested divisions deep is given the one
  division it equals (``closed_forms``), so a chain of strided layers does
  not double its sizes' expressions at every layer;
* sizes are followed through small tensors (``size_tracking.SizeTracker``):
  it sees every op's outputs, and the model's small buffers as export
  fakifies them;
* ``symbolic_rnns``: recurrent ops on its fake tensors get fake outputs
  without unrolling over time (``rnn_shapes``), so their sequence length
  stays symbolic;
* views skip torch's fake-tensor cache unless they recur.  A view's output
  is metadata computed from its input; torch's cache recomputes that
  metadata symbolically to check every new entry and to rebuild the output
  on a hit.  A miss costs about three dispatches without the cache (XLNet:
  3.4 ms against 1.1 ms a view), while a hit saves the view's nested
  dispatches, so the cache only repays views that recur many times, such as
  a deep model's identical layers: a view goes to the cache from its third
  sighting in a trace (same op, same input metadata) and never when a size
  has a division (``//``, ``%``, ``/``), where rebuilding is slowest (a Swin
  view over padded-window sizes took 50 ms a miss).  Views of Llama's 32 layers: 2.7 s skipping the cache,
  1.7 s this way; XLNet's 1.1 s skipping it, 1.4 s this way, 2.6 s when
  every view without a division went to the cache.  Turning the cache off
  altogether made ViT slower: its hits on decomposed ops (layer norm,
  bicubic index math) are worth keeping.  Skipping the cache changes no
  result: torch bypasses it for many ops.

torch looks up the Python rules of operators (higher-order operators such
as ``cond`` and ``map``) by the exact mode class: this subclass takes the
rules registered for ``FakeTensorMode``.
"""
from __future__ import annotations

import torch

from .sizes.closed_forms import ClosedForms
from .sizes.size_tracking import SizeTracker
from .sympy_bridge import divides
from .torch_internals import FakeTensorMode, HigherOrderOperator, OpOverload, SymNode

__all__ = ["EngineFakeTensorMode"]

# A view goes to torch's cache from this sighting on (same op, same input metadata, in one trace).
_VIEW_SIGHTINGS_BEFORE_CACHING = 3


class EngineFakeTensorMode(FakeTensorMode):
    symbolic_rnns = True     # read by rnn_shapes' kernels
    supports_higher_order_operators = True

    def __init__(self, *, constants: dict[int, torch.Tensor] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.size_tracker = SizeTracker(self.shape_env, constants)
        self.closed_forms = ClosedForms(self.shape_env)
        self._division_memo: dict = {}     # sympy expression -> whether it has a division node
        self._views_seen: dict = {}        # (view op, its inputs' metadata) -> times dispatched

    def from_tensor(self, tensor, **kwargs):
        fake = super().from_tensor(tensor, **kwargs)
        self.size_tracker.captured(tensor, fake)
        return fake

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.size_tracker.flush()
        rules = func.python_key_table
        if FakeTensorMode in rules and type(self) not in rules:
            # first time here: register FakeTensorMode's rule for this class too (a rule may redirect
            # to __torch_dispatch__, which then finds it registered and goes on to torch's handling)
            func.py_impl(type(self))(rules[FakeTensorMode])
            return rules[type(self)](self, *args, **kwargs)
        if FakeTensorMode not in rules and isinstance(func, HigherOrderOperator):   # as torch would say it
            raise NotImplementedError(f"There was no rule registered for HigherOrderOperator "
                                      f"{func.name()} and mode {self}.")
        out = super().__torch_dispatch__(func, types, args, kwargs)
        self.closed_forms.simplify(out)
        self.size_tracker.after(func, args, kwargs, out)
        return out

    def _cached_dispatch_impl(self, func, types, args, kwargs):
        if not (isinstance(func, OpOverload) and func.is_view):
            return super()._cached_dispatch_impl(func, types, args, kwargs)
        if self._divides((args, kwargs)):
            return self._dispatch_impl(func, types, args, kwargs)
        key = (func, _metadata((args, kwargs)))
        seen = self._views_seen[key] = self._views_seen.get(key, 0) + 1
        if seen < _VIEW_SIGHTINGS_BEFORE_CACHING:
            return self._dispatch_impl(func, types, args, kwargs)
        return super()._cached_dispatch_impl(func, types, args, kwargs)

    def _divides(self, value) -> bool:
        """Whether a size in ``value`` (tensors' shapes, SymInts, nested in lists, tuples and dicts) has a
        division node."""
        if isinstance(value, torch.Tensor):
            return any(self._divides(size) for size in value.shape)
        if isinstance(value, torch.SymInt):      # a nested int (jagged tensors) has no expression
            return isinstance(value.node, SymNode) and _has_division(value.node.expr, self._division_memo)
        if isinstance(value, dict):
            value = list(value.values())
        return isinstance(value, (list, tuple)) and any(self._divides(v) for v in value)


def _has_division(expr, memo: dict) -> bool:
    if isinstance(expr, int) or not expr.args:
        return False
    if expr not in memo:
        memo[expr] = divides(type(expr)) or any(_has_division(a, memo) for a in expr.args)
    return memo[expr]


def _metadata(value):
    """A hashable stand-in for ``value``'s sizes: tensors by shape, strides, offset and dtype."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_nested:    # no strides to compare: never repeats
            return id(value)
        return (_metadata(tuple(value.shape)), _metadata(value.stride()), _metadata(value.storage_offset()),
                value.dtype)
    if isinstance(value, torch.SymInt):
        return value.node.expr if isinstance(value.node, SymNode) else id(value)
    if isinstance(value, dict):
        return tuple((k, _metadata(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_metadata(v) for v in value)
    return value if isinstance(value, (int, float, bool, str, type(None), torch.dtype)) else id(value)
