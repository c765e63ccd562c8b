"""shapeproof.shapes — the shape environment: symbols, ranges, learned facts, guards, explanations.

No torch import anywhere in this package; ``shapeproof.tracer`` binds it to PyTorch.
"""
from .env import ShapeEnv
from .errors import CheckFailed, DataDependentError, InputOutOfRange, ShapeError
from .explain import DimInfo, Explanation, explain
from .fixes import Fix
from .provenance import Frame, Provenance, capture
from .records import Guard, Query, RuntimeAssert
from .report import GuardReport, Violation
from .standalone import explain_guard
from .symbols import DimKind, Source, SymbolInfo

__all__ = [
    "ShapeEnv", "DimKind", "Source", "SymbolInfo", "Guard", "RuntimeAssert", "Query", "GuardReport",
    "Violation",
    "Explanation", "DimInfo", "explain", "explain_guard", "Fix", "Provenance", "Frame", "capture",
    "ShapeError", "DataDependentError", "CheckFailed", "InputOutOfRange",
]
