"""What to change when tracing needs a value that depends on data: the engine's message, completed.

The engine says which condition or value could not be decided, where each
unbacked symbol came from and which ``torch._check`` would let tracing go
on.  Two things only the tracer knows complete it: a symbol whose tensor was
computed from sizes but could not be followed (``SizeTracker.unbound``, e.g.
a float32 step that is not exact over the declared ranges) says why, and a
branch on a boolean of data (``if mask.any():``) can keep both sides with
``torch.cond``.
"""
from __future__ import annotations

from shapeproof.shapes import DataDependentError

__all__ = ["annotated"]


def annotated(error: DataDependentError, symbols, unbound: dict, booleans: set) -> DataDependentError:
    """``error`` with the notes about ``symbols`` (torch's unbacked symbols in the question)."""
    lines = []
    for sym in sorted(symbols, key=lambda s: s.name):
        if sym in unbound:
            lines.append(f"  {sym.name} is computed from sizes through tensors, but shapeproof could not "
                         f"follow it exactly: {unbound[sym]}")
    if any(sym in booleans for sym in symbols):
        lines.append("To keep both branches instead, move the branch into torch.cond(pred, true_fn, "
                     "false_fn, operands), which export traces on both sides.")
    if not lines:
        return error
    return DataDependentError("\n".join([str(error), *lines]), error.expression, error.symbols,
                              error.suggestions, error.where)
