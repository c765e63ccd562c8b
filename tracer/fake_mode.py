"""The fake mode of an engine trace: torch's ``FakeTensorMode`` with three additions.

* sizes are followed through small tensors (``size_tracking.SizeTracker``):
  it sees every op's outputs, and the model's small buffers as export
  fakifies them;
* ``symbolic_rnns``: recurrent ops on its fake tensors get fake outputs
  without unrolling over time (``rnn_shapes``), so their sequence length
  stays symbolic;
* view ops skip torch's fake-tensor cache.  A view's output is metadata
  computed from its input; torch's cache recomputes that metadata symbolically
  to check every new entry and to rebuild the output on a hit, so a view pays
  about twice on a miss and saves little on a hit.  In a Swin trace a view
  over padded-window sizes took 50 ms a miss; skipping the cache for views
  took that export from 17 s to 12.7 s, Llama from 1.0 s to 0.8 s, and ViT
  from 2.0 s to 1.7 s (medians of 3), while turning the cache off altogether
  made ViT slower (2.5 s): its hits on decomposed ops (layer norm, bicubic
  index math) are worth keeping.
  Skipping the cache changes no result: torch bypasses it for many ops.

torch looks up the Python rules of operators (higher-order operators such
as ``cond`` and ``map``) by the exact mode class: this subclass takes the
rules registered for ``FakeTensorMode``.
"""
from __future__ import annotations

import torch

from .size_tracking import SizeTracker
from .torch_internals import FakeTensorMode, HigherOrderOperator, OpOverload

__all__ = ["EngineFakeTensorMode"]


class EngineFakeTensorMode(FakeTensorMode):
    symbolic_rnns = True     # read by rnn_shapes' kernels
    supports_higher_order_operators = True

    def __init__(self, *, constants: dict[int, torch.Tensor] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.size_tracker = SizeTracker(self.shape_env, constants)

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
        if isinstance(func, OpOverload) and func.is_view:
            return self._dispatch_impl(func, types, args, kwargs)
        return super()._cached_dispatch_impl(func, types, args, kwargs)
