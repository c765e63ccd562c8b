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
  undefined, and Python's ``and``/``or`` as themselves; a divisor sympy
  cancelled out of the terms is kept as ``0*(0 // d)`` (a ``Defined`` marker as
  ``0*w``), which raises where it is zero.  An input that makes a guard
  undefined is rejected with the exception Python raises there
  (``ZeroDivisionError``) rather than an ``AssertionError``;
* sympy's order-independent ``Or`` (``formula``) as ``H(a) or H(b) or (a or b)``,
  where ``H(a)``, "``a`` holds", checks first that every node of ``a`` is
  defined (each row's ``defined`` column) and never raises: true where an
  operand holds, otherwise raising where one raises; ``And`` dually.
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
        if isinstance(f, F.Rel):
            return self.relation(f)
        word = " and " if isinstance(f, F.And) else " or "
        python = "(" + word.join(self.formula(a) for a in f.args) + ")"
        if f.ordered:
            return python
        # sympy's: decided by any operand that decides; where none does, the Python form raises or agrees
        if isinstance(f, F.Or):
            return "(" + " or ".join(self.holds(a) for a in f.args) + f" or {python})"
        return "(not (" + " or ".join(self.holds(F.neg(a)) for a in f.args) + f") and {python})"

    def holds(self, f: F.Formula) -> str:
        """Code that is true where ``f`` is defined and true, false elsewhere, and never raises."""
        if isinstance(f, F.Const):
            return self.formula(f)
        if isinstance(f, F.Rel):
            checks = self.defined(f)
            return f"({' and '.join(checks)} and {self.relation(f)})" if checks else self.relation(f)
        parts = [self.holds(a) for a in f.args]
        if isinstance(f, F.And) or not f.ordered:
            return "(" + (" and " if isinstance(f, F.And) else " or ").join(parts) + ")"
        # Python's ``a or b``: ``a`` holds, or ``a`` is false and ``b`` holds (and so on to the right)
        code = parts[-1]
        for a, part in zip(reversed(f.args[:-1]), reversed(parts[:-1])):
            code = f"({part} or ({self.holds(F.neg(a))} and {code}))"
        return code

    def defined(self, r: F.Rel) -> list[str]:
        """Checks, each safe to evaluate once the ones before it are true, that ``r`` evaluates: every
        node's ``defined`` column, innermost first, and every divisor nonzero."""
        checks: dict[str, None] = {}
        for side in (r.lhs, r.rhs, *sorted(r.divisors, key=sympy.default_sort_key)):
            for node in _innermost_first(side):
                if isinstance(node, (Symbol, FL.FloatConst)) or node.is_Number:
                    continue
                check = row_of(node).defined(*(self.term(a) for a in node.args))
                if check:
                    checks[f"({check})"] = None
            if side in r.divisors and not isinstance(side, FL.Defined):
                checks[f"({self.term(side)} != 0)"] = None
        return list(checks)

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


def _innermost_first(term: Expr) -> list[Expr]:
    """The distinct nodes of ``term``, each after all of its arguments."""
    order: list[Expr] = []
    seen: set[Expr] = set()
    stack = [(term, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((a, False) for a in node.args)
    return order
