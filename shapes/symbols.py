"""Symbols of the shape environment and where they come from."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from sympy import Symbol

from .provenance import Provenance

__all__ = ["DimKind", "Source", "SymbolInfo", "Range", "Specialization", "span_str", "specialization_lines"]

Range = tuple  # (lo, hi), inclusive, None for unbounded


def span_str(r: Range) -> str:
    lo, hi = r
    return f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"


class DimKind(Enum):
    """What the user's spec promises about a dynamic input dim, following torch.export's ``Dim`` kinds.

    ``STRICT``: a named ``Dim`` (or a declared range): every size in the range
    must work, so a guard that narrows it is a violation.  ``AUTO``
    (``Dim.AUTO``): export decides; guards that narrow it become the program's
    input checks.  ``DYNAMIC`` (``Dim.DYNAMIC``): like ``AUTO``, except that
    narrowing it to one size is an error.
    """

    STRICT = "strict"
    AUTO = "auto"
    DYNAMIC = "dynamic"


@dataclass(frozen=True)
class Source:
    """A readable origin: an input dim (``x.size(1)``) or an op producing a data-dependent size."""

    path: str                       # what users read: "x.size(1)", "nonzero(x).size(0)"
    input: str | None = None        # input name for input dims
    dim: int | None = None          # dim index for input dims
    op: str | None = None           # producing op for unbacked symbols
    where: Provenance | None = None  # user source line (unbacked symbols)

    def __str__(self) -> str:
        return self.path


@dataclass
class SymbolInfo:
    """Everything the environment knows about one symbol.

    ``declared`` is the user's range as written (``Dim(min, max)``); ``range``
    is the range reasoning starts from: for backed input dims ``declared``
    raised to a lower bound of 2 (torch.export's 0/1 convention).  The
    environment's current, narrowed ranges live in ``ShapeEnv.ranges``.
    """

    symbol: Symbol
    backed: bool
    hint: int | None
    sources: list[Source]
    declared: Range
    range: Range
    size_like: bool = False
    dim_name: str | None = None     # the user's Dim name, e.g. "T"
    kind: DimKind = DimKind.STRICT
    fixed: int | None = None        # the one size the tracer specialized the dim to (torch replaced it)
    # the root ``h`` of derived dims (``32*h``) that no input has as a dim of its own: torch.export keeps a
    # guard on it that leaves it more than one size as an input check (``Violation.torch_keeps``)
    uncarried_root: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.symbol.name

    @property
    def label(self) -> str:
        """What to call the symbol in messages: the Dim name, else the first source, else its name."""
        if self.dim_name:
            return self.dim_name
        return self.sources[0].path if self.sources else self.symbol.name


class Specialization(NamedTuple):
    """A dim declared dynamic whose example value is 0 or 1, which torch.export makes a constant."""

    source: Source
    size: int
    declared: Range
    dim_name: str | None = None     # the user's Dim, when one was named


def specialization_lines(found: list[Specialization]) -> list[str]:
    """One sentence per declared dim (a Dim shared by inputs, or the root of a derived dim, is one)."""
    by_dim: dict[str, list[Specialization]] = {}
    for s in found:
        by_dim.setdefault(s.dim_name or str(s.source), []).append(s)
    lines = []
    for label, entries in by_dim.items():
        inputs = ", ".join(f"{e.source} = {e.size}" for e in entries if str(e.source) != label)
        named = f"{label} ({inputs})" if inputs else label
        size, declared = entries[0].size, span_str(entries[0].declared)
        lines.append(f"{named} is declared dynamic {declared} but its example value is {size}, which "
                     f"torch.export specializes to a constant: use an example with {label} >= 2, or make it "
                     f"static ({label} = {size})")
    return lines
