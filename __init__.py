"""shapeproof — symbolic shape reasoning for PyTorch export.

Layers (dependencies point one way): ``solver`` (integer shape logic, no
torch) <- ``shapes`` (the shape environment, no torch) <- ``tracer`` (binds
the engine to PyTorch) <- ``export`` (ExportedProgram assembly).
"""
__version__ = "0.1.0"
