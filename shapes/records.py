"""Records the environment keeps: guards, runtime asserts and the log of every query."""
from __future__ import annotations

from dataclasses import dataclass, field

from sympy import Expr

from shapeproof.solver import Formula, Verdict, Vocabulary

from .provenance import Provenance

__all__ = ["Guard", "RuntimeAssert", "MergedBranch", "Query"]


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
    # symbols learning this guard made multiples (a divisibility it implies, x == c*k): questions torch
    # would ask about them afterwards, each about one dim, the environment answered from it
    taught: frozenset = frozenset()

    @property
    def kind(self) -> str:
        return "check" if self.from_check else "guard"

    @property
    def from_branch(self) -> bool:
        """Asked by Python code on a size (an ``if``), not by an op's shape rule: another value takes
        another code path rather than failing."""
        return self.where is None or self.where.op is None


@dataclass
class RuntimeAssert:
    """A fact about data-dependent (unbacked) sizes, checked when the program runs."""

    index: int
    condition: Formula
    where: Provenance | None
    message: str = ""


@dataclass
class MergedBranch:
    """A Python branch on sizes whose body the trace took for every input, recording no guard.

    Where ``condition`` (when the body runs) is false, the body is proven to
    be an identity: it pads by 0, slices whole dims, resizes to the size a
    tensor has.  ``rewrites`` says which size arguments were replaced by a
    value proven equal to the original where ``condition`` holds and neutral
    where it does not (``4 - W % 4`` padded as ``(4 - W % 4) % 4``), as
    pairs of terms; ``ShapeEnv.describe_merge`` says it in the user's names.
    """

    index: int
    condition: Formula
    where: Provenance | None
    rewrites: tuple[tuple[Expr, Expr], ...] = ()


class Purpose(Vocabulary):
    """Why the environment asked the solver."""

    EVALUATE = "evaluate"                  # a branch on a size while tracing
    SIZE_OBLIVIOUS = "size_oblivious"      # a framework check, sizes taken as >= 2
    CHECK = "check"                        # torch._check
    STATIC = "static"                      # statically_known: never records anything
    STATIC_FIRST = "static_first"          # the same, asked before torch's own reasoning was (large terms)
    LEARN = "learn"                        # whether a new fact implies a divisibility it does not state
    MERGE = "merge"                        # whether a branch's body is an identity on the side that skips it


@dataclass
class Query:
    """One question put to the solver during tracing (the replay log of an export)."""

    goal: Formula
    facts: tuple[Formula, ...]
    ranges: dict = field(default_factory=dict)   # symbol name -> (lo, hi)
    strategy: str = ""
    status: str = ""       # a ``Status`` value: proven, refuted, unknown
    seconds: float = 0.0
    purpose: str = ""      # a ``Purpose``
    where: Provenance | None = None

    @property
    def asked_before_torch(self) -> bool:
        """Whether the tracer asked this before torch's own reasoning had its turn (which might have
        settled it)."""
        return self.purpose == Purpose.STATIC_FIRST
