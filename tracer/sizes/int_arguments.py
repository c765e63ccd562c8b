"""Sizes passed where torch's schema takes a plain ``int``: ``torch.linspace(-1, 1, steps=H)``.

torch's argument parser turns a SymInt given for an ``int`` parameter into a
concrete int, which specializes the size (``H == 24``; Fourier position
features and spectrogram windows do this).  A torch-function mode of the
engine trace sees the call first, with the SymInt, and runs instead the
same values computed by ops that take SymInts, where such a formulation is
equal to torch's kernel bit for bit:

* ``linspace`` into float32: the CPU kernel computes ``step = (end - start)
  / (steps - 1)`` in float32 and each value as one fused multiply-add from
  the nearer end (``start + step*i`` below ``steps // 2``, ``end - step*(steps
  - 1 - i)`` above); the product of two floats is exact in float64, so the
  fused operation is the float64 one rounded to float32;
* ``hann_window`` and ``hamming_window``: torch composes them of ``arange``,
  ``mul``, ``cos`` and ``add`` in C++; the same ops in the same order.

``tests/test_int_arguments.py`` checks each against eager over a sweep of
sizes and dtypes.  Any other call with a SymInt ``int`` (float64
``linspace``, ``logspace``, ``histc``'s ``bins``, ...) keeps torch's
behaviour, and a guard it makes names the op and why (``current_op`` reads
``_int_argument``), so the error says what specialized the size.  The mode
is pushed on the tracing thread only (torch's mode stack is per thread).
"""
from __future__ import annotations

import math

import torch
from torch.overrides import TorchFunctionMode

from .size_lists import SizeList, SizeRange, as_tensor

__all__ = ["IntArguments", "linspace_float32", "cosine_window"]


def linspace_float32(start, end, steps) -> torch.Tensor:
    """``torch.linspace(start, end, steps)`` in float32 for a SymInt (or int) ``steps``; ``start`` and
    ``end`` numbers or sizes (``linspace(0.5, H - 0.5, H)``), each rounded to float32 first as the kernel
    does."""
    index = torch.arange(steps)
    first, last = (torch.full((), v, dtype=torch.float32) for v in (start, end))
    intervals = (torch.ones((), dtype=torch.int64) * torch.sym_max(steps - 1, 1)).to(torch.float32)
    step = ((last - first) / intervals).to(torch.float64)
    from_start = (step * index.to(torch.float32).to(torch.float64) + first.to(torch.float64))
    to_end = (last.to(torch.float64) - step * (steps - 1 - index).to(torch.float32).to(torch.float64))
    # below steps // 2 from the start, the rest from the end; steps == 1 is ``start`` (1 is below max(0, 1))
    return torch.where(index < torch.sym_max(steps // 2, 1), from_start.to(torch.float32),
                       to_end.to(torch.float32))


def cosine_window(length, periodic: bool, alpha: float, beta: float, dtype: torch.dtype) -> torch.Tensor:
    """``alpha - beta * cos(2*pi*n / (N - 1))`` as torch's ``hamming_window`` composes it (``hann_window`` is
    ``alpha = beta = 0.5``); a length of 0 or 1 is the kernel's own special case (a guard where the range
    allows it)."""
    if length == 0:
        return torch.empty(0, dtype=dtype)
    if length == 1:
        return torch.ones(1, dtype=dtype)
    points = length + 1 if periodic else length
    window = (torch.arange(points, dtype=dtype) * (math.pi * 2.0 / (points - 1))).cos() * (-beta) + alpha
    return window[:points - 1] if periodic else window


def _linspace(start, end, steps, *, out=None, dtype=None, layout=torch.strided, device=None,
              pin_memory=False, requires_grad=False):
    dtype = dtype or torch.get_default_dtype()
    if dtype is not torch.float32:
        return None, f"no exact formulation of its {dtype} kernel"
    if not all(isinstance(v, (int, float, torch.SymInt, torch.SymFloat)) and not isinstance(v, bool)
               for v in (start, end)):
        return None, "start and end are not numbers"
    if out is not None or requires_grad or pin_memory or layout is not torch.strided or \
            torch.device(device or "cpu").type != "cpu":
        return None, "out=, requires_grad, pinned memory, a layout or a device other than the CPU's"
    return linspace_float32(start, end, steps), None


def _window(alpha: float, beta: float):
    def window(length, periodic=True, *, dtype=None, layout=torch.strided, device=None, pin_memory=False,
               requires_grad=False):
        dtype = dtype or torch.get_default_dtype()
        if not dtype.is_floating_point or requires_grad or pin_memory or layout is not torch.strided or \
                torch.device(device or "cpu").type != "cpu":
            return None, "a dtype, requires_grad, pinned memory, layout or device other than the plain ones"
        return cosine_window(length, periodic, alpha, beta, dtype), None
    return window


def _hamming(length, periodic=True, alpha=0.54, beta=0.46, **kwargs):
    return _window(alpha, beta)(length, periodic, **kwargs)


_FORMULATIONS = {torch.linspace: ("steps", _linspace),
                 torch.hann_window: ("window_length", _window(0.5, 0.5)),
                 torch.hamming_window: ("window_length", _hamming)}
# ops whose int argument torch specializes, named in the guard they make
_SPECIALIZING = {torch.logspace: "steps", torch.histc: "bins", torch.blackman_window: "window_length",
                 torch.bartlett_window: "window_length", torch.kaiser_window: "window_length"}


def _size_list_tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    if requires_grad or pin_memory:
        return None
    return as_tensor(SizeList.of(data), dtype=dtype, device=device)


class IntArguments(TorchFunctionMode):
    """The engine trace's torch-function mode: a SymInt for an ``int`` parameter of the ops above, and
    ``torch.tensor`` of a list over a size (``size_lists``)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.tensor, torch.as_tensor) and args and isinstance(args[0], (SizeList, SizeRange)):
            made = _size_list_tensor(*args, **kwargs)
            return made if made is not None else func(SizeList.of(args[0]).python(), *args[1:], **kwargs)
        if func in _FORMULATIONS or func in _SPECIALIZING:
            if any(isinstance(v, (torch.SymInt, torch.SymFloat)) for v in (*args, *kwargs.values())):
                return self._sized(func, args, kwargs)
        return func(*args, **kwargs)

    def _sized(self, func, args, kwargs):
        parameter, formulation = _FORMULATIONS.get(func, (_SPECIALIZING.get(func), None))
        why = "no formulation in ops that take SymInts"
        if formulation is not None:
            try:
                result, why = formulation(*args, **kwargs)
            except TypeError:           # arguments torch would reject: its own error, from its own call
                result, why = None, "arguments of another overload"
            if result is not None:
                return result
        _int_argument = (f"torch.{func.__name__}: `{parameter}` is a plain int in torch's schema, so torch "  # noqa: F841
                         f"specializes the size given for it ({why})")       # read by questions.current_op
        return func(*args, **kwargs)
