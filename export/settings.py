"""The settings of one export in one frozen object: its defaults and checks in one place, handed down whole.

``shapeproof.export`` takes torch.export's keyword arguments and shapeproof's
own; every part of an export (the first trace, the region search, the traces
side by side, the narrowing) reads them from one ``ExportSettings``, so a new
setting is a field here and a read where it matters, not a parameter on
every signature in between.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from shapeproof.solver import DEFAULT_TIMEOUT
from shapeproof.tracer import strategy_named

__all__ = ["ExportSettings", "EXECUTORS"]

EXECUTORS = ("fork", "ray")      # where a search's other traces run side by side (``search/trace_pool.py``)


@dataclass(frozen=True)
class ExportSettings:
    """How one export runs.  ``strategy`` is a solver strategy's name (``"torch"`` is made the strategy
    itself); ``timeout`` bounds each shape question; the rest are ``shapeproof.export``'s parameters, and
    ``started`` is when the export began (``time.perf_counter()``), from which ``time_budget`` counts."""

    strategy: Any = "cascade"
    timeout: float = DEFAULT_TIMEOUT
    split: bool = False
    max_regions: int = 8
    time_budget: float | None = None
    progress: bool = False
    workers: int | None = None          # None: the executor's default, once a search traces side by side
    executor: str = "fork"
    preserve_module_call_signature: tuple[str, ...] = ()
    prefer_deferred_runtime_asserts_over_guards: bool = False
    cond_branches: bool = True          # an ``if`` on sizes whose sides differ runs as one torch.cond
    started: float = field(default_factory=time.perf_counter, compare=False)

    def __post_init__(self):
        if self.executor not in EXECUTORS:
            choices = ", ".join(map(repr, EXECUTORS))
            raise ValueError(f"executor must be one of {choices}, not {self.executor!r}")
        if type(self.max_regions) is not int or self.max_regions < 1:
            raise ValueError(f"max_regions must be a positive int, not {self.max_regions!r}")
        if self.time_budget is not None and not self.time_budget >= 0:
            raise ValueError(f"time_budget must be None or seconds >= 0, not {self.time_budget!r}")
        object.__setattr__(self, "strategy", strategy_named(self.strategy))
        if self.workers is not None:
            object.__setattr__(self, "workers", max(1, self.workers))
        object.__setattr__(self, "preserve_module_call_signature", tuple(self.preserve_module_call_signature))

    @property
    def options(self) -> dict:
        """torch.export.export's own keyword arguments, passed through to every trace."""
        return dict(preserve_module_call_signature=self.preserve_module_call_signature,
                    prefer_deferred_runtime_asserts_over_guards=self.prefer_deferred_runtime_asserts_over_guards)

    @property
    def stop_at(self) -> float | None:
        """When the caller's budget is spent (a ``time.perf_counter()`` value); None without one."""
        return None if self.time_budget is None else self.started + self.time_budget
