"""Records the environment keeps: guards, runtime asserts and the log of every query."""
from __future__ import annotations

from dataclasses import dataclass, field

from shapeproof.solver.formula import Formula
from shapeproof.solver.verdict import Verdict

from .provenance import Provenance

__all__ = ["Guard", "RuntimeAssert", "Query"]


@dataclass
class Guard:
    """An assumption about the inputs that the traced program depends on.

    ``condition`` is what must hold (the branch the hint took), ``asked`` the
    question as the framework asked it.  ``verdict`` is filled in by
    ``ShapeEnv.produce_guards``: whether it holds over the declared ranges.
    """

    index: int
    condition: Formula
    asked: Formula
    where: Provenance | None
    size_oblivious: bool = False
    from_check: bool = False           # came from torch._check on backed sizes
    verdict: Verdict | None = None

    @property
    def kind(self) -> str:
        return "check" if self.from_check else "guard"


@dataclass
class RuntimeAssert:
    """A fact about data-dependent (unbacked) sizes, checked when the program runs."""

    index: int
    condition: Formula
    where: Provenance | None
    message: str = ""


@dataclass
class Query:
    """One question put to the solver during tracing (the replay log of an export)."""

    goal: Formula
    facts: tuple[Formula, ...]
    ranges: dict = field(default_factory=dict)   # symbol name -> (lo, hi)
    strategy: str = ""
    status: str = ""
    seconds: float = 0.0
    purpose: str = ""      # "evaluate", "size_oblivious", "check", "static", ...
    where: Provenance | None = None
