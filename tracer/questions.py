"""Where a shape question comes from, and what it is made of, read cheaply on every question.

The engine's ShapeEnv asks these for each question torch hands it: the
user's frame and the ATen op at the point torch asked (for a guard's
provenance), whether a question has symbols at all, and whether it is small
enough for torch's own value-range analysis to answer first.  A question
that depends on data gets the engine's message completed with what only the
tracer knows (``annotated``): a symbol whose tensor was computed from sizes
but could not be followed says why (``SizeTracker.unbound``, e.g. a float32
step that is not exact over the declared ranges), and a branch on a boolean
of data (``if mask.any():``) can keep both sides with ``torch.cond``.
"""
from __future__ import annotations

import sys
from types import FrameType

import sympy

from shapeproof.shapes import DataDependentError, Provenance, capture, is_user_frame

from .control.branch_sites import jump_position
from .torch_internals import GUARD_BOOL, SYM_NODE_MODULE, OpOverload

__all__ = ["current_op", "provenance", "has_symbols", "smaller_than", "is_torch_frame", "jumping_user_frame",
           "guarded_node", "annotated"]


def current_op() -> str | None:
    """The ATen op being dispatched right now, found as the ``func`` local of a dispatch frame; or, where
    torch's argument parser asks for a plain ``int``, what ``sizes/int_arguments`` says of the call."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        func = frame.f_locals.get("func")
        if isinstance(func, OpOverload):
            return str(func)
        said = frame.f_locals.get("_int_argument")
        if isinstance(said, str):
            return said
        frame = frame.f_back
    return None


def provenance() -> Provenance:
    """The user's frame and the ATen op at the point torch asked (called from inside a hook)."""
    return capture(op=current_op(), start=sys._getframe(2))


def smaller_than(expr, limit: int) -> bool:
    """Whether ``expr`` has fewer than ``limit`` nodes (stops counting at ``limit``)."""
    count, pending = 0, [expr]
    while pending:
        count += 1
        if count >= limit:
            return False
        pending.extend(pending.pop().args)
    return True


def has_symbols(expr) -> bool:
    """``bool(expr.free_symbols)``, stopping at the first symbol (sympy collects all of them, walking the
    whole of a large padded size for each question)."""
    pending = [expr]
    while pending:
        e = pending.pop()
        if isinstance(e, sympy.Symbol):
            return True
        pending.extend(e.args)
    return False


def jumping_user_frame() -> FrameType | None:
    """The user's frame that asked the question being answered (from its caller out), if it is executing a
    conditional jump: an ``if`` whose test is the question, however torch routed the truth value."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and not is_user_frame(frame):
        frame = frame.f_back
    if frame is None or jump_position(frame.f_code, frame.f_lasti) is None:
        return None
    return frame


def guarded_node():
    """The SymNode whose truth is being asked (``bool(symbool)``: the node of ``guard_bool``, which the
    trace follows, unlike a node made again from its expression)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == GUARD_BOOL and frame.f_globals.get("__name__") == SYM_NODE_MODULE:
            return frame.f_locals.get("self")
        frame = frame.f_back
    return None


def is_torch_frame(frame: FrameType) -> bool:
    return frame.f_globals.get("__name__", "").split(".")[0] == "torch"


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
