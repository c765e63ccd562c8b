"""shapeproof.shapes — the shape environment (no torch import)."""
