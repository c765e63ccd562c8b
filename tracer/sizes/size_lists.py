"""Python lists over a size: ``list(range(S))`` as progressions whose length stays symbolic.

Funnel builds its relative positions from Python lists so that the
``arange`` they bound has sizes Python knows (``pos = list(range(seq_len))``;
pooled ``[1 - 2**b] + pos[1:-1][::2]``; then ``len``, ``[0]``, ``[-1]``).
Making the list asks ``S`` for a concrete length, which specializes it
(torch: "S only works as 16").  Yet such a list is arithmetic progressions
end to end: in the user's modules during an engine trace, ``range`` over a
size whose length the ranges do not fix (and no loop rolls) is a
``SizeRange``, and ``list`` of it a ``SizeList``: runs ``(start, step,
length)`` of SymInts, concatenated.  Its length (``len``, the user modules'
name for it, ``user_globals``), indexing with an int, slicing with int bounds
(any positive step over one run, step 1 over several), ``+`` with lists and
``torch.tensor`` of it (an ``arange`` per run, ``int_arguments``) keep the
sizes symbolic, in Python's own semantics: an index out of range raises
``IndexError`` wherever it is, a slice clamps its bounds.  Where a decision
depends on the sizes (is index 1 within the first run?), the engine proves
it over the ranges or records a guard, as for any size question.  Anything
else a list or range does (iteration, mutation, comparison) turns it into
Python's own, element by element, which asks the length for its value:
torch's specialization, as before.
"""
from __future__ import annotations

import builtins
from typing import Any, NamedTuple

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

__all__ = ["SizeList", "SizeRange", "size_length", "as_tensor"]

_list, _range, _len = builtins.list, builtins.range, builtins.len


class Run(NamedTuple):
    """``start, start + step, ...``: ``length`` elements (each a SymInt or int)."""

    start: Any
    step: Any
    length: Any

    def at(self, i):
        return self.start + i * self.step if not (isinstance(i, int) and i == 0) else self.start


def _nonnegative(n):
    return n if statically_known_true(n >= 0) else torch.sym_max(n, 0)


def _sum(values):
    total = 0
    for v in values:
        total = total + v
    return total


class _PythonOtherwise:
    """What only Python's own ``range`` or ``list`` answers: asked of ``python()``, which makes it."""

    def python(self):
        raise NotImplementedError

    def __len__(self):
        return _len(self.python())

    def __iter__(self):
        return iter(self.python())

    def __reversed__(self):
        return reversed(self.python())

    def __contains__(self, value):
        return value in self.python()

    def __getattr__(self, name):                       # append, extend, index, count, sort, copy, ...
        if name.startswith("_"):                       # not set yet (a copy made without __init__)
            raise AttributeError(name)
        return getattr(self.python(), name)


