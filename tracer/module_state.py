"""The plain attributes of a model's modules, kept to put back after the model ran again.

A forward pass may rebind attributes of its modules: Hugging Face Swin's
``set_shift_and_window_size`` sets ``self.window_size = min(input_resolution)``
and ``self.shift_size = 0`` when an input is small, and while tracing that
value is a SymInt of the trace's own shape environment.  torch.export runs the
model once, at the user's example; the region search runs it again at other
shapes (traces, and fake-tensor probes).  Each of those runs must start where
torch.export's run started, or it traces another model (a clamped window from
an earlier run, a symbol from a finished trace); and once the search is done
the model must be as torch.export would leave it.

What is kept is each module's ``__dict__`` as a shallow copy: rebinding an
attribute is undone, a new attribute is removed.  Parameters, buffers and
submodules stay as they are: their tables are the same objects (torch
restores what a trace does to parameter and buffer values itself).
"""
from __future__ import annotations

import torch

__all__ = ["ModuleState"]


class ModuleState:
    """The attributes of every module of ``model`` as they are now (nothing for a plain function)."""

    def __init__(self, model):
        modules = model.modules() if isinstance(model, torch.nn.Module) else ()
        self._saved = [(module, dict(vars(module))) for module in modules]

    def restore(self) -> None:
        """Rebind every attribute to its kept value and drop the attributes added since."""
        for module, attributes in self._saved:
            current = vars(module)
            for name in [n for n in current if n not in attributes]:
                del current[name]
            current.update(attributes)
