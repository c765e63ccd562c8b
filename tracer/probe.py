"""Does the model run at these shapes?  One forward pass on fake tensors, without tracing.

The region search traces at counterexamples of the first trace's guards;
where the model itself fails (``x.view(B // 2, 2, -1)`` at an odd ``B``), no
program can serve the declared ranges and the search ends.  A trace costs
seconds to minutes; this pass costs milliseconds (torch's meta kernels with
static shapes: no symbols, no guards, no graph), and a trace at that point
would fail in the same shape rule (a trace runs the same kernels on the same
sizes, as hints), so the search asks it first.

Parameters and buffers are fakified too, so nothing of the model's state
changes (a training-mode BatchNorm would otherwise count a batch).
"""
from __future__ import annotations

import contextlib
import logging
import threading

import torch

from .torch_internals import (
    DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode, GuardOnDataDependentSymNode,
    UnsupportedOperatorException, compiling_state_context, pytree,
)

__all__ = ["failure_at"]

# what fake tensors with static shapes cannot run though the model may: ops that need values or lack a
# meta kernel (the trace then decides)
_CANNOT_SAY = (DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException,
               GuardOnDataDependentSymNode, NotImplementedError)

# what torch's shape rules raise (``view`` of a size that does not divide, ``cat`` of mismatched sizes);
# anything else, the model's own ``assert`` included, is left to the trace (fake mode also asserts on a
# plain tensor attribute the model did not register as a buffer)
_SHAPE_RULE = (RuntimeError, ValueError, IndexError)

# torch logs every failing meta kernel at error level before raising; a failure is an answer here
_FAKE_TENSOR_LOG = logging.getLogger("torch._subclasses.fake_tensor")


@contextlib.contextmanager
def _quiet(logger: logging.Logger):
    """Within: ``logger`` drops the records of this thread (another thread's still go through)."""
    thread = threading.get_ident()

    def other_threads(record: logging.LogRecord) -> bool:
        return record.thread != thread

    logger.addFilter(other_threads)
    try:
        yield
    finally:
        logger.removeFilter(other_threads)


def failure_at(model: torch.nn.Module, args: tuple, kwargs: dict | None = None) -> Exception | None:
    """The error a shape rule raises when ``model(*args, **kwargs)`` runs on fake tensors of these shapes,
    else None.

    None also where this pass cannot say (data-dependent ops need values,
    any other exception).
    The model runs with torch's exporting flags set, so code that asks
    ``torch.compiler.is_exporting()`` takes the path it takes in a trace.
    """
    mode = FakeTensorMode()
    state = {**dict(model.named_parameters(remove_duplicate=False)),
             **dict(model.named_buffers(remove_duplicate=False))}
    try:
        with _quiet(_FAKE_TENSOR_LOG), compiling_state_context(), mode, torch.no_grad():
            fake_state, fake_args, fake_kwargs = pytree.tree_map_only(
                torch.Tensor, mode.from_tensor, (state, args, kwargs or {}))
            torch.func.functional_call(model, fake_state, fake_args, fake_kwargs, strict=False)
    except _CANNOT_SAY:
        return None
    except _SHAPE_RULE as exc:
        return exc
    except Exception:  # noqa: BLE001  (an assert, a real tensor attribute fake mode refuses: the trace decides)
        return None
    return None
