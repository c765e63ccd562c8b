"""The runtime asserts that check a followed size: lowered against the input sizes, and worded for the user.

torch lowers deferred runtime asserts into the graph in one pass
(``insert_deferred_runtime_asserts``) that shares a node for every symbolic
expression it has seen, by the node's value as the ShapeEnv reads it.  With
``u`` replaced by its size expression, the ``item`` node that computes ``u``
from the tensor reads as that expression, so ``Eq(u, expr)`` would be lowered
as ``item == item`` and could never fail.  While the pass runs during an
engine trace (``sizes_checked_against_inputs``), the bound symbols are not
replaced: ``u`` is the ``item`` node and ``expr`` is computed from the input
sizes.  Nodes shared for parts of ``expr`` were visited earlier, so their
values derive from the inputs and from earlier ``item`` nodes, whose asserts
(placed right after each of them) already held when this one runs.

torch words the assert ``Eq(s53 + u0, 4*((s53 + 3)//4))``; relabelled
(``label_size_asserts``), the program raises with the source line that
computed ``u0``, the value in the user's dim names, and what failing means.
"""
from __future__ import annotations

import re

from ..patching import SharedPatch
from .size_tracking import Binding, SizeTracker
from ..torch_internals import ASSERT_SCALAR, export_utils

__all__ = ["label_size_asserts", "sizes_checked_against_inputs"]

_lower_asserts = export_utils.insert_deferred_runtime_asserts


def _lower_against_inputs(gm, shape_env, name, export=False):
    tracker = getattr(shape_env, "size_tracker", None)
    if tracker is None or not tracker.bindings:
        return _lower_asserts(gm, shape_env, name, export=export)
    with tracker.unreplaced():
        return _lower_asserts(gm, shape_env, name, export=export)


# Within: export lowers the asserts of followed sizes against the input sizes (see the module doc).
sizes_checked_against_inputs = SharedPatch(
    lambda: setattr(export_utils, "insert_deferred_runtime_asserts", _lower_against_inputs),
    lambda: setattr(export_utils, "insert_deferred_runtime_asserts", _lower_asserts))

_ASSERT_MESSAGE = re.compile(r"^Runtime assertion failed for expression (?P<expr>.*) on node '[^']*'$")


def _mismatch_message(b: Binding, value: str, torch_expr: str) -> str:
    frame = b.where.frame
    line = f"{frame.short} (`{frame.code}`)" if frame is not None else "an unknown line"
    return (f"shapeproof: at {line} the program computed an integer from a tensor that differs from {value}, "
            f"its value in terms of the input sizes when the program was exported; the program is not valid "
            f"for these inputs (was a buffer or constant changed after export?) [{torch_expr} failed]")


def label_size_asserts(program, tracker: SizeTracker) -> int:
    """Say in the program's own words which runtime asserts check a followed size (returns how many).

    torch words the assert ``Eq(s53 + u0, 4*((s53 + 3)//4))``; the program
    raises with the source line that computed ``u0`` and what failing means.
    """
    if not tracker.bindings:
        return 0
    by_name = {b.symbol.name: b for b in tracker.bindings.values()}
    labelled = 0
    for node in program.graph_module.graph.nodes:
        if node.target is not ASSERT_SCALAR or not isinstance(node.args[-1], str):
            continue
        m = _ASSERT_MESSAGE.match(node.args[1])
        if m is None or not m.group("expr").startswith("Eq("):
            continue
        names = [n for n in by_name if re.search(rf"\b{n}\b", m.group("expr"))]
        if len(names) != 1:
            continue
        b = by_name[names[0]]
        node.args = (node.args[0], _mismatch_message(b, tracker.render(b.expr), m.group("expr")))
        labelled += 1
    if labelled:
        program.graph_module.recompile()
    return labelled
