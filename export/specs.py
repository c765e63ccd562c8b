"""torch's ``dynamic_shapes`` specs: reading the Dims out of them, and writing fixes back in.

Specs are torch's own objects (``torch.export.Dim`` with min/max, derived dims
``2*h + 1``, ``Dim.AUTO``/``DYNAMIC``/``STATIC``, ``ShapesCollection``, nested
dict/tuple/list/None), passed through to torch unchanged; this module only
reads them so the engine knows each dim's name, range and derivation while
tracing, and rebuilds them with a violation's fixes applied.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from torch.export import Dim, ShapesCollection

from shapeproof.tracer.engine_env import DimSpec
from shapeproof.tracer.torch_internals import DerivedDim

__all__ = ["dim_specs", "map_dims", "apply_fixes", "suggested_fixes", "normalize_spec"]


def normalize_spec(dynamic_shapes, model, args, kwargs):
    """Turn a ``ShapesCollection`` into the plain nested form torch accepts everywhere else."""
    if isinstance(dynamic_shapes, ShapesCollection):
        return dynamic_shapes.dynamic_shapes(model, args, kwargs)
    return dynamic_shapes


def map_dims(spec, fn: Callable[[Any], Any]):
    """Rebuild ``spec`` with every Dim (plain or derived) replaced by ``fn(dim)``."""
    if isinstance(spec, Dim):
        return fn(spec)
    if isinstance(spec, dict):
        return {k: map_dims(v, fn) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(map_dims(v, fn) for v in spec)
    return spec


def _bound(value) -> int | None:
    return None if value is None or not isinstance(value, int) or value >= 2 ** 62 else int(value)


def _spec(dim: Dim) -> DimSpec:
    if isinstance(dim, DerivedDim):
        root = _spec(dim.root)
        b = int(dim.fn(0))
        a = int(dim.fn(1)) - b
        return DimSpec(dim.__name__, _bound(dim.min), _bound(dim.max), root, a, b)
    return DimSpec(dim.__name__, _bound(dim.min), _bound(dim.max))


def dim_specs(spec) -> dict[str, DimSpec]:
    """Every named (or derived) Dim in ``spec``, by the name torch prints for it."""
    found: dict[str, DimSpec] = {}

    def collect(dim):
        found[dim.__name__] = _spec(dim)
        return dim

    map_dims(spec, collect)
    return found


def apply_fixes(spec, fixes, input_names: tuple[str, ...] = ()) -> Any:
    """``spec`` with the given verified fixes applied, combined per dim by intersection.

    Each fix makes its own guard hold on a subset of the dim's values, so the
    intersection of several fixes on one dim makes all of their guards hold.
    A static fix of a ``Dim.AUTO``/``DYNAMIC`` dim names it by its input
    (``x.size(1)``); ``input_names`` (the model's, in call order) place it in
    a positional spec.
    """
    for fix in fixes:
        found = _INPUT_DIM.match(fix.dim) if fix.kind == "static" else None
        if found is not None:
            spec = _declared_static(spec, found["name"], int(found["dim"]), input_names)
    by_dim = _by_dim(fixes)
    shared: dict[str, Dim] = {}
    roots: dict[str, Any] = {}

    def replace(dim: Dim):
        if isinstance(dim, DerivedDim) and dim.root.__name__ in by_dim:
            # a fix names the root of ``32*h``: fix it once for all its derived dims, keep the relations
            name = dim.root.__name__
            if name not in roots:
                roots[name] = replace(dim.root)
            return None if roots[name] is None else dim.fn(roots[name])
        chosen = by_dim.get(dim.__name__)
        if not chosen:
            return dim
        try:
            refined = _refined(spec, dim, chosen, shared)
        except Inexpressible:
            return dim                   # the error's message states the relation; torch's Dim cannot
        return None if isinstance(refined, int) else refined

    return map_dims(spec, replace)


def suggested_fixes(spec, fixes) -> list[str]:
    """``fixes`` as the lines of torch.export's "Suggested fixes:" section, for the named Dims of ``spec``.

    torch's ``refine_dynamic_shapes_from_suggested_fixes(error.msg, spec)`` reads these lines (a
    ``Dim(...)``, a size, or an expression in one other Dim per line), so a caller written for
    torch.export gets the spec ``apply_fixes`` makes.  A dim declared ``Dim.AUTO``/``DYNAMIC`` has no
    name there, and the root of ``32*h`` can only be given a range or a size (torch applies the
    derivation to it): other fixes of those are left to ``apply_fixes``.
    """
    named = _named_dims(spec)
    roots = {d.root.__name__ for d in named.values() if isinstance(d, DerivedDim)}
    shared: dict[str, Dim] = {}
    lines = []
    for name, chosen in _by_dim(fixes).items():
        dim = named.get(name)
        if dim is None or isinstance(dim, DerivedDim):
            continue
        try:
            refined = _refined(spec, dim, chosen, shared)
        except Inexpressible:
            continue
        if isinstance(refined, int):
            lines.append(f"{name} = {refined}")
        elif name in roots and (isinstance(refined, DerivedDim) or refined.__name__ != name):
            continue
        elif isinstance(refined, DerivedDim):
            root = refined.root
            if root.__name__ not in named:
                lines.append(f"{root.__name__} = {_dim_text(root)}")
            lines.append(f"{name} = {_linear_text(refined)}")
        elif refined.__name__ != name:
            lines.append(f"{name} = {refined.__name__}")
        elif (refined.min, refined.max) != (dim.min, dim.max):
            lines.append(f"{name} = {_dim_text(refined)}")
    return lines


def _by_dim(fixes) -> dict[str, list]:
    """The spec-changing fixes (not ``rewrite`` advice) grouped by the dim they change."""
    by_dim: dict[str, list] = {}
    for fix in fixes:
        if fix.kind != "rewrite":
            by_dim.setdefault(fix.dim, []).append(fix)
    return by_dim


class Inexpressible(ValueError):
    """A verified fix torch's ``Dim`` cannot write: a dim that decreases with another (``dy = 32 - dx``:
    a derived Dim is ``a*root + b`` with ``a >= 1``)."""


def _refined(spec, dim: Dim, chosen: list, shared: dict[str, Dim]) -> Dim | int:
    """``dim`` with its fixes ``chosen`` applied: a narrower ``Dim``, a dim derived from a new root or
    tied to another Dim of ``spec`` (``shared`` holds those, so ties share one object), or its one
    size."""
    kinds = {f.kind for f in chosen}
    if "static" in kinds:
        return next(f.value for f in chosen if f.kind == "static")
    if "equal" in kinds:
        tie = next(f for f in chosen if f.kind == "equal")
        if tie.scale < 1:
            raise Inexpressible(f"{dim.__name__} = {tie.scale}*{tie.other} + {tie.offset}")
        root = shared.setdefault(tie.other, _named_dims(spec).get(tie.other) or dim)
        return root if (tie.scale, tie.offset) == (1, 0) else tie.scale * root + tie.offset
    lo, hi = dim.min, dim.max
    for f in chosen:
        if f.kind == "range":
            lo, hi = max(lo, f.min), min(hi, _inf(f.max))
    multiple = next((f for f in chosen if f.kind == "multiple"), None)
    # one size left (it is the example's: fixes keep it) is a static dim; torch rejects Dim(min=k, max=k)
    if multiple is None:
        return lo if lo == hi else Dim(dim.__name__, min=lo, max=None if hi == float("inf") else hi)
    m, r = multiple.modulus, multiple.remainder
    root_lo = max(multiple.min, -((-(lo - r)) // m))
    root_hi = min(_inf(multiple.max), (hi - r) // m if hi != float("inf") else float("inf"))
    if root_lo == root_hi:
        return m * root_lo + r
    root = Dim(f"{dim.__name__}_{m}", min=root_lo, max=None if root_hi == float("inf") else int(root_hi))
    return m * root + r if r else m * root


def _named_dims(spec) -> dict[str, Dim]:
    """The Dims of ``spec`` by name, the roots of derived dims included."""
    found: dict[str, Dim] = {}

    def collect(dim):
        found.setdefault(dim.__name__, dim)
        if isinstance(dim, DerivedDim):
            found.setdefault(dim.root.__name__, dim.root)
        return dim

    map_dims(spec, collect)
    return found


def _dim_text(dim: Dim) -> str:
    """``Dim('name', min=.., max=..)`` as torch prints a fix (an unbounded end left out)."""
    bounds = [f"min={_bound(dim.min)}"] if _bound(dim.min) is not None else []
    bounds += [f"max={_bound(dim.max)}"] if _bound(dim.max) is not None else []
    return f"Dim({', '.join([repr(dim.__name__)] + bounds)})"


def _linear_text(dim: DerivedDim) -> str:
    """``a*root + b`` of a dim derived linearly from its root, in torch's spelling (``2*_B``, ``dx + 1``)."""
    b = int(dim.fn(0))
    a = int(dim.fn(1)) - b
    text = dim.root.__name__ if a == 1 else f"{a}*{dim.root.__name__}"
    return text if b == 0 else f"{text} + {b}" if b > 0 else f"{text} - {-b}"


