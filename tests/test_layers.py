"""Layers import one way (solver <- shapes <- tracer <- export), and each only through the facade below it.

Inside the shapes layer the environment (``shapes/*.py``) stands alone: the applications built on it
(``shapes/apps/``: the HTTP service, the HTML report, the reader of torch's error texts) sit above it,
use it through its facade like the layers above, and the environment imports none of them.
"""
from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

import shapeproof.shapes
import shapeproof.shapes.apps
import shapeproof.solver
from bench.layers import (
    FOUNDATIONS, LAYERS, ORDER, PICTURE, ROOT, imported_modules, imports, known_modules, module_graph,
    picture, unit_files, unit_of,
)

FACADES = {"solver": set(shapeproof.solver.__all__), "shapes": set(shapeproof.shapes.__all__),
           "shapes.apps": set(shapeproof.shapes.apps.__all__)}
def _in_tree(unit: str, module: str) -> bool:
    """Whether ``module`` is ``unit``'s package or below it (``shapes.apps`` is not in ``shapes``' tree)."""
    name = f"shapeproof.{unit}"
    inner = [f"shapeproof.{u}" for u in FACADES if u.startswith(unit + ".")]
    return (module == name or module.startswith(name + ".")) and not any(
        module == i or module.startswith(i + ".") for i in inner)


def upward_imports(unit: str, root: Path = ROOT) -> list[str]:
    """Imports in ``unit`` of a unit above it."""
    above, known = ORDER[ORDER.index(unit) + 1:], known_modules(root)
    wrong = []
    for path in unit_files(unit, root):
        for module, names in imports(path, root):
            targets = [unit_of(m) for m in imported_modules(module, names, known)]
            wrong += [f"{path.relative_to(root)}: {module} ({t})" for t in dict.fromkeys(targets)
                      if t in above]
    return wrong


def imports_past_the_facade(lower: str, root: Path = ROOT) -> list[str]:
    """Imports of ``lower``'s modules by the units above it other than through ``lower``'s facade."""
    wrong = []
    for unit in ORDER[ORDER.index(lower) + 1:]:
        for path in unit_files(unit, root):
            for module, names in imports(path, root):
                if not _in_tree(lower, module):
                    continue
                where = f"{path.relative_to(root)}: {module}"
                if module != f"shapeproof.{lower}":
                    wrong.append(where)
                else:
                    wrong += [f"{where}.{n}" for n in names if n not in FACADES[lower]]
    return wrong


@pytest.mark.parametrize("unit", ORDER)
def test_no_unit_imports_one_above_it(unit):
    assert unit_files(unit)
    assert not upward_imports(unit), "imports of a unit above:\n" + "\n".join(upward_imports(unit))


@pytest.mark.parametrize("lower", ["solver", "shapes", "shapes.apps"])
def test_units_above_use_only_the_facade_below(lower):
    wrong = imports_past_the_facade(lower)
    assert not wrong, "imports past the facade:\n" + "\n".join(wrong)


def test_the_environment_stands_alone_and_the_applications_sit_above_it():
    environment = {p.name for p in unit_files("shapes")}
    applications = {"service.py", "endpoints.py", "workers.py", "html_report.py", "torch_messages.py"}
    assert {"env.py", "explain.py", "fixes.py", "report.py"} <= environment
    assert applications <= {p.name for p in unit_files("shapes.apps")}
    assert not environment & applications


def test_the_checks_find_what_they_look_for(tmp_path):
    """A wrong import in each direction is found (the checks above can fail)."""
    for folder, text in [("shapes", "from .apps.service import serve\n"),
                         ("shapes/apps", "from ..explain import explain\nfrom shapeproof.tracer import x\n"),
                         ("export", "from shapeproof.shapes.apps.html_report import render_html\n")]:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "wrong.py").write_text(text)
    for unit in ("solver", "tracer"):
        (tmp_path / unit).mkdir()
    assert upward_imports("shapes", tmp_path) == [
        "shapes/wrong.py: shapeproof.shapes.apps.service (shapes.apps)"]
    assert upward_imports("shapes.apps", tmp_path) == ["shapes/apps/wrong.py: shapeproof.tracer (tracer)"]
    assert imports_past_the_facade("shapes", tmp_path) == ["shapes/apps/wrong.py: shapeproof.shapes.explain"]
    assert imports_past_the_facade("shapes.apps", tmp_path) == [
        "export/wrong.py: shapeproof.shapes.apps.html_report"]


# -- inside the layers ------------------------------------------------------------------------------------

def cycles(root: Path = ROOT) -> list[list[str]]:
    """The import cycles among the layers' modules (functions' and ``TYPE_CHECKING`` imports counted)."""
    graph = nx.DiGraph([(a, b) for a, targets in module_graph(root).items() for b in targets])
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_no_module_imports_itself_back():
    assert cycles() == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    for layer in LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "solver" / "a.py").write_text("def f():\n    from .b import g\n")
    (tmp_path / "solver" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from .a import f\n")
    assert cycles(tmp_path) == [["shapeproof.solver.a", "shapeproof.solver.b"]]


def test_every_unit_has_modules_and_the_foundations_exist():
    for unit in ORDER:
        assert unit_files(unit), unit
    for layer, names in FOUNDATIONS.items():
        assert {p.stem for p in unit_files(f"{layer}.foundations")} == names


# files a package docstring says must be longer than the limit, and why
_LONG = {"solver/language/nodes.py"}


@pytest.mark.parametrize("layer", ["solver", "tracer", "export"])
def test_rooms_stay_small(layer):
    """No file over 700 lines (but those whose package says why), no folder with more than 15 modules."""
    folders = {p.parent for p in (ROOT / layer).rglob("*.py")}
    for folder in folders:
        modules = list(folder.glob("*.py"))
        assert len(modules) <= 15, f"{folder.relative_to(ROOT)} has {len(modules)} modules"
        for path in modules:
            name = str(path.relative_to(ROOT))
            if name in _LONG:
                assert path.stem in (folder / "__init__.py").read_text(), f"{name}: its package says why"
                continue
            assert len(path.read_text().splitlines()) <= 700, f"{name} is over 700 lines"


def test_the_picture_matches_the_tree():
    """The architecture page's picture of the packages is the one the code draws
    (``python -m bench.layers --write`` draws it again)."""
    assert PICTURE.read_text() == picture()
    assert PICTURE.name in (ROOT / "docs" / "pages" / "architecture.md").read_text()
