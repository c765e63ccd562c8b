"""The PyTorch that ``shapeproof.export`` needs, and a clear error naming the extra when it is missing.

The solver, the shape environment, the CLI's ``prove``/``explain`` and the
service run without torch, so ``pip install shapeproof`` does not pull it (a
multi-GB CUDA build from the default index); export comes with the extra
``pip install "shapeproof[torch]"``.  ``TORCH_REQUIREMENT`` is the extra's
specifier in pyproject.toml (a test keeps the two equal).
"""
from __future__ import annotations

import warnings

__all__ = ["TESTED_TORCH", "TORCH_REQUIREMENT", "TorchMissingError", "require_torch"]

TORCH_REQUIREMENT = "torch>=2.13,<2.15"
ALLOWED = ((2, 13), (2, 15))              # [lowest minor, first minor not allowed)
TESTED_TORCH = "2.13.0"
INSTALL_HINT = 'pip install "shapeproof[torch]"'


class TorchMissingError(ImportError):
    """PyTorch is not installed, and the feature asked for needs it."""


def require_torch(feature: str = "shapeproof.export") -> None:
    """Import torch, or raise ``TorchMissingError`` saying which extra installs it."""
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise TorchMissingError(
            f"{feature} needs PyTorch, which is not installed here: {INSTALL_HINT} "
            f"(tested with torch {TESTED_TORCH}; allowed: {TORCH_REQUIREMENT}). The solver, the shape "
            "environment, `shapeproof prove`/`explain` and `shapeproof serve` work without it.") from None
    version = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if not ALLOWED[0] <= version < ALLOWED[1]:
        warnings.warn(f"shapeproof is tested with torch {TESTED_TORCH} and allows {TORCH_REQUIREMENT}; "
                      f"torch {torch.__version__} may have moved the private names it uses", stacklevel=3)
