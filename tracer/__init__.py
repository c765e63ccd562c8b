"""shapeproof.tracer — binds the shape engine to PyTorch (fake tensors, SymInts, non-strict export).

Thin by design: it decides nothing about shapes itself.  ``engine_env``
routes every question torch cannot settle to ``shapeproof.shapes``;
``sympy_bridge`` converts torch's sympy into the engine's terms; every
private torch name goes through ``torch_internals``.
"""

from .torch_strategy import register as _register_torch_strategy

_register_torch_strategy()   # strategy="torch": torch's own reasoning, beside the engine's strategies
