"""Integer shape terms on top of sympy, with Python's exact integer semantics.

A term is a sympy expression built from integer symbols, integers, ``+``,
``*``, ``**`` (natural exponents) and the nodes of ``nodes.py`` (``//``, ``%``,
ceil/trunc division, min/max, and float nodes inside rounding and comparison
wrappers).  Division by zero is *undefined*: the node stays symbolic, and
formulas record the divisor so that a guard is only proven where it is also
defined (see ``formula.Rel.divisors``).  What each node means lives in its row
of ``nodes.TABLE``; this module has the helpers every layer uses on terms.
"""
from __future__ import annotations

from typing import Iterable

import sympy
from sympy import Expr, Symbol
from sympy.printing.str import StrPrinter

from .nodes import (
    DIVISION_NODES, DOMAIN_NODES, TABLE, CeilDiv, FloatTerm, FloorDiv, Max, Min, Mod, TruncDiv, _Wrapper,
    as_term, iter_nodes, trunc_div,
)

__all__ = [
    "symbol", "as_term", "is_term", "FloorDiv", "Mod", "CeilDiv", "TruncDiv", "Min", "Max",
    "DIVISION_NODES", "divisors", "constant_divisors", "term_str", "trunc_div", "iter_nodes", "expanded",
    "symbols_in", "has_floats",
]

# expanded subterms kept across calls (all of them dropped at once past this many)
_EXPANDED_KEPT = 50_000
_expanded: dict[Expr, Expr] = {}
_symbols: dict[Expr, frozenset] = {}


def has_floats(terms) -> bool:
    """Whether any of ``terms`` contains a float node."""
    return any(isinstance(n, (FloatTerm, _Wrapper)) for t in terms for n in iter_nodes(t))


def symbol(name: str) -> Symbol:
    """The integer symbol called ``name`` (ranges live elsewhere, not in assumptions)."""
    return Symbol(name, integer=True)


def expanded(term: Expr) -> Expr:
    """``sympy.expand(term)``, bottom-up, each distinct subterm expanded once across calls.

    Deep expansion re-walks every nested ``//`` argument on each call; the
    questions of a Swin trace share those subterms, and expanding them again
    was 70% of the interval stage's time (hf_swinv2 traced at 53 x 53).
    Expansion is an identity whatever the ranges, so the results are shared by
    every caller.
    """
    if isinstance(term, int):                    # a substitution that replaced the whole term
        return sympy.Integer(term)
    if term.is_Atom:
        return term
    found = _expanded.get(term)
    if found is None:
        found = sympy.expand(term.func(*(expanded(a) for a in term.args)), deep=False)
        if len(_expanded) >= _EXPANDED_KEPT:
            _expanded.clear()
        _expanded[term] = found
    return found


def symbols_in(term: Expr) -> frozenset[Symbol]:
    """``term.free_symbols``, each distinct subterm's remembered across calls.

    sympy walks the whole tree on every call; a Swin trace builds thousands of
    relations over the same nested padded sizes.  A class with its own rule
    (a symbol, anything binding variables) answers for itself.
    """
    if term.is_Atom or type(term).free_symbols is not sympy.Basic.free_symbols:
        return frozenset(term.free_symbols)
    found = _symbols.get(term)
    if found is None:
        found = frozenset().union(*(symbols_in(a) for a in term.args))
        if len(_symbols) >= _EXPANDED_KEPT:
            _symbols.clear()
        _symbols[term] = found
    return found


def is_term(value) -> bool:
    return isinstance(value, Expr) and value.is_integer is True


def divisors(terms: Iterable[Expr]) -> frozenset[Expr]:
    """The terms that must be nonzero for ``terms`` to be defined: each non-constant divisor, and the
    ``domain`` of every other node defined on part of the integers (``nodes.py``)."""
    found = set()
    for term in terms:
        for node in iter_nodes(term):
            domain = TABLE[type(node)].domain if isinstance(node, DOMAIN_NODES) else None
            if domain is not None:
                d = domain(*node.args)
                if not (d.is_Integer and d != 0):
                    found.add(d)
    return frozenset(found)


def constant_divisors(terms: Iterable[Expr]) -> frozenset[int]:
    """The constant divisors (absolute values above 1) of the division nodes in ``terms``: the periods with
    which their values repeat (``L // 320`` steps every 320)."""
    found = set()
    for term in terms:
        for node in iter_nodes(term):
            if isinstance(node, DIVISION_NODES) and node.args[1].is_Integer and abs(node.args[1]) > 1:
                found.add(abs(int(node.args[1])))
    return frozenset(found)


class _TermPrinter(StrPrinter):
    def _print_Mul(self, expr):
        # sympy prints -1*(T + a)*(a + b) as "-(T + a)*(a + b)", which Python reads as
        # ((-T - a))*(a + b): the same value but another term.  "-((T + a)*(a + b))" reads back exactly.
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1 and isinstance(rest, sympy.Mul) and any(isinstance(a, sympy.Add) for a in rest.args):
            return f"-({self._print(rest)})"
        return super()._print_Mul(expr)


_PRINTER = _TermPrinter({"order": "none"})


def term_str(term: Expr) -> str:
    """Python-syntax text of a term that ``shapeproof.solver.language.parse`` reads back."""
    return _PRINTER.doprint(term)
