"""Layers import one way (solver <- shapes <- tracer <- export), and each only through the facade below it.

Inside the shapes layer the environment (``shapes/*.py``) stands alone: the applications built on it
(``shapes/apps/``: the HTTP service, the HTML report, the reader of torch's error texts) sit above it,
use it through its facade like the layers above, and the environment imports none of them.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import shapeproof.shapes
import shapeproof.shapes.apps
import shapeproof.solver

ROOT = Path(__file__).resolve().parents[1]
# bottom to top; a unit is a package folder without its subpackages that are units themselves
ORDER = ["solver", "shapes", "shapes.apps", "tracer", "export"]
FACADES = {"solver": set(shapeproof.solver.__all__), "shapes": set(shapeproof.shapes.__all__),
           "shapes.apps": set(shapeproof.shapes.apps.__all__)}


def _imports(path: Path, root: Path = ROOT):
    """(module, names) for every import in ``path``, relative ones resolved inside ``shapeproof``."""
    tree = ast.parse(path.read_text())
    package = ["shapeproof", *path.relative_to(root).parent.parts]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module, tuple(a.name for a in node.names)


def _unit_of(module: str) -> str | None:
    """The unit ``shapeproof.<unit>...`` belongs to: the longest unit name it starts with."""
    units = [u for u in ORDER if module == f"shapeproof.{u}" or module.startswith(f"shapeproof.{u}.")]
    return max(units, key=len, default=None)


def _unit_files(unit: str, root: Path = ROOT) -> list[Path]:
    folder = root.joinpath(*unit.split("."))
    inner = [root.joinpath(*u.split(".")) for u in ORDER if u.startswith(unit + ".")]
    return sorted(p for p in folder.rglob("*.py") if not any(p.is_relative_to(f) for f in inner))


def upward_imports(unit: str, root: Path = ROOT) -> list[str]:
    """Imports in ``unit`` of a unit above it."""
    above = ORDER[ORDER.index(unit) + 1:]
    wrong = []
    for path in _unit_files(unit, root):
        for module, names in _imports(path, root):
            named = [_unit_of(f"shapeproof.{n}") for n in names] if module == "shapeproof" else []
            targets = [_unit_of(module), *named]
            wrong += [f"{path.relative_to(root)}: {module} ({t})" for t in targets if t in above]
    return wrong


def imports_past_the_facade(lower: str, root: Path = ROOT) -> list[str]:
    """Imports of ``lower``'s modules by the units above it other than through ``lower``'s facade."""
    wrong = []
    for unit in ORDER[ORDER.index(lower) + 1:]:
        for path in _unit_files(unit, root):
            for module, names in _imports(path, root):
                if _unit_of(module) != lower:
                    continue
                where = f"{path.relative_to(root)}: {module}"
                if module != f"shapeproof.{lower}":
                    wrong.append(where)
                else:
                    wrong += [f"{where}.{n}" for n in names if n not in FACADES[lower]]
    return wrong


@pytest.mark.parametrize("unit", ORDER)
def test_no_unit_imports_one_above_it(unit):
    assert _unit_files(unit)
    assert not upward_imports(unit), "imports of a unit above:\n" + "\n".join(upward_imports(unit))


@pytest.mark.parametrize("lower", ["solver", "shapes", "shapes.apps"])
def test_units_above_use_only_the_facade_below(lower):
    wrong = imports_past_the_facade(lower)
    assert not wrong, "imports past the facade:\n" + "\n".join(wrong)


def test_the_environment_stands_alone_and_the_applications_sit_above_it():
    environment = {p.name for p in _unit_files("shapes")}
    applications = {"service.py", "endpoints.py", "workers.py", "html_report.py", "torch_messages.py"}
    assert {"env.py", "explain.py", "fixes.py", "report.py"} <= environment
    assert applications <= {p.name for p in _unit_files("shapes.apps")}
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
