"""Symbols of the shape environment and where they come from."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from sympy import Symbol

from .provenance import Provenance

__all__ = ["DimKind", "Source", "SymbolInfo", "Range", "span_str"]

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
