"""Which symbols derive from which inputs and which guards use them (a networkx graph).

Edges point from an origin to what it determines: an input dim to its
symbol, a symbol to the symbols that stand for it after a substitution
(``s1 == s0`` makes ``s0`` carry ``s1``'s input too) or that were derived
from it (``x % 8 == 0`` derives ``k`` with ``x = 8*k``), and symbols to the
guards and asserts that mention them.  Explanations ask it which input dims
a condition depends on.
"""
from __future__ import annotations

import networkx as nx
from sympy import Symbol

__all__ = ["DependencyGraph"]


class DependencyGraph:
    def __init__(self):
        self.g = nx.DiGraph()

    def add_symbol(self, sym: Symbol, input_path: str | None) -> None:
        self.g.add_node(("symbol", sym.name))
        if input_path is not None:
            self.g.add_edge(("input", input_path), ("symbol", sym.name))

    def add_derivation(self, origin: Symbol, derived: Symbol) -> None:
        self.g.add_edge(("symbol", origin.name), ("symbol", derived.name))

    def add_condition(self, kind: str, index: int, symbols) -> None:
        for sym in symbols:
            self.g.add_edge(("symbol", sym.name), (kind, index))

    def inputs_of(self, symbols) -> list[str]:
        """Input dims (their readable paths) that the given symbols depend on, sorted."""
        found = set()
        for sym in symbols:
            node = ("symbol", sym.name)
            if node not in self.g:
                continue
            for kind, name in nx.ancestors(self.g, node) | {node}:
                if kind == "input":
                    found.add(name)
        return sorted(found)
