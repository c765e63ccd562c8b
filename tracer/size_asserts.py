"""The program's own words for the runtime asserts that check a followed size.

torch words the assert of a tracked value ``Eq(s53 + u0, 4*((s53 + 3)//4))``;
relabelled, the program raises with the source line that computed ``u0``,
the value in the user's dim names, and what failing means.
"""
from __future__ import annotations

import re

import torch

from .size_tracking import Binding, SizeTracker

__all__ = ["label_size_asserts"]

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
        if node.target is not torch.ops.aten._assert_scalar.default or not isinstance(node.args[-1], str):
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
