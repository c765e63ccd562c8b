"""Conditions as Python code for torch's input checks (``ExportedProgram._guards_code``).

torch 2.13 evaluates that code in ``torch/export/_unlift.py``: a function body
``torch._assert(<code>, ...)`` exec'd in a namespace of ``SYMPY_INTERP``
(``math``, ``torch`` and two helpers), ``math``, ``inf`` and the builtins.
So every node prints to plain Python over those names, with the value the
solver gives it (``evaluate.py``):

* ``//``, ``%``, ``min``, ``max``, ``+``, ``*``, ``**`` as themselves;
  ``CeilDiv(a, b)`` as ``-((-a) // b)``; ``TruncDiv(a, b)`` with ``abs`` and
  ``//`` (``int(a / b)`` would round through a double);
* float nodes as the Python that defines them (``float``, ``/``, ``math.floor``,
  ``math.ceil``, ``int``, float literals by ``repr``, which reads back exactly);
* a relation as ``lhs op rhs``, so it raises exactly where the solver calls it
  undefined, and ``and``/``or`` evaluate left to right as the solver's logic
  does; a divisor sympy cancelled out of the terms is kept as ``0*(0 // d)``
  (a ``Defined`` marker as ``0*w``), which raises where it is zero.  An input
  that makes a guard undefined is rejected with the exception Python raises
  there (``ZeroDivisionError``) rather than an ``AssertionError``.
"""
from __future__ import annotations

from typing import Mapping

import sympy
from sympy import Expr, Symbol

from . import floats as FL
from . import formula as F
from .nodes import Kind, row_of
from .terms import divisors

__all__ = ["guard_code"]


def guard_code(formula: F.Formula, sources: Mapping[Symbol, str]) -> str:
    """Python text of ``formula`` with each symbol read from ``sources[symbol]`` (Python over torch's
    inputs)."""
    missing = formula.free_symbols - set(sources)
    if missing:
        raise ValueError(f"no source for {sorted(s.name for s in missing)}")
    return _Printer(sources).formula(formula)


class _Printer:
    def __init__(self, sources: Mapping[Symbol, str]):
        self.sources = sources

    def formula(self, f: F.Formula) -> str:
        if isinstance(f, F.Const):
            return "True" if f.value else "False"
        if isinstance(f, F.And):
            return "(" + " and ".join(self.formula(a) for a in f.args) + ")"
        if isinstance(f, F.Or):
            return "(" + " or ".join(self.formula(a) for a in f.args) + ")"
        return self.relation(f)

    def relation(self, r: F.Rel) -> str:
        hidden = sorted(r.divisors - divisors((r.lhs, r.rhs)), key=sympy.default_sort_key)
        checks = "".join(f" + 0*{self.term(d.args[0])}" if isinstance(d, FL.Defined)
                         else f" + 0*(0 // {self.term(d)})"
                         for d in hidden)
        if isinstance(r.lhs, FL.COMPARISONS) and r.rhs == 0 and r.op in ("==", "!="):
            core = self.comparison(r.lhs, checks)
            return core if r.op == "!=" else f"(not {core})"
        return f"({self.term(r.lhs)}{checks} {r.op} {self.term(r.rhs)})"

    def comparison(self, node: Expr, checks: str = "") -> str:
        a, b = node.args
        return f"({self.term(a)}{checks} {row_of(node).infix} {self.term(b)})"

    def term(self, t: Expr) -> str:
        """The row's ``code`` column over the code of the arguments."""
        if isinstance(t, Symbol):
            return f"({self.sources[t]})"
        if t.is_Integer:
            return f"({int(t)})" if t < 0 else str(int(t))
        row = row_of(t)
        if row.kind is Kind.FLOAT_CONST:
            return row.code(t.value)
        return row.code(*(self.term(a) for a in t.args))
