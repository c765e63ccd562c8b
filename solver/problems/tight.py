"""Tighter interval bounds for normalized terms, by three exact reformulations.

Plain interval arithmetic treats every occurrence of an atom as independent,
so ``T - 16*(T // 16)`` gets a wide interval although it is ``T % 16``.
``TightBounds.tight`` intersects the plain interval with:

* *Mod refolding*: ``C*(x // b) + rest`` where ``alpha = -C/b`` is an integer
  polynomial is ``alpha*(x % b) + (rest - alpha*x)``; ``x % b`` lies in
  ``[0, b-1]`` (for ``b > 0``).
* *Euclidean relaxation* for a constant divisor ``b > 0`` and constant
  coefficient ``C``: ``x // b == (x - r)/b`` with ``r`` in ``[0, b-1]``, so
  ``b*e == C*x - C*r + b*rest`` is linear in ``x`` and bounded tightly; this
  is what shows ``H // 2 != H`` for ``H >= 4``.
* *Horner evaluation* of a polynomial in one atom, which keeps ``-2*q**2 + 2*q - 1``
  negative where the expanded form's interval straddles zero.

Each is an identity (or a relaxation containing every true value), so the
intersection is sound.  Depth, steps and time are bounded; past them the plain
interval stands.
"""
from __future__ import annotations

import sympy
from sympy import Expr

from .bounds import Bounds
from ..language.interval_math import Interval, point_interval
from ..language.interval_math import add as _add, mod as _mod, times as _times
from .deadline import Deadline, OutOfTime
from .rules import exact_quotient, linear_coefficient
from ..language.terms import FloorDiv

__all__ = ["TightBounds"]

_MAX_DEPTH = 4
# Each step may branch on every ``//`` atom, so the work grows as atoms**depth; a sum of forty
# quotients would take hours.  Past this many sub-bounds per ``tight`` call the plain interval
# (always sound) stands in.
_MAX_STEPS = 256
# Each step also expands the whole term, so terms with more quotients than this keep the plain interval.
_MAX_ATOMS = 8


def _intersect(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return a if b is None else b
    return Interval(max(a.lo, b.lo), min(a.hi, b.hi))


def _scaled_down(iv: Interval, b: int) -> Interval:
    """Bounds of an integer ``e`` from bounds of ``b*e`` (``b > 0``)."""
    lo = iv.lo if iv.lo in (-float("inf"),) else -((-iv.lo) // b)
    hi = iv.hi if iv.hi in (float("inf"),) else iv.hi // b
    return Interval(lo, hi)


class TightBounds(Bounds):
    """``Bounds`` whose ``tight`` also tries refolding, relaxation and Horner form."""

    def __init__(self, ranges, deadline: Deadline | None = None, strict: bool = False):
        super().__init__(ranges)
        self._deadline = deadline
        self._strict = strict       # raise OutOfTime at the deadline instead of keeping the plain interval
        self._tight: dict[Expr, Interval | None] = {}
        self._steps_left = 0

    def tight(self, term: Expr) -> Interval | None:
        if term.is_Integer:
            return point_interval(int(term))
        if term not in self._tight:
            self._steps_left = _MAX_STEPS
            self._tight[term] = self._tight_bound(term, 0)
        return self._tight[term]

    def _tight_bound(self, e: Expr, depth: int) -> Interval | None:
        best = self(e)
        self._steps_left -= 1
        if best is None or depth >= _MAX_DEPTH or self._exhausted() or not isinstance(e, sympy.Add):
            return best
        best = _intersect(best, self._horner(e))
        size = len(e.args)
        atoms = e.atoms(FloorDiv)
        if len(atoms) > _MAX_ATOMS:
            return best
        for atom in sorted(atoms, key=sympy.default_sort_key):
            split = linear_coefficient(e, atom)
            if split is None:
                continue
            coeff, rest = split
            x, b = atom.args
            best = _intersect(best, self._refold(coeff, rest, x, b, size, depth))
            best = _intersect(best, self._relax(coeff, rest, x, b, depth))
        return best

    def _exhausted(self) -> bool:
        if self._deadline is not None and self._deadline.expired():
            if self._strict:
                raise OutOfTime
            return True
        return self._steps_left < 0

    def _refold(self, coeff, rest, x, b, size, depth) -> Interval | None:
        alpha = exact_quotient(sympy.expand(-coeff), b)
        if alpha is None:
            return None
        remainder = sympy.expand(rest - alpha * x)
        if len(sympy.Add.make_args(remainder)) >= size:
            return None
        ix, ib, ia = self(x), self(b), self(alpha)
        rest_bound = self._tight_bound(remainder, depth + 1)
        if ix is None or ib is None or ia is None or rest_bound is None:
            return None
        mod_bound = _mod(ix, ib)
        return None if mod_bound is None else _add(_times(ia, mod_bound), rest_bound)

    def _relax(self, coeff, rest, x, b, depth) -> Interval | None:
        if not (b.is_Integer and b > 1 and coeff.is_Integer):
            return None
        c, k = int(coeff), int(b)
        scaled = self._tight_bound(sympy.expand(c * x + k * rest), depth + 1)
        if scaled is None:
            return None
        remainder = Interval(-c * (k - 1), 0) if c > 0 else Interval(0, -c * (k - 1))  # -c*r, r in [0, k-1]
        return _scaled_down(_add(scaled, remainder), k)

    def _horner(self, e: Expr) -> Interval | None:
        """Interval by Horner's scheme when ``e`` is a polynomial of degree >= 2 in a single atom."""
        gens = {a for t in e.args for a in sympy.Mul.make_args(t) if not a.is_Number}
        bases = {g.args[0] if isinstance(g, sympy.Pow) else g for g in gens}
        if len(bases) != 1:
            return None
        (atom,) = bases
        try:
            poly = sympy.Poly(e, atom)
        except sympy.PolynomialError:
            return None
        if poly.degree() < 2 or not all(c.is_Integer for c in poly.all_coeffs()):
            return None
        ia = self(atom)
        if ia is None:
            return None
        out = point_interval(0)
        for coeff in poly.all_coeffs():
            out = _add(_times(out, ia), point_interval(int(coeff)))
        return out