class SizeRange(_PythonOtherwise):
    """``range(start, stop, step)`` over sizes whose length is not fixed: a ``range`` as far as its
    length, ends, indexing and ``list`` of it go; Python's ``range`` for anything else."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step
        self.run = Run(start, step, _nonnegative(-((start - stop) // step)))

    def as_list(self) -> "SizeList":
        return SizeList([self.run])

    def python(self) -> range:
        return _range(self.start, self.stop, self.step)     # asks each size for its value

    def __getitem__(self, index):
        return self.as_list()[index]

    def __eq__(self, other):                           # ranges compare as the sequences they are
        return self.python() == (other.python() if isinstance(other, SizeRange) else other)

    def __hash__(self):
        return hash(self.python())

    def __repr__(self):
        return f"range({self.start}, {self.stop}, {self.step})"


class SizeList(_PythonOtherwise):
    """A list that is runs of symbolic progressions (see the module).  Until something only Python's own
    list can answer is asked, it is those runs; from then on it is that list (``_items``)."""

    def __init__(self, runs):
        self._runs: list[Run] = _list(runs)
        self._items: list | None = None

    @staticmethod
    def of(values) -> "SizeList":
        if isinstance(values, SizeList):
            return SizeList(values._runs) if values._items is None else SizeList.of(values._items)
        if isinstance(values, SizeRange):
            return values.as_list()
        return SizeList([Run(v, 0, 1) for v in values])

    # -- what stays symbolic
    def length(self):
        return _len(self._items) if self._items is not None else _sum(r.length for r in self._runs)

    def __getitem__(self, index):
        if self._items is not None:
            return self._items[index]
        if isinstance(index, int) and not isinstance(index, bool):
            return self._at(index)
        if isinstance(index, slice) and all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                            for v in (index.start, index.stop, index.step)):
            sliced = self._sliced(index)
            if sliced is not None:
                return sliced
        return self.python()[index]

    def __add__(self, other):
        if isinstance(other, (list, SizeList)):
            return SizeList(self.runs() + SizeList.of(other).runs())
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, list):
            return SizeList(SizeList.of(other).runs() + self.runs())
        return NotImplemented

    def runs(self) -> list[Run]:
        return _list(self._runs) if self._items is None else [Run(v, 0, 1) for v in self._items]

    def _at(self, index: int):
        runs = self._runs if index >= 0 else [Run(r.at(r.length - 1), -r.step, r.length) for r in
                                              reversed(self._runs)]
        return _element(runs, index if index >= 0 else -index - 1)

    def _sliced(self, index: slice) -> "SizeList | None":
        step = 1 if index.step is None else index.step
        if step <= 0:
            return None
        total = self.length()
        low = self._bound(index.start, 0, total)
        high = self._bound(index.stop, total, total)
        count = _nonnegative((high - low + step - 1) // step)
        if _len(self._runs) == 1:
            (run,) = self._runs
            return SizeList([Run(run.at(low), run.step * step, count)])
        if step != 1:
            return None
        return SizeList(_taken(_dropped(self._runs, low), count))

    @staticmethod
    def _bound(value, missing, total):
        """A slice bound in ``[0, total]`` as Python clamps it."""
        if value is None:
            return missing
        if value >= 0:
            return value if statically_known_true(total >= value) else torch.sym_min(value, total)
        return total + value if statically_known_true(total + value >= 0) else torch.sym_max(total + value, 0)

    # -- Python's own list, for everything else
    def python(self) -> list:
        if self._items is None:
            self._items = [run.at(i) for run in self._runs for i in _range(run.length)]
        return self._items

    def __eq__(self, other):
        return self.python() == (other.python() if isinstance(other, SizeList) else other)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self):
        return bool(self.length() > 0) if self._items is None else bool(self._items)

    def __setitem__(self, index, value):
        self.python()[index] = value

    def __delitem__(self, index):
        del self.python()[index]

    def __iadd__(self, other):
        self.python().extend(other)
        return self

    def __mul__(self, times):
        return self.python() * times

    __rmul__ = __mul__

    def __repr__(self):
        inner = " + ".join(f"[{r.start}, {r.start} + {r.step}, ... ({r.length})]" for r in self._runs)
        return f"SizeList({inner})" if self._items is None else repr(self._items)


def _element(runs: list[Run], index):
    """Element ``index`` (from 0) of ``runs``.  Which run holds it is a size question; where the engine
    cannot tell without a guard and a later run may hold it, the element is both candidates blended by
    the 0/1 size ``min(max(length - index, 0), 1)`` (``pos[-1]`` of ``[c] + pos[1:][::2]`` is ``c`` where
    the progression is empty); past the last run Python raises ``IndexError``, so there it is asked."""
    run, rest = runs[0], runs[1:]
    if rest and not (statically_known_true(index < run.length) or statically_known_true(index >= run.length)):
        inside = torch.sym_min(torch.sym_max(run.length - index, 0), 1)
        return run.at(index) * inside + _element(rest, index - run.length) * (1 - inside)
    if index < run.length:                     # proven over the ranges, or a guard
        return run.at(index)
    if not rest:
        raise IndexError("list index out of range")
    return _element(rest, index - run.length)


def _dropped(runs: list[Run], count) -> list[Run]:
    """``runs`` without their first ``count`` elements (``count`` at most their length)."""
    for k, run in enumerate(runs):
        if statically_known_true(count == 0):    # nothing left to drop: no question on this run's length
            return runs[k:]
        if count < run.length:
            return [Run(run.at(count), run.step, run.length - count)] + runs[k + 1:]
        count = count - run.length
    return []


def _taken(runs: list[Run], count) -> list[Run]:
    """The first ``count`` elements of ``runs`` (``count`` at most their length)."""
    kept = []
    for run in runs:              # no test of count <= 0: a run of length 0 is empty, and one less to decide
        if count <= run.length:
            kept.append(Run(run.start, run.step, count))
            break
        kept.append(run)
        count = count - run.length
    return kept


def size_length(value):
    """``len`` as the user's modules see it during an engine trace: a SymInt for a ``SizeList`` or
    ``SizeRange``, Python's ``len`` for everything else."""
    if isinstance(value, SizeList):
        return value.length()
    if isinstance(value, SizeRange):
        return value.run.length
    return _len(value)


def as_tensor(values: SizeList, dtype=None, device=None) -> torch.Tensor:
    """``torch.tensor(values)``: an ``arange`` per run, concatenated (int64 unless ``dtype`` says)."""
    parts = [run.start + run.step * torch.arange(run.length, device=device) for run in values.runs()]
    tensor = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=device)
    return tensor if dtype is None else tensor.to(dtype)
