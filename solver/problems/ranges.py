"""What value-range bounds say of a question: facts that narrow the box, relations that hold everywhere or
nowhere in it.

Facts narrow a box by propagating linear bounds (``L >= 2*S`` raises the least
``L`` to twice the least ``S``, ``tighten``).  A relation holds everywhere when
the interval of ``lhs - rhs`` satisfies it, every divisor's interval excludes
zero and each float node raises nowhere in the box (``Bounds.evaluates``,
from the enclosures of float terms), and nowhere when the interval never
satisfies it (``box_truth``).  The ``interval`` strategy is these alone; the
others and the float rewriting use them to narrow a box first.
"""
from __future__ import annotations

from typing import Mapping

import sympy
from sympy import Symbol

from ..language import formula as F
from .bounds import INF, Bounds, Interval
from ..language.terms import expanded

__all__ = ["tighten", "box_truth", "relation_truth"]

_ALWAYS = {
    "==": lambda i: i.lo == 0 and i.hi == 0, "!=": lambda i: i.lo > 0 or i.hi < 0,
    "<": lambda i: i.hi < 0, "<=": lambda i: i.hi <= 0, ">": lambda i: i.lo > 0, ">=": lambda i: i.lo >= 0,
}
_NEVER = {op: _ALWAYS[F.NEGATED[op]] for op in _ALWAYS}


def relation_truth(r: F.Rel, bounds: Bounds) -> tuple[bool, bool]:
    """(holds everywhere, holds nowhere) for one relation over the box.  A relation with a float node holds
    everywhere only where the enclosures show that no float node raises (``Bounds.evaluates``)."""
    diff = bounds.tight(expanded(r.lhs - r.rhs))
    if diff is None or any(_zero_or_undefined(bounds(d)) for d in r.divisors):
        return False, True
    return _defined(r, bounds) and _ALWAYS[r.op](diff), _NEVER[r.op](diff)


def _defined(r: F.Rel, bounds: Bounds) -> bool:
    """Whether ``r`` is defined at every point of the box: its divisors nonzero, and its float nodes raising
    nowhere (``Bounds.evaluates``)."""
    return all(bounds.nonzero(d) for d in r.divisors) and (
        not r.has_floats or all(bounds.evaluates(t) for t in (r.lhs, r.rhs, *r.divisors)))


def _zero_or_undefined(b) -> bool:
    """A divisor that is 0 or undefined wherever it is defined: the relation is undefined everywhere."""
    return b is None or (b.lo == 0 and b.hi == 0)


def box_truth(f: F.Formula, bounds: Bounds) -> tuple[bool, bool]:
    """(holds at every point of the box, holds at no point), in each connective's meaning."""
    if isinstance(f, F.Const):
        return f.value, not f.value
    if isinstance(f, F.Rel):
        return relation_truth(f, bounds)
    parts = [box_truth(a, bounds) for a in f.args]
    if isinstance(f, F.And):
        return all(p[0] for p in parts), any(p[1] for p in parts)
    if not f.ordered:               # sympy's ``Or`` holds wherever one of its operands does
        return any(p[0] for p in parts), all(p[1] for p in parts)
    # ``a or b`` holds everywhere if ``b`` does and ``a`` never raises (Python evaluates ``a`` first)
    always = False
    for a, (holds_all, _) in zip(f.args, parts):
        if holds_all:
            always = True
            break
        if not _defined_everywhere(a, bounds):
            break
    return always, all(p[1] for p in parts)


def _defined_everywhere(f: F.Formula, bounds: Bounds) -> bool:
    return all(_defined(r, bounds) for r in F.relations(f))


def _linear_parts(diff: sympy.Expr) -> list[tuple[Symbol, int, sympy.Expr]]:
    """(s, a, rest) for each term ``a*s`` of ``diff`` with ``s`` a symbol."""
    out = []
    for term in sympy.Add.make_args(diff):
        coeff, rest = term.as_coeff_Mul()
        if isinstance(rest, Symbol) and coeff.is_Integer and coeff != 0:
            out.append((rest, int(coeff), diff - term))
    return out


def _ceil_div(a, b) -> float:
    return -((-a) // b)


def tighten(ranges: Mapping[Symbol, tuple], facts, rounds: int = 3) -> dict[Symbol, tuple] | None:
    """Narrow ``ranges`` with the linear bounds the facts imply; None if no point remains."""
    box = {s: Interval(-INF if lo is None else lo, INF if hi is None else hi)
           for s, (lo, hi) in ranges.items()}
    rels = [r for fact in facts for r in _conjuncts(fact)]
    for _ in range(rounds):
        changed = False
        for r in rels:
            diff = expanded(r.lhs - r.rhs)
            for sym, a, rest in _linear_parts(diff):
                if sym not in box:
                    continue
                rb = Bounds({s: (_end(i.lo), _end(i.hi)) for s, i in box.items()})(rest)
                if rb is None:
                    continue
                lo, hi = box[sym]
                ops = ("<=", ">=") if r.op == "==" else (r.op,)
                for op in ops:
                    if op in ("<=", "<") and rb.lo != -INF:  # a*s <= -rest.lo (minus 1 when strict)
                        limit = -rb.lo - (1 if op == "<" else 0)
                        if a > 0:
                            hi = min(hi, limit // a)
                        else:
                            lo = max(lo, _ceil_div(limit, a))
                    if op in (">=", ">") and rb.hi != INF:  # a*s >= -rest.hi (plus 1 when strict)
                        limit = -rb.hi + (1 if op == ">" else 0)
                        if a > 0:
                            lo = max(lo, _ceil_div(limit, a))
                        else:
                            hi = min(hi, limit // a)
                if (lo, hi) != tuple(box[sym]):
                    box[sym] = Interval(lo, hi)
                    changed = True
                if lo > hi:
                    return None
        if not changed:
            break
    return {s: (_end(i.lo), _end(i.hi)) for s, i in box.items()}


def _end(value) -> int | None:
    return None if value in (INF, -INF) else int(value)


def _conjuncts(f: F.Formula):
    if isinstance(f, F.Rel):
        yield f
    elif isinstance(f, F.And):
        for a in f.args:
            yield from _conjuncts(a)
