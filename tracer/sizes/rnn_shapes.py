"""Fake outputs of torch's recurrent ops (LSTM, GRU, RNN) without unrolling them over time.

torch computes the fake outputs of ``aten.lstm.input`` (and ``gru``,
``rnn_tanh``, ``rnn_relu``) with the op's Python decomposition, a loop over
time steps: it needs the sequence length as an int, so tracing specializes
it, and ``torch.export`` cannot export an LSTM over a dynamic length
(Encodec's encoder and decoder have one).  Pre-dispatch export records the
op itself as one node (its native kernel runs in the program); tracing only
needs the outputs' metadata, which the op's contract fixes for any length:
``output`` is ``(T, B, D*H_out)`` contiguous, transposed to
``(B, T, D*H_out)`` for ``batch_first`` (as the CPU kernel returns it), and
each final state has the shape of the initial one (``D = 2`` if
bidirectional; ``H_out`` is the projection size of an LSTM with
``proj_size``).  While an engine trace runs, the decomposition's kernel is
wrapped: for the engine's fake tensors with batched input it returns these
outputs, and otherwise it is torch's.
"""
from __future__ import annotations

import torch

from ..patching import SharedPatch
from ..torch_internals import DispatchKey

__all__ = ["RNN_OPS", "rnn_outputs", "symbolic_rnns"]

aten = torch.ops.aten
RNN_OPS = (aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input)
# the keys torch registers the decomposition under (torch/_decomp/decompositions.py)
_KEYS = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)


def rnn_outputs(func, args):
    """Fake outputs of ``func(*args)`` (an op of ``RNN_OPS``) for a batched input; None otherwise."""
    inp, hx, params, _has_biases, _num_layers, _dropout, _train, bidirectional, batch_first = args
    states = list(hx) if func is aten.lstm.input else [hx]
    if inp.dim() != 3 or any(h.dim() != 3 for h in states):
        return None
    steps, batch = (inp.shape[1], inp.shape[0]) if batch_first else (inp.shape[0], inp.shape[1])
    features = (2 if bidirectional else 1) * states[0].shape[2]
    output = inp.new_empty([steps, batch, features])
    finals = [h.new_empty(h.shape) for h in states]
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in [inp, *states, *params])
    for t in [output, *finals]:
        t.requires_grad_(grad)
    return (output.transpose(0, 1) if batch_first else output, *finals)


def _wrap(func, original):
    def kernel(*args, **kwargs):
        mode = getattr(args[0], "fake_mode", None) if args else None
        if getattr(mode, "symbolic_rnns", False) and not kwargs:
            out = rnn_outputs(func, args)
            if out is not None:
                return out
        return original(*args, **kwargs)
    return kernel


_saved: dict = {}


def _install():
    for op in RNN_OPS:
        for key in _KEYS:
            _saved[op, key] = op.py_kernels[key]
            op.py_kernels[key] = _wrap(op, _saved[op, key])
        op._dispatch_cache.clear()


def _restore():
    for (op, key), kernel in _saved.items():
        op.py_kernels[key] = kernel
        op._dispatch_cache.clear()
    _saved.clear()


# Within: the recurrent ops of engine fake tensors keep their sequence length symbolic.
symbolic_rnns = SharedPatch(_install, _restore)
