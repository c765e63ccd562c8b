"""shapeproof.tracer — binds the shape engine to PyTorch (fake tensors, SymInts, non-strict export).

Thin by design: it decides nothing about shapes itself.  ``engine_env``
routes every question torch cannot settle to ``shapeproof.shapes``;
``sympy_bridge`` converts torch's sympy into the engine's terms; every
private torch name goes through ``torch_internals``; ``TorchStrategy`` is
torch's own reasoning as a solver strategy, for the solvers that choose it.

Rooms, bottom to top (``tests/test_layers.py`` checks that imports point down):
the foundations (``torch_internals``, ``sympy_bridge``, ``patching``,
``user_source``), ``sizes/`` (sizes through tensors and Python values),
``control/`` (branches and loops read from the user's source) and the top
(``engine_env``, ``fake_mode``, ``torch_strategy`` and the rest).
"""

from .torch_strategy import TorchStrategy, strategy_named

__all__ = ["TorchStrategy", "strategy_named"]
