"""shapeproof.export — ``shapeproof.export(model, args, dynamic_shapes=...)`` returns torch's ExportedProgram.

The package is itself callable (``shapeproof.export(...)``) so that the layer
``shapeproof.export`` and the function ``shapeproof.export`` are one name.

Rooms, bottom to top (``tests/test_layers.py`` checks that imports point down):
the foundations (``specs``: the user's ``dynamic_shapes``; ``settings``: one
export's settings; ``progress``), ``programs/`` (a program as terms, and
whether one serves another's region), ``search/`` (traces and the region
search) and the top (``api``, ``errors``, ``switch``, ``html``, the main job).
"""
import inspect
import sys
import types

from shapeproof.torch_extra import require_torch

require_torch()      # without torch: an ImportError naming the extra, not torch's bare ModuleNotFoundError

from .api import ExportResult, export, export_with_report, suggest_dynamic_shapes  # noqa: E402
from .errors import ExportError  # noqa: E402
from .switch import engine  # noqa: E402

__all__ = ["engine", "export", "export_with_report", "ExportResult", "ExportError", "suggest_dynamic_shapes"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
__signature__ = inspect.signature(export)    # inspect and IDEs see torch.export.export's parameters
