"""guard_code: every node kind prints to Python that means what the solver means, in torch's namespace too."""
import itertools
import math

import pytest
import torch
from torch.export import Dim

from shapeproof.export.search.checks import python_guard
from shapeproof.solver import holds, parse_condition, symbol
from shapeproof.solver.language.evaluate import truth
from shapeproof.solver.language.guard_code import guard_code

# One guard per node kind (and the definedness cases), over x and y; the grid has zeros and negatives.
GUARDS = [
    "x // y == 2", "x % y == 1", "CeilDiv(x, y) == 2", "TruncDiv(x, y) == -1", "int(x / y) == -1",
    "min(x, y, 3) == max(x - 1, y)", "x**2 + 3*x*y - 2 > 0", "abs(x) >= y",
    "math.floor(0.29*float(x)) == 1", "math.ceil(x / 16) == 1", "x / y < 0.5", "x * 0.5 + 1.5 >= y",
    "float(x) // 0.75 == 1", "float(x) % 2.5 > 1", "-(0.5*x) < y", "math.trunc(x * 0.1 * 3) == 0",
    "x / y > 0 or y == 0", "not (x < 0.5*y)", "x // y - x // y == 0",
    "math.floor(x / y) - math.floor(x / y) == 0", "ModularIndexing(x, 2, y) == 1", "(x > 0) == (y > 0)",
    "y != 0 and x // y >= 1 or x == y",
    # sympy's order-independent Or and And: an undefined operand does not decide where another one does
    "Or(x // y == 1, y == 0)", "(y == 0) | (x % y == 1)", "And(x // y >= 1, x < 0) | (y == 0)",
    "And(x // y != 1, y > 0)", "Or(math.floor(x / y) == 1, y == 0)", "Or(x / y > 0, y < 0) & (x != 2)",
    "Or(x // y == 1 or x == 0, y == 0)", "not Or(x // y == 1, x // (y + 1) == 0)",
]
SYMPY_FORMS = ("Or(", "And(", "|", "&")
GRID = list(itertools.product(range(-7, 8), range(-4, 5)))
SOURCES = {symbol("x"): "a", symbol("y"): "b"}


def _python(text: str, **values) -> bool | None:
    """What Python says of the text, None where it raises (our own output or the test's own guards)."""
    try:
        return bool(eval(text, {"math": math}, values))
    except (ZeroDivisionError, OverflowError, ValueError):
        return None


@pytest.mark.parametrize("text", GUARDS)
def test_each_node_kind_prints_to_python_with_the_solvers_value(text):
    f = parse_condition(text)
    code = guard_code(f, SOURCES)
    for a, b in GRID:
        assert _python(code, a=a, b=b) == truth(f, {symbol("x"): a, symbol("y"): b}), (text, code, a, b)


@pytest.mark.parametrize("text",
                         [g for g in GUARDS
                          if not any(n in g for n in ("CeilDiv", "TruncDiv", "Modular", *SYMPY_FORMS))])
def test_printed_code_agrees_with_python_on_the_original_text(text):
    code = guard_code(parse_condition(text), SOURCES)
    for a, b in GRID:
        assert _python(code, a=a, b=b) == _python(text, x=a, y=b), (text, a, b)


def test_printed_guards_run_as_exported_program_input_checks():
    """torch exec's the text with SYMPY_INTERP, math and inf (torch/export/_unlift.py): no solver names."""
    text = ("TruncDiv(T - 40, 3) != 2 and CeilDiv(T, 16) > 1 and int(T / 3) != 7 and "
            "math.floor(0.29*float(T)) != 5"
            " and max(T, 8) < 70 and (T % 5 != 0 or T // 5 == 3) and T * 0.1 * 3 != T * 0.3")
    pred = parse_condition(text)
    code = python_guard(pred, {symbol("T"): "L['x'].size()[1]"})
    assert "TruncDiv" not in code and "CeilDiv" not in code

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    program = torch.export.export(Double(), (torch.ones(1, 20),),
                                  dynamic_shapes=({1: Dim("T", min=2, max=79)},))
    program._guards_code = [code]
    module = program.module()
    accepted = []
    for t in range(2, 80):
        try:
            module(torch.ones(1, t))
            accepted.append(t)
        except AssertionError:
            pass
    assert accepted == [t for t in range(2, 80) if holds(pred, {"T": t})]
    assert accepted == [t for t in range(2, 80)
                        if _python(text.replace("TruncDiv(T - 40, 3)", "int((T - 40) / 3)")
                                                           .replace("CeilDiv(T, 16)", "-(-T // 16)"), T=t)]


def test_a_guard_is_undefined_in_the_printed_code_where_it_is_for_the_solver():
    """``x // y - x // y`` cancels in the terms; the printed check still raises at ``y == 0`` as Python
    does."""
    for text in ("x // y - x // y == 0", "math.floor(x / y) - math.floor(x / y) == 0",
                 "x // y == 1 or y == 0"):
        code = guard_code(parse_condition(text), SOURCES)
        assert _python(code, a=3, b=0) is None and _python(text, x=3, y=0) is None, code
