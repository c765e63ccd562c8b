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

``load_split`` runs no code from the package: the manifest is checked
field by field (``PackageError`` for anything malformed), and each member
archive is checked by ``package.check_member`` (sizes, zip bombs, no pickle,
no compiled code, only plain symbolic text) before ``torch.export.load``
reads it; ``package.py`` lists what stays trusted.
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
from shapeproof.shapes import InputError, check_name, check_span
from shapeproof import solver as F      # the solver's facade: conditions, parsing, evaluation
from shapeproof.solver import ParseError, evaluate_term, parse_condition, parse_term, symbol, truth
from shapeproof.tracer.torch_internals import pytree

from .checks import python_guard, variable_sources
from .package import Caps, PackageError, check_member, open_archive, read_entry, read_json
from .regions import check_partition
from .traces import set_input_checks

__all__ = ["FORMAT", "PackageError", "SplitProgram", "load_split"]

FORMAT = "shapeproof.split/1"
# an input size as guards print it, L['x'].size()[1]: keys are quoted names or indices (a bracket of anything
# but ']' backtracked quadratically over a manifest of "L[L[L[...")
_SOURCE = re.compile(r"L((?:\['[^'\]\[]+'\]|\[\d+\])+)\.size\(\)\[(\d+)\]")


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


def load_split(path, caps: Caps | None = None) -> SplitProgram:
    """Read a package written by ``SplitProgram.save``; raises ``PackageError`` for any bad package."""
    caps = caps or Caps()
    archive, entries = open_archive(path, caps, str(path))
    with archive:
        manifest = _manifest(read_json(archive, entries, "manifest.json", caps, str(path)), entries, caps)
        programs = []
        for i, region in enumerate(manifest["regions"]):
            what = f"{path}: region {i} ({region['program']})"
            data = read_entry(archive, region["program"], what)
            check_member(data, caps, what)
            try:
                programs.append(torch.export.load(io.BytesIO(data)))
            except Exception as exc:          # torch raises many types for a bad archive
                raise PackageError(f"{what}: torch could not load it: {type(exc).__name__}: {exc}") from exc
    return SplitProgram(programs, [r["predicate"] for r in manifest["regions"]], manifest["variables"],
                        manifest["box"], manifest["params"])


def _manifest(raw, entries: dict, caps: Caps) -> dict:
    """The manifest with its predicates parsed and its box as tuples, every field checked."""
    def bad(why: str) -> PackageError:
        return PackageError(f"bad manifest: {why}")

    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise bad(f"not a {FORMAT} package")
    missing = {"params", "variables", "box", "regions"} - raw.keys()
    if missing:
        raise bad(f"missing {sorted(missing)}")
    params, variables, box, regions = raw["params"], raw["variables"], raw["box"], raw["regions"]
    if not isinstance(params, list) or not all(isinstance(p, str) and p.isidentifier() for p in params):
        raise bad("'params' must list the forward parameters' names")
    if not isinstance(variables, dict) or not isinstance(box, dict) or variables.keys() != box.keys():
        raise bad("'variables' and 'box' must map the same names")
    spans = {}
    try:
        for name, text in variables.items():
            check_name(name)
            if not isinstance(text, str):
                raise bad(f"variable {name} is not text")
            parse_term(_read_sizes(text))
            span = box[name]
            if not isinstance(span, list) or len(span) != 2:
                raise bad(f"the box of {name} is not [lo, hi]")
            spans[name] = check_span(name, *span)
        if not isinstance(regions, list) or not regions or len(regions) > caps.max_regions:
            raise bad(f"'regions' must be a non-empty list of at most {caps.max_regions}")
        predicates = []
        for region in regions:
            if (not isinstance(region, dict) or not isinstance(region.get("predicate"), str)
                    or not isinstance(region.get("program"), str) or region["program"] not in entries
                    or not region["program"].endswith(".pt2")):
                raise bad("each region needs a 'predicate' and the name of its .pt2 entry")
            predicate = parse_condition(region["predicate"])
            if not {s.name for s in predicate.free_symbols} <= variables.keys():
                raise bad(f"predicate {region['predicate'][:80]!r} uses names outside 'variables'")
            predicates.append(predicate)
    except (InputError, ParseError, RecursionError) as exc:
        raise bad(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    if len({r["program"] for r in regions}) != len(regions):
        raise bad("two regions name the same program")
    regions = [{"predicate": p, "program": r["program"]} for p, r in zip(predicates, regions)]
    return {"params": params, "variables": dict(variables), "box": spans, "regions": regions}


def _read_sizes(text: str) -> str:
    """``(L['x'].size()[1] - 1) // 2`` -> ``(x__1 - 1) // 2``: a term the safe parser reads."""
    return _SOURCE.sub(lambda m: _size_name(m.group(1), m.group(2)), text)


def _size_name(path: str, dim: str) -> str:
    keys = re.findall(r"\['([^']+)'\]|\[(\d+)\]", path)
    return "__".join(a or b for a, b in keys) + f"__{dim}"


def _sizes(named: dict) -> dict:
    env = {}
    leaves, _ = pytree.tree_flatten_with_path(named)
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            keys = pytree.keystr(path)
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
