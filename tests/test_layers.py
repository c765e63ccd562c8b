"""Layers import one way (solver <- shapes <- tracer <- export), and each only through the facade below it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import shapeproof.shapes
import shapeproof.solver

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["solver", "shapes", "tracer", "export"]
FACADES = {"solver": set(shapeproof.solver.__all__), "shapes": set(shapeproof.shapes.__all__)}


def _imports(path: Path):
    """(module, names) for every import in ``path``, relative ones resolved inside ``shapeproof``."""
    tree = ast.parse(path.read_text())
    package = ["shapeproof", *path.relative_to(ROOT).parent.parts]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module, tuple(a.name for a in node.names)


def _layer_files(layer: str):
    return sorted((ROOT / layer).glob("*.py"))


@pytest.mark.parametrize("layer", ORDER)
def test_no_layer_imports_a_layer_above_it(layer):
    above = ORDER[ORDER.index(layer) + 1:]
    for path in _layer_files(layer):
        for module, _ in _imports(path):
            for upper in above:
                assert not module.startswith(f"shapeproof.{upper}"), f"{path.name} imports {module}"


@pytest.mark.parametrize("lower", ["solver", "shapes"])
def test_upper_layers_use_only_the_facade_below(lower):
    uppers = ORDER[ORDER.index(lower) + 1:]
    wrong = []
    for layer in uppers:
        for path in _layer_files(layer):
            for module, names in _imports(path):
                if module.startswith(f"shapeproof.{lower}."):
                    wrong.append(f"{layer}/{path.name}: {module}")
                elif module == f"shapeproof.{lower}":
                    wrong += [f"{layer}/{path.name}: {module}.{n}" for n in names if n not in FACADES[lower]]
                elif module == "shapeproof":
                    wrong += [f"{layer}/{path.name}: shapeproof.{n}" for n in names if n in ORDER and
                              ORDER.index(n) > ORDER.index(layer)]
    assert not wrong, "imports past the facade:\n" + "\n".join(wrong)
