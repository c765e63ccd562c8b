"""shapeproof.shapes — the shape environment: symbols, ranges, learned facts, guards, explanations.

No torch import anywhere in this package; ``shapeproof.tracer`` binds it to PyTorch.
This namespace is the package's public facade: ``tracer``, ``export`` and the
applications built on the environment (``shapes.apps``: the HTTP service, the
HTML report, the reader of torch's error texts) import only these names, and
the environment imports none of the applications (``tests/test_layers.py`` checks).
"""
from .env import ShapeEnv
from .errors import CheckFailed, DataDependentError, InputOutOfRange, ShapeError
from .explain import DimInfo, Explanation, explain
from .fixes import Fix, FixKind, dim_fix, joint_fixes, suggest_fixes
from .inputs import InputError, check_name, check_seconds, check_span
from .provenance import Frame, Provenance, capture, is_user_file, is_user_frame
from .records import Guard, MergedBranch, Query, RuntimeAssert
from .report import GuardReport, Violation, asserts_that_narrow, lift
from .standalone import explain_guard
from .symbols import DimKind, Source, Specialization, SymbolInfo, specialization_lines

__all__ = [
    "ShapeEnv", "DimKind", "Source", "SymbolInfo", "Specialization", "Guard", "RuntimeAssert", "Query",
    "MergedBranch",
    "GuardReport", "Violation",
    "Explanation", "DimInfo", "explain", "explain_guard", "Fix", "FixKind", "dim_fix", "joint_fixes",
    "suggest_fixes",
    "Provenance", "Frame", "capture",
    "ShapeError", "DataDependentError", "CheckFailed", "InputOutOfRange",
    # for the tracer, export and the applications
    "is_user_frame", "is_user_file", "lift", "InputError", "check_name", "check_span", "check_seconds",
    "asserts_that_narrow", "specialization_lines",
]
