"""The runnable examples in public docstrings are tests too (the docs pages' and README's: test_docs.py)."""
import doctest
import importlib

import pytest

MODULES = [
    "shapeproof.solver",
    "shapeproof.solver.api",
    "shapeproof.solver.language.parse",
    "shapeproof.shapes.env",
    "shapeproof.shapes.standalone",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0

