"""What share of the declared ranges a program's input checks accept, and when that is an error.

A program checks on its inputs the guards torch.export keeps as checks
(relations between named dims, roots of derived dims no input carries) and
those the engine could not decide.  None of them passes silently: the export
warns with the share of the declared sizes they accept, counted exactly over
the declared box (``holding_grid``) where it is bounded and small enough.

Rejecting most of the declared sizes is an error only where torch.export
raises too and the rejected sizes are ones the model runs at.  torch raises
where a check narrows one named dim by itself (some size of it passes with
no sizes of the others: torch's per-dim guard); a check over several dims
that every size of each passes with some others (``N <= M``) torch keeps, and
so does shapeproof.  Where the model itself fails at the rejected sizes (a
token count that is no square, reshaped into a square grid), the checks
refuse nothing the model runs at: the program is exported, and the warning
says so with the share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sympy import Symbol

from shapeproof import solver as F
from shapeproof.solver import holding_grid
from shapeproof.tracer.probe import failure_at

from .checks import COUNTED, accepted_sizes
from .inputs import input_sizes, inputs_at
from .traces import Trace

__all__ = ["Acceptance", "judge", "share_note", "bounded_checks", "MOST"]

# checks that accept less than this share of the declared sizes reject most of them
MOST = 0.5
_PROBES = 3         # rejected sizes the model is run at (fake tensors, static shapes: milliseconds each)


@dataclass
class Acceptance:
    """What a program's checks over named dims accept of the declared box."""

    predicate: F.Formula               # the checks, over canonical variables with bounded declared ranges
    grid: Any                          # solver.enumerate.Grid over ``predicate``'s variables
    narrowed: list[Symbol]             # variables some size of which no sizes of the others pass
    model_fails: list[tuple[dict, str]]     # rejected points probed where the model fails, with why
    model_runs: dict | None            # a rejected point where the model runs (or the probe cannot say)
    text: str                          # what the checks accept, as messages say it (``accepted_sizes``)

    @property
    def share(self) -> float:
        return self.grid.share

    @property
    def refuses_valid_sizes(self) -> bool:
        """Whether this is an error: most sizes rejected, a named dim narrowed by itself (torch.export
        raises), and the model runs at a size the checks reject."""
        return self.share < MOST and bool(self.narrowed) and self.model_runs is not None

    def notes(self, with_share: bool) -> list[str]:
        """The warnings: the share of all the checks together (``with_share``: where no other warning
        counts them), and that the model fails at the sizes they reject, where it does."""
        notes = [f"the program's input checks together accept {self.text} of the declared sizes"
                 ] if with_share else []
        if self.model_fails and self.model_runs is None:
            point, why = self.model_fails[0]
            notes.append("the sizes the program's input checks reject are sizes the model fails at too (run "
                         f"at {', '.join(f'{k} = {v}' for k, v in point.items())}: {why})")
        return notes


def bounded_checks(predicate: F.Formula, box: dict) -> F.Formula | None:
    """The conjuncts of ``predicate`` over variables whose ranges in ``box`` are bounded (named dims)."""
    parts = predicate.args if isinstance(predicate, F.And) and predicate.ordered else (predicate,)
    kept = [p for p in parts if p.free_symbols and all(
        s in box and None not in box[s] for s in p.free_symbols)]
    return F.conj(*kept) if kept else None


def judge(model, args: tuple, kwargs: dict | None, first: Trace, predicate: F.Formula | None
          ) -> Acceptance | None:
    """How much of the declared box ``predicate`` (the program's checks, canonical variables) accepts; None
    where it rejects nothing or cannot be counted."""
    if predicate is None:
        return None
    box = first.declared
    checks = bounded_checks(predicate, box)
    grid = None if checks is None else holding_grid(checks, box, max_points=COUNTED)
    if checks is None or grid is None or grid.mask.all():
        return None
    narrowed = [s for k, s in enumerate(grid.symbols) if not _passing_values(grid, k).all()]
    fails: list[tuple[dict, str]] = []
    runs = None
    if grid.share < MOST and narrowed:
        for point in _rejected_points(grid, narrowed, first.point):
            first.started_from.restore()
            try:
                inputs = inputs_at(model, args, kwargs, input_sizes(first.sizes, {**first.point, **point}))
            except (OSError, MemoryError, OverflowError):
                continue
            failure = failure_at(model, *inputs)
            if failure is None:
                runs = point
                break
            fails.append((point, f"{type(failure).__name__}: {(str(failure).splitlines() or [''])[0][:200]}"))
    return Acceptance(checks, grid, narrowed, fails, runs, accepted_sizes(checks, box) or "")


def _passing_values(grid, k: int) -> np.ndarray:
    """Per value of ``grid.symbols[k]``: whether some point with it passes."""
    return grid.mask.any(axis=tuple(a for a in range(grid.mask.ndim) if a != k))


def _rejected_points(grid, narrowed: list[Symbol], example: dict[str, int]) -> list[dict[str, int]]:
    """Up to ``_PROBES`` sizes of narrowed dims that no sizes of the others pass, nearest the example first
    (the other dims keep the example's sizes)."""
    points = []
    for s in narrowed:
        k = grid.symbols.index(s)
        values = grid.lows[k] + np.flatnonzero(~_passing_values(grid, k))
        at = example.get(s.name, grid.lows[k])
        for v in sorted(values.tolist(), key=lambda v: (abs(v - at), v))[:_PROBES]:
            points.append({s.name: int(v)})
    return sorted(points, key=lambda p: abs(next(iter(p.values())) - example.get(next(iter(p)), 0)))[:_PROBES]


def share_note(acceptance: Acceptance | None, with_share: bool) -> list[str]:
    return [] if acceptance is None else acceptance.notes(with_share)

