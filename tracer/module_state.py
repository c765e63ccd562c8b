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
attribute is undone, a new attribute is removed.  The tables of submodules,
parameters and buffers are kept the same way, entry by entry: Hugging Face
BigBird swaps every layer's attention module for another when the sequence
is short (``set_attention_type``), and a trace there must not leave the
user's model with the swapped ones.  The objects themselves stay as they
are (torch restores what a trace does to parameter and buffer values).
"""
from __future__ import annotations

import torch

__all__ = ["ModuleState"]


class ModuleState:
    """The attributes of every module of ``model`` as they are now (nothing for a plain function)."""

    def __init__(self, model):
        modules = model.modules() if isinstance(model, torch.nn.Module) else ()
        self._saved = [(module, dict(vars(module)),
                        [(table, dict(table)) for table in _tables(module)]) for module in modules]

    def restore(self) -> None:
        """Rebind every attribute and table entry to its kept value and drop those added since."""
        for module, attributes, tables in self._saved:
            _put_back(vars(module), attributes)
            for table, entries in tables:
                _put_back(table, entries)


# the tables of nn.Module whose entries are its submodules, parameters and buffers
_TABLES = ("_modules", "_parameters", "_buffers")


def _tables(module: torch.nn.Module) -> list[dict]:
    return [table for table in (vars(module).get(name) for name in _TABLES) if isinstance(table, dict)]


def _put_back(current: dict, kept: dict) -> None:
    for name in [n for n in current if n not in kept]:
        del current[name]
    current.update(kept)
