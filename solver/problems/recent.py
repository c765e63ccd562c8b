"""A few values made for recent keys, least recently used dropped first; thread-safe.

Strategies keep what one trace's questions share (the evaluators of a box, the
reduction of its facts, its normal forms) between those questions.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, Iterator, TypeVar

__all__ = ["Recent"]

V = TypeVar("V")


class Recent(Generic[V]):
    """At most ``size`` values by key; ``make`` runs outside the lock (it may take long), so two callers
    may both make a missing key's value, and either is kept."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def get_or_make(self, key: Hashable, make: Callable[[], V]) -> V:
        found = self.get(key)
        if found is None:
            found = make()
            self.put(key, found)
        return found

    def drop_oldest_while(self, too_much: Callable[[list[V]], bool]) -> None:
        """Drop the least recently used values while ``too_much`` of those left says so."""
        with self._lock:
            while self._items and too_much(list(self._items.values())):
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def values(self) -> list[V]:
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[V]:
        return iter(self.values())
