"""What reports, explanations and fixes read of a shape environment: a ``Protocol`` ``ShapeEnv`` satisfies.

``report.py``, ``explain.py`` and ``fixes.py`` take an ``EnvView`` rather than
importing ``env.py``, so the environment can import them at the top and the
three only see the part of it they use.
"""
from __future__ import annotations

from typing import Protocol

from sympy import Expr, Symbol

from shapeproof.solver import Solver

from .graph import DependencyGraph
from .knowledge import Knowledge
from .records import Guard, RuntimeAssert
from .symbols import Specialization, SymbolInfo

__all__ = ["EnvView"]


class EnvView(Protocol):
    symbols: dict[Symbol, SymbolInfo]
    derived: dict[Symbol, Expr]          # symbol introduced by divisibility -> its value in inputs
    guards: list[Guard]
    runtime_asserts: list[RuntimeAssert]
    specialized: list[Specialization]
    graph: DependencyGraph
    solver: Solver
    knowledge: Knowledge                 # what guards taught: replacements (a dim eliminated), facts
    branch_notes: dict[tuple[str, int], str]     # (file, line) of an ``if`` left a guard -> why

    def label_map(self) -> dict[Symbol, Symbol]: ...

    def render(self, f) -> str: ...

    def creation_order(self, sym: Symbol) -> int: ...