# an input's own dim, as labels name a dim declared Dim.AUTO/DYNAMIC (nested inputs are not placed)
_HINT = type(Dim.AUTO)     # Dim.AUTO, DYNAMIC and STATIC
_INPUT_DIM = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.size\((?P<dim>\d+)\)$")


def _declared_static(spec, name: str, dim: int, input_names: tuple[str, ...]):
    """``spec`` with dim ``dim`` of input ``name`` static, where it is declared by a ``Dim.AUTO``/``DYNAMIC``
    hint (a named ``Dim`` is fixed by its name)."""
    if isinstance(spec, dict) and name in spec:
        return {**spec, name: _static_dim(spec[name], dim)}
    if isinstance(spec, (list, tuple)) and name in input_names and input_names.index(name) < len(spec):
        i = input_names.index(name)
        return type(spec)(_static_dim(v, dim) if j == i else v for j, v in enumerate(spec))
    return spec


def _static_dim(entry, dim: int):
    if isinstance(entry, dict) and isinstance(entry.get(dim), _HINT):
        return {k: v for k, v in entry.items() if k != dim}          # a dim left out is static
    if isinstance(entry, (list, tuple)) and dim < len(entry) and isinstance(entry[dim], _HINT):
        return type(entry)(None if j == dim else v for j, v in enumerate(entry))
    return entry


def _inf(value):
    return float("inf") if value is None else value
