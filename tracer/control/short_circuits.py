"""A size comparison inside ``and``/``or`` whose answer does not change the value of the whole.

transformers' attention asks ``is_causal = q_len > 1 and mask is None and is_causal``;
for an encoder ``is_causal`` is False, so the expression is ``False`` whatever
``q_len > 1`` answers, yet Python asks the question and torch guards it: a
query grid that reaches 1 at the bottom of a range (``q_len = (H - 1) // 32 + 1``
squared) would restrict the range for nothing.  When Python tests a comparison
of sizes as an operand of ``and`` (or ``or``), and the operands after it hold,
read without running anything (names, plain attributes, constants, ``is``,
``not``), exactly ``False`` (``True`` for ``or``), the value of the whole is
that constant on both sides: the question is answered so that Python goes on
and computes it, and no guard is recorded.

Python 3.11 compiles such an operand's test as ``JUMP_IF_FALSE_OR_POP`` (or
``..._TRUE_...``) right after the comparison, whose source position names the
operand; another form is left to torch (a guard, as before).
"""
from __future__ import annotations

import ast
from types import FrameType

import torch

from .branch_tests import Unreadable, value_of
from .effects import EFFECTS
from ..user_source import function_node, instructions

__all__ = ["short_circuit_answer"]

# the jump Python 3.11 tests an operand of ``and``/``or`` with, and the value that ends the chain there
_OPERAND_JUMPS = {"JUMP_IF_FALSE_OR_POP": (ast.And, False), "JUMP_IF_TRUE_OR_POP": (ast.Or, True)}


def short_circuit_answer(frame: FrameType) -> bool | None:
    """The answer that lets Python compute the value the ``and``/``or`` has on both sides, or None when
    ``frame`` is not testing such an operand."""
    located = _operand_tested(frame)
    if located is None:
        return None
    chain, index, ending = located
    try:
        rest = _chainvalue_of(chain.op, chain.values[index + 1:], frame)
    except Unreadable:
        return None
    if type(rest) is bool and rest is ending:
        return not ending           # go on: Python computes ``rest``, the value the chain has either way
    return None


def _operand_tested(frame: FrameType) -> tuple[ast.BoolOp, int, bool] | None:
    """The ``and``/``or`` whose operand ``frame`` tests (a single comparison, not the last operand), that
    operand's index, and the value that ends the chain."""
    table = instructions(frame.f_code)
    found = table.get(frame.f_lasti)
    if found is None or found[0] not in _OPERAND_JUMPS:
        return None
    op, ending = _OPERAND_JUMPS[found[0]]
    before = max((offset for offset in table if offset < frame.f_lasti), default=None)
    if before is None or table[before][0] != "COMPARE_OP":
        return None
    function = function_node(frame.f_code)
    if function is None:
        return None
    jump, compare = found[1], table[before][1]
    for node in ast.walk(function):
        if isinstance(node, ast.BoolOp) and isinstance(node.op, op) and _at(node, jump):
            for index, operand in enumerate(node.values[:-1]):
                if isinstance(operand, ast.Compare) and len(operand.ops) == 1 and _at(operand, compare):
                    return node, index, ending
    return None


def _at(node: ast.expr, positions) -> bool:
    return (positions is not None and (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
            == (positions.lineno, positions.col_offset, positions.end_lineno, positions.end_col_offset))


def _chainvalue_of(op: ast.boolop, operands: list[ast.expr], frame: FrameType):
    """Python's value of ``operands[0] <op> operands[1] ...``, read without running anything."""
    value = None
    for operand in operands:
        value = _plainvalue_of(operand, frame)
        if bool(value) == isinstance(op, ast.Or):
            return value
    return value


def _plainvalue_of(node: ast.expr, frame: FrameType):
    if isinstance(node, ast.BoolOp):
        return _chainvalue_of(node.op, node.values, frame)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _plainvalue_of(node.operand, frame)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)):
        # identity asks no question of a symbolic value
        same = value_of(node.left, frame, EFFECTS) is value_of(node.comparators[0], frame, EFFECTS)
        return same if isinstance(node.ops[0], ast.Is) else not same
    value = value_of(node, frame, EFFECTS)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool, torch.Tensor)):
        raise Unreadable("a symbolic value")     # its truth would be another question
    return value
