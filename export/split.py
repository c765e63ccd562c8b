"""A package of exported programs, one per region of the declared ranges, with a dispatcher.

torch.export captures one straight-line graph; a model whose code path
depends on sizes (``if T % 4 != 0: pad``) needs one graph per region.  Each
member is torch's own ``ExportedProgram`` whose input checks are its region's
predicate, so a member loaded alone with ``torch.export.load`` still rejects
inputs it was not traced for.  The package format (``save``/``load``) is a zip:

    manifest.json       {"format": "shapeproof.split/1", "params": [...], "box": {...},
                         "variables": {var: python over L['x'].size()[d]},
                         "regions": [{"predicate": text, "program": "region_0.pt2"}, ...]}
    region_<i>.pt2      torch.export.save of each member

Predicates are stored as text and read back with shapeproof's safe parser.
"""
from __future__ import annotations

import inspect
import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from shapeproof.solver import formula as F
from shapeproof.solver.evaluate import evaluate_term, truth
from shapeproof.solver.parse import parse_condition, parse_term
from shapeproof.solver.terms import symbol

__all__ = ["FORMAT", "SplitProgram", "load_split"]

FORMAT = "shapeproof.split/1"
_SOURCE = re.compile(r"L((?:\[[^\]]+\])+)\.size\(\)\[(\d+)\]")


@dataclass
class SplitProgram:
    """Programs valid on disjoint regions that together cover the declared ranges."""

    programs: list[torch.export.ExportedProgram]
    predicates: list[F.Formula]             # over canonical variables, pairwise disjoint
    variables: dict[str, str]               # canonical variable -> Python over L['x'].size()[d]
    box: dict[str, tuple]                   # canonical variable -> declared (lo, hi)
    params: list[str]                       # the model's forward parameters, to bind inputs by name

    def select(self, args: tuple, kwargs: dict | None = None) -> int:
        """Index of the program whose region holds the sizes of these inputs."""
        point = self.point(args, kwargs)
        for name, (lo, hi) in self.box.items():
            value = point[name]
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                raise ValueError(f"{name} = {value} is outside the declared range [{lo}, {hi}]")
        env = {symbol(k): v for k, v in point.items()}
        for i, pred in enumerate(self.predicates):
            if truth(pred, env):
                return i
        raise ValueError(f"no region holds {point}: the package does not cover these sizes")

    def point(self, args: tuple, kwargs: dict | None = None) -> dict[str, int]:
        named = dict(zip(self.params, args))
        named.update(kwargs or {})
        return {var: int(evaluate_term(parse_term(_read_sizes(text)), _sizes(named)))
                for var, text in self.variables.items()}

    def module(self) -> torch.nn.Module:
        return _Dispatcher(self)

    # -- package ----------------------------------------------------------------------------
    def save(self, path) -> Path:
        path = Path(path)
        manifest = {"format": FORMAT, "params": self.params, "variables": self.variables,
                    "box": {k: list(v) for k, v in self.box.items()},
                    "regions": [{"predicate": str(p), "program": f"region_{i}.pt2"}
                                for i, p in enumerate(self.predicates)]}
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("manifest.json", json.dumps(manifest, indent=2))
            for i, program in enumerate(self.programs):
                buffer = io.BytesIO()
                torch.export.save(program, buffer)
                zf.writestr(f"region_{i}.pt2", buffer.getvalue())
        return path


def load_split(path) -> SplitProgram:
    """Read a package written by ``SplitProgram.save``."""
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        if manifest.get("format") != FORMAT:
            raise ValueError(f"{path} is not a {FORMAT} package")
        programs = [torch.export.load(io.BytesIO(zf.read(r["program"]))) for r in manifest["regions"]]
    predicates = [parse_condition(r["predicate"]) for r in manifest["regions"]]
    return SplitProgram(programs, predicates, manifest["variables"],
                        {k: tuple(v) for k, v in manifest["box"].items()}, manifest["params"])


def _read_sizes(text: str) -> str:
    """``(L['x'].size()[1] - 1) // 2`` -> ``(x__1 - 1) // 2``: a term the safe parser reads."""
    return _SOURCE.sub(lambda m: _size_name(m.group(1), m.group(2)), text)


def _size_name(path: str, dim: str) -> str:
    keys = re.findall(r"\['([^']+)'\]|\[(\d+)\]", path)
    return "__".join(a or b for a, b in keys) + f"__{dim}"


def _sizes(named: dict) -> dict:
    env = {}
    leaves, _ = torch.utils._pytree.tree_flatten_with_path(named)
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            keys = torch.utils._pytree.keystr(path)
            for d, n in enumerate(leaf.shape):
                env[symbol(_size_name(keys, str(d)))] = int(n)
    return env


class _Dispatcher(torch.nn.Module):
    """Calls the member program whose region holds the input sizes."""

    def __init__(self, split: SplitProgram):
        super().__init__()
        self.split = split
        self.members = torch.nn.ModuleList(p.module() for p in split.programs)

    def forward(self, *args, **kwargs):
        return self.members[self.split.select(args, kwargs)](*args, **kwargs)


def split_program(model, first, search) -> SplitProgram:
    """Package the programs of a region search that covers the declared ranges.

    The dispatch predicates are checked by the solver to partition the box
    before anything is packaged; each member keeps its own predicate as its
    input check.
    """
    from .regions import check_partition, python_guard, set_input_checks, variable_sources

    predicates = [r.predicate for r in search.regions]
    problems = check_partition(predicates, search.box)
    if problems:
        raise AssertionError("region search produced a bad partition: " + "; ".join(problems))
    sources = variable_sources(first.sizes)
    idents = {var: symbol(var.name if var.name.isidentifier() else f"_d{i}")
              for i, var in enumerate(sorted(search.box, key=str))}
    if not all(var in sources for var in idents):
        raise ValueError("a dim of the regions cannot be read from the inputs")
    for region in search.regions:
        set_input_checks(region.traces[0], python_guard(region.predicate, sources))
    params = list(inspect.signature(model.forward).parameters)
    return SplitProgram([r.program for r in search.regions],
                        [F.substitute(p, idents) for p in predicates],
                        {idents[v].name: sources[v] for v in idents},
                        {idents[v].name: tuple(first.declared[v]) for v in search.box}, params)
