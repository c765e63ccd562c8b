"""The packages of shapeproof and their imports, read from the code: the layer rules' facts and the picture.

    python -m bench.layers [--write]

Prints each unit with the units it imports, and with ``--write`` draws them into
``docs/pages/figures/packages.svg``, the picture on the architecture page
(``tests/test_layers.py`` fails when the picture and the tree disagree).

A *unit* is a package folder without the folders below it that are units
themselves, or a layer's *foundations*: the modules at the top of a layer that
the subpackages below them build on.  ``ORDER`` lists the units bottom to top:
a unit imports only units before it, and each layer imports the layers below
only through their facades.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PICTURE = ROOT / "docs" / "pages" / "figures" / "packages.svg"
LAYERS = ["solver", "shapes", "tracer", "export"]
# bottom to top
ORDER = ["solver.language", "solver.problems", "solver.strategies", "solver",
         "shapes", "shapes.apps",
         "tracer.foundations", "tracer.sizes", "tracer.control", "tracer",
         "export.foundations", "export.programs", "export.search", "export"]
FOUNDATIONS = {"tracer": {"torch_internals", "sympy_bridge", "patching", "user_source"},
               "export": {"specs", "progress", "settings"}}
_FOLDERS = [u for u in ORDER if not u.endswith(".foundations")]

__all__ = ["ROOT", "ORDER", "LAYERS", "FOUNDATIONS", "imports", "imported_modules", "known_modules",
           "module_of", "unit_of", "unit_files", "unit_graph", "module_graph", "picture"]


def module_of(path: Path, root: Path = ROOT) -> str:
    """``tracer/sizes/hintless.py`` -> ``shapeproof.tracer.sizes.hintless`` (a package by its folder)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["shapeproof", *parts])


def imports(path: Path, root: Path = ROOT):
    """``(module, names)`` for every import in ``path`` (inside functions and ``TYPE_CHECKING`` too), relative
    ones resolved inside ``shapeproof``."""
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


def unit_of(module: str) -> str | None:
    """The unit a ``shapeproof...`` module belongs to (None outside the layers: the root's small files)."""
    first, *parts = module.split(".")
    if first != "shapeproof" or not parts or parts[0] not in LAYERS:
        return None
    if len(parts) >= 2 and parts[1] in FOUNDATIONS.get(parts[0], ()):
        return f"{parts[0]}.foundations"
    for depth in range(len(parts), 0, -1):
        unit = ".".join(parts[:depth])
        if unit in _FOLDERS:
            return unit
    return None


def unit_files(unit: str, root: Path = ROOT) -> list[Path]:
    layer = unit.split(".")[0]
    files = sorted(p for p in root.joinpath(layer).rglob("*.py") if "__pycache__" not in p.parts)
    return [p for p in files if unit_of(module_of(p, root)) == unit]


def known_modules(root: Path = ROOT) -> set[str]:
    """Every module of the layers, packages included."""
    return {module_of(p, root) for layer in LAYERS for p in root.joinpath(layer).rglob("*.py")
            if "__pycache__" not in p.parts}


def imported_modules(module: str, names: tuple, known: set[str]) -> list[str]:
    """The modules an import reads: ``from a import b`` reads ``a.b`` where that is a module, else ``a``."""
    found = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
    if len(found) < len(names) or not names:
        found.append(module)
    return found


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every module of the layers -> the modules of shapeproof it imports."""
    files = [p for layer in LAYERS for p in root.joinpath(layer).rglob("*.py")
             if "__pycache__" not in p.parts]
    known = known_modules(root)
    graph: dict[str, set[str]] = {}
    for path in files:
        here = module_of(path, root)
        graph[here] = {t for m, names in imports(path, root) if m.startswith("shapeproof")
                       for t in imported_modules(m, names, known) if t in known and t != here}
    return graph


def unit_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every unit -> the other units it imports."""
    graph: dict[str, set[str]] = {u: set() for u in ORDER}
    for module, targets in module_graph(root).items():
        unit = unit_of(module)
        if unit is not None:
            graph[unit] |= {t for t in map(unit_of, targets) if t is not None and t != unit}
    return graph


# -- the picture -------------------------------------------------------------------------------------------

_BOX_W, _BOX_H, _GAP_X, _ROW_H, _MARGIN = 150, 34, 30, 92, 20
_COLORS = {"solver": "#e8f1fb", "shapes": "#eaf7ea", "tracer": "#fdf1e2", "export": "#f6eafa"}


def _layout() -> dict[str, tuple[int, int]]:
    """Each unit's box corner: a row per layer, the lowest layer at the bottom, units in order."""
    rows = [[u for u in ORDER if u.split(".")[0] == layer] for layer in reversed(LAYERS)]
    width = max(len(r) for r in rows) * (_BOX_W + _GAP_X) - _GAP_X
    place = {}
    for i, row in enumerate(rows):
        row_width = len(row) * (_BOX_W + _GAP_X) - _GAP_X
        x0 = _MARGIN + 110 + (width - row_width) // 2
        for j, unit in enumerate(row):
            place[unit] = (x0 + j * (_BOX_W + _GAP_X), _MARGIN + i * _ROW_H)
    return place


def picture(root: Path = ROOT) -> str:
    """The units as boxes, a row per layer, and an arrow for each unit's import of another (SVG text)."""
    place, graph = _layout(), unit_graph(root)
    width = max(x for x, _ in place.values()) + _BOX_W + _MARGIN
    height = max(y for _, y in place.values()) + _BOX_H + _MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#666"/></marker></defs>']
    for i, layer in enumerate(reversed(LAYERS)):
        out.append(f'<text x="{_MARGIN}" y="{_MARGIN + i * _ROW_H + 22}" font-weight="bold">{layer}/</text>')
    for unit in ORDER:
        for target in sorted(graph[unit], key=ORDER.index):
            (x1, y1), (x2, y2) = place[unit], place[target]
            start = (x1 + _BOX_W // 2, y1 + (_BOX_H if y2 > y1 else 0 if y2 < y1 else _BOX_H // 2))
            end = (x2 + _BOX_W // 2, y2 + (0 if y2 > y1 else _BOX_H if y2 < y1 else _BOX_H // 2))
            if y1 == y2:                      # same row: from the side, curving below the boxes
                start, end = (x1 + _BOX_W // 2, y1 + _BOX_H), (x2 + _BOX_W // 2, y2 + _BOX_H)
                bend = y1 + _BOX_H + 24
                curve = f"M {start[0]} {start[1]} C {start[0]} {bend} {end[0]} {bend} {end[0]} {end[1]}"
                out.append(f'<path d="{curve}" fill="none" stroke="#999" marker-end="url(#arrow)"/>')
            else:
                out.append(f'<line x1="{start[0]}" y1="{start[1]}" x2="{end[0]}" y2="{end[1]}" stroke="#999" '
                           f'marker-end="url(#arrow)"/>')
    for unit in ORDER:
        x, y = place[unit]
        label = unit.split(".", 1)[1] if "." in unit else "(top)"
        color = _COLORS[unit.split(".")[0]]
        out.append(f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="5" fill="{color}" '
                   f'stroke="#555"/>')
        out.append(f'<text x="{x + _BOX_W // 2}" y="{y + 21}" text-anchor="middle">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help=f"write the picture to {PICTURE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    for unit, targets in unit_graph().items():
        files = len(unit_files(unit))
        print(f"{unit:20s} {files:3d} modules  imports: {', '.join(sorted(targets, key=ORDER.index)) or '-'}")
    if args.write:
        PICTURE.write_text(picture())
        print(f"wrote {PICTURE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
