"""The runnable examples in public docstrings are tests too."""
import doctest
import importlib

import pytest

MODULES = [
    "shapeproof.solver",
    "shapeproof.solver.api",
    "shapeproof.solver.parse",
    "shapeproof.shapes.env",
    "shapeproof.shapes.standalone",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0


def test_readme_solver_examples_run():
    """The README's solver examples are real: run them as doctests."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    block = re.search(r"## The solver\n\n```python\n(.*?)```", text, re.S).group(1)
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block, {}, "README", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.tries >= 4 and runner.failures == 0
