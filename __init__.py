"""shapeproof — symbolic shape reasoning for PyTorch export.

Layers (dependencies point one way): ``solver`` (integer shape logic, no
torch) <- ``shapes`` (the shape environment, no torch) <- ``tracer`` (binds
the engine to PyTorch) <- ``export`` (ExportedProgram assembly).

``shapeproof.export(model, args, dynamic_shapes=...)``, ``shapeproof.ExportError``,
``shapeproof.suggest_dynamic_shapes`` and ``shapeproof.engine(...)`` (under which
``torch.export.export`` is shapeproof's) load torch on first use; importing
``shapeproof``, ``shapeproof.solver`` or ``shapeproof.shapes`` does not, and
they work where torch is not installed (``pip install "shapeproof[torch]"``
adds it).
"""
import importlib

__version__ = "0.1.0"

_FROM_EXPORT = {"ExportError", "ExportResult", "suggest_dynamic_shapes", "export_with_report", "engine"}
_FROM_SOLVER = {"prove", "simplify", "Verdict", "Status", "ParseError"}


def __getattr__(name):
    if name == "export":
        return importlib.import_module(".export", __name__)
    if name in _FROM_EXPORT:
        return getattr(importlib.import_module(".export", __name__), name)
    if name in _FROM_SOLVER:
        return getattr(importlib.import_module(".solver", __name__), name)
    if name == "ShapeEnv":
        return importlib.import_module(".shapes", __name__).ShapeEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
