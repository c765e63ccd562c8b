"""The fake mode of an engine trace: torch's ``FakeTensorMode`` with three additions.

* sizes are followed through small tensors (``size_tracking.SizeTracker``):
  it sees every op's outputs, and the model's small buffers as export
  fakifies them;
* ``symbolic_rnns``: recurrent ops on its fake tensors get fake outputs
  without unrolling over time (``rnn_shapes``), so their sequence length
  stays symbolic;
* view ops over sizes with a division (``//``, ``%``, ``/``) skip torch's
  fake-tensor cache.  A view's output is metadata computed from its input;
  torch's cache recomputes that metadata symbolically to check every new
  entry and to rebuild the output on a hit, which for such sizes costs more
  than the view itself: in a Swin trace a view over padded-window sizes took
  50 ms a miss, and skipping the cache for views took that export from 17 s
  to 12.7 s and ViT's (patch counts ``H // 8``) from 2.0 s to 1.7 s (medians
  of 3).  Views over plain products (a transformer's heads) stay cached: a
  deep Llama's identical layers hit them, 5-8% of its export when all views
  skipped the cache.  Turning the cache off altogether made ViT slower
  (2.5 s): its hits on decomposed ops (layer norm, bicubic index math) are
  worth keeping.  Skipping the cache changes no result: torch bypasses it for
  many ops.

torch looks up the Python rules of operators (higher-order operators such
as ``cond`` and ``map``) by the exact mode class: this subclass takes the
rules registered for ``FakeTensorMode``.
"""
from __future__ import annotations

import torch

from .size_tracking import SizeTracker
from .torch_internals import DIVISION_FUNCTIONS, FakeTensorMode, HigherOrderOperator, OpOverload, SymNode

__all__ = ["EngineFakeTensorMode"]


class EngineFakeTensorMode(FakeTensorMode):
    symbolic_rnns = True     # read by rnn_shapes' kernels
    supports_higher_order_operators = True

    def __init__(self, *, constants: dict[int, torch.Tensor] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.size_tracker = SizeTracker(self.shape_env, constants)
        self._division_memo: dict = {}     # sympy expression -> whether it has a division node

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
        self.size_tracker.after(func, args, kwargs, out)
        return out

    def _cached_dispatch_impl(self, func, types, args, kwargs):
        if isinstance(func, OpOverload) and func.is_view and self._divides((args, kwargs)):
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
        memo[expr] = isinstance(expr, DIVISION_FUNCTIONS) or any(_has_division(a, memo) for a in expr.args)
    return memo[expr]
