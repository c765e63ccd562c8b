"""Boolean conditions over integer terms: relations and connectives.

Semantics are three-valued because a term may divide by zero.  A relation is
*undefined* where one of its divisors is zero (or a float node raises).  Each
connective has one of two meanings (the table of spellings is in ``nodes.py``):

* *ordered* (``ordered=True``, Python's ``and``/``or``): left to right, stopping
  at the first operand that decides (McCarthy's logic), so an undefined operand
  makes the whole undefined exactly when Python would raise there: ``a and b``
  is false when ``a`` is false, ``a or b`` true when ``a`` is true, otherwise
  each is ``b``'s value once ``a`` is defined;
* *unordered* (``ordered=False``, sympy's ``And``/``Or``, also spelled ``&``/``|``):
  commutative, with sympy's absorption (Kleene's strong logic): ``Or`` is true
  where any operand is true, false where all are false, undefined otherwise;
  ``And`` dually.  ``Or(x, True)`` is ``True`` whatever ``x`` is.

``not`` swaps true and false in both.  A condition *holds* at a point only when
it is defined and true there; a guard is proven when it holds at every point in
range where the facts hold.  Ordered operands keep their order through every
constructor (De Morgan keeps it too).  Where no operand can be undefined the two
meanings agree, and an unordered connective is built as the ordered one, so the
unordered kind only exists where it means something else.

Formulas are kept in negation normal form: ``neg`` pushes negation into
relations (``not a < b`` is ``a >= b``, same divisors), so only ``Rel``,
``And``, ``Or`` and the two constants exist.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Iterator, cast

import sympy
from sympy import Expr, Integer, Symbol

from .nodes import term_may_raise
from .terms import as_term, divisors, expanded, has_floats, symbols_in, term_str

__all__ = [
    "Formula", "Rel", "And", "Or", "Const", "TRUE", "FALSE",
    "rel", "eq", "ne", "lt", "le", "gt", "ge", "conj", "disj", "rebuilt", "neg", "iff",
    "relations", "formula_str", "substitute", "may_raise",
]

NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
COMPARE = {
    "==": lambda d: d == 0, "!=": lambda d: d != 0, "<": lambda d: d < 0,
    "<=": lambda d: d <= 0, ">": lambda d: d > 0, ">=": lambda d: d >= 0,
}


class _FormulaBase:
    """Base class of the four kinds of condition; use ``&``, ``|`` and ``~`` to combine."""

    __slots__ = ()

    def __and__(self, other: "Formula") -> "Formula":
        return conj(cast("Formula", self), other)

    def __or__(self, other: "Formula") -> "Formula":
        return disj(cast("Formula", self), other)

    def __invert__(self) -> "Formula":
        return neg(cast("Formula", self))

    # formulas are immutable and their terms can be large (nested pad arithmetic): sympy walks a whole
    # term for its symbols on every call, so each formula remembers its own (in its ``__dict__``, which
    # equality and hashing ignore)
    @cached_property
    def free_symbols(self) -> frozenset[Symbol]:
        return frozenset().union(*(r.free_symbols for r in relations(cast("Formula", self))))

    def __str__(self) -> str:
        return formula_str(cast("Formula", self))


@dataclass(frozen=True, eq=True, repr=False)
class Const(_FormulaBase):
    value: bool

    def __repr__(self) -> str:
        return "TRUE" if self.value else "FALSE"


TRUE = Const(True)
FALSE = Const(False)


@dataclass(frozen=True, eq=True, repr=False)
class Rel(_FormulaBase):
    """``lhs op rhs``, defined where every term in ``divisors`` is nonzero.

    ``divisors`` holds at least the divisors visible in ``lhs`` and ``rhs``;
    the parser adds those that sympy cancelled while building the terms
    (``x // y - x // y`` is 0 but still needs ``y != 0``).
    """

    op: str
    lhs: Expr
    rhs: Expr
    divisors: frozenset = frozenset()

    @cached_property
    def free_symbols(self) -> frozenset[Symbol]:
        return symbols_in(self.lhs).union(symbols_in(self.rhs), *(symbols_in(d) for d in self.divisors))

    @cached_property
    def has_floats(self) -> bool:
        """Whether a float node occurs in it (``floats.has_floats`` of its terms), remembered like its
        symbols: every question's facts are asked this again."""
        return has_floats((self.lhs, self.rhs, *self.divisors))

    def holds_for(self, difference: int) -> bool:
        """Whether ``lhs - rhs == difference`` satisfies the relation."""
        return COMPARE[self.op](difference)

    def __repr__(self) -> str:
        return f"Rel({formula_str(self)!r})"


@dataclass(frozen=True, eq=True, repr=False)
class And(_FormulaBase):
    args: tuple
    ordered: bool = True            # Python's left-to-right ``and``; False: sympy's ``And`` (see above)

    def __repr__(self) -> str:
        return f"And({formula_str(self)!r})"


@dataclass(frozen=True, eq=True, repr=False)
class Or(_FormulaBase):
    args: tuple
    ordered: bool = True            # Python's left-to-right ``or``; False: sympy's ``Or`` (see above)

    def __repr__(self) -> str:
        return f"Or({formula_str(self)!r})"


# A condition is one of these four (a union, so that type checkers narrow by elimination).
Formula = Const | Rel | And | Or


def rel(op: str, lhs, rhs, extra_divisors: Iterable[Expr] = ()) -> Formula:
    """The relation ``lhs op rhs``; folds to a constant only when both sides are integers and defined."""
    if op not in NEGATED:
        raise ValueError(f"unknown relation {op!r}")
    lhs, rhs = as_term(lhs), as_term(rhs)
    divs = divisors((lhs, rhs)) | frozenset(extra_divisors)
    if lhs.is_Integer and rhs.is_Integer and all(d.is_Integer and d != 0 for d in divs):
        return Const(COMPARE[op](int(lhs) - int(rhs)))
    return Rel(op, lhs, rhs, divs)


def eq(a, b) -> Formula: return rel("==", a, b)
def ne(a, b) -> Formula: return rel("!=", a, b)
def lt(a, b) -> Formula: return rel("<", a, b)
def le(a, b) -> Formula: return rel("<=", a, b)
def gt(a, b) -> Formula: return rel(">", a, b)
def ge(a, b) -> Formula: return rel(">=", a, b)


def _connective(cls, absorbing: Const, identity: Const, args: Iterable[Formula], ordered: bool) -> Formula:
    flat: dict[Formula, None] = {}          # in order and deduplicated, in linear time
    for arg in args:
        if not isinstance(arg, Formula):
            raise TypeError(f"not a condition: {arg!r}")
        for part in _operands(cls, arg, ordered):
            if part == absorbing:
                # sympy's connective absorbs whatever the others are; Python's stops here, but only after
                # evaluating what came before, which may raise: ``a or True`` is ``a or not a``
                if not ordered or not any(may_raise(p) for p in flat):
                    return absorbing
                before = _build(cls, identity, tuple(flat), ordered)
                return cls((*_operands(cls, before, ordered), *_operands(cls, neg(before), ordered)))
            if part != identity:
                flat[part] = None
    return _build(cls, identity, tuple(flat), ordered)


def _operands(cls, f: Formula, ordered: bool) -> tuple:
    """``f``'s operands if it is a ``cls`` node of the same meaning (or of either meaning where none of its
    operands can be undefined), else ``f`` alone: connectives stay flat."""
    if isinstance(f, cls) and (f.ordered == ordered or (f.ordered and not may_raise(f))):
        return f.args
    return (f,)


def _build(cls, identity: Const, items: tuple, ordered: bool) -> Formula:
    if not items:
        return identity
    if len(items) == 1:
        return items[0]
    if ordered or not any(may_raise(i) for i in items):
        return cls(items)                   # every operand defined everywhere: both meanings agree
    return cls(tuple(sorted(items, key=formula_str)), ordered=False)      # one form for every order


def may_raise(f: Formula) -> bool:
    """Whether ``f`` can be undefined somewhere (a divisor, or a float node that can raise)."""
    return any(r.divisors or term_may_raise(r.lhs) or term_may_raise(r.rhs) for r in relations(f))


def conj(*args: Formula, ordered: bool = True) -> Formula:
    """``a and b and ...``: Python's left-to-right meaning, or sympy's ``And`` with ``ordered=False``."""
    return _connective(And, FALSE, TRUE, args, ordered)


def disj(*args: Formula, ordered: bool = True) -> Formula:
    """``a or b or ...``: Python's left-to-right meaning, or sympy's ``Or`` with ``ordered=False``."""
    return _connective(Or, TRUE, FALSE, args, ordered)


def rebuilt(f: And | Or, args: Iterable[Formula]) -> Formula:
    """The connective ``f`` over new operands: the same kind, with the same meaning."""
    return (conj if isinstance(f, And) else disj)(*args, ordered=f.ordered)


def neg(f: Formula) -> Formula:
    """Negation in normal form (De Morgan, order kept, and relation flipping are exact in both logics)."""
    if isinstance(f, Const):
        return FALSE if f.value else TRUE
    if isinstance(f, Rel):
        return Rel(NEGATED[f.op], f.lhs, f.rhs, f.divisors)
    if isinstance(f, And):
        return disj(*(neg(a) for a in f.args), ordered=f.ordered)
    if isinstance(f, Or):
        return conj(*(neg(a) for a in f.args), ordered=f.ordered)
    raise TypeError(f"not a condition: {f!r}")


def iff(a: Formula, b: Formula) -> Formula:
    return disj(conj(a, b), conj(neg(a), neg(b)))


def substitute(f: Formula, mapping: dict) -> Formula:
    """``f`` with symbols replaced per ``mapping`` (terms re-expanded; divisors substituted too); a value
    may be a Python ``int`` (``xreplace`` would put it as it is inside nodes built without sympify)."""
    if isinstance(f, Const) or not mapping:
        return f
    if any(type(v) is int for v in mapping.values()):
        mapping = {k: Integer(v) if type(v) is int else v for k, v in mapping.items()}
    if isinstance(f, Rel):
        if f.free_symbols.isdisjoint(mapping):
            return f                             # nothing to replace: spare sympy's expand of a large term
        divs = frozenset(expanded(d.xreplace(mapping)) for d in f.divisors)
        return rel(f.op, expanded(f.lhs.xreplace(mapping)), expanded(f.rhs.xreplace(mapping)), divs)
    return rebuilt(f, (substitute(a, mapping) for a in f.args))


def relations(f: Formula) -> Iterator[Rel]:
    """Every relation in ``f`` (with repeats, left to right)."""
    if isinstance(f, Rel):
        yield f
    elif isinstance(f, (And, Or)):
        for a in f.args:
            yield from relations(a)


def formula_str(f: Formula) -> str:
    """Python-syntax text that ``shapeproof.solver.language.parse`` reads back to an equal formula."""
    if isinstance(f, Const):
        return "True" if f.value else "False"
    if (isinstance(f, Rel) and getattr(f.lhs, "is_float_comparison", False) and f.rhs == 0
            and f.op in ("==", "!=")):
        text = term_str(f.lhs)[1:-1]            # a comparison with a float side (floats.compare_float)
        return text if f.op == "!=" else f"not ({text})"
    if isinstance(f, Rel):
        # Divisors that sympy cancelled out of the terms are printed as ``0*(0 // d)`` (a float node's
        # ``Defined`` marker as ``0*(w)``) so that the text, read back, carries the same definedness.
        hidden = sorted(f.divisors - divisors((f.lhs, f.rhs)), key=sympy.default_sort_key)
        lhs = _side(f.lhs) + "".join(f" + 0*({term_str(d.args[0])})" if getattr(d, "marks_definedness", False)
                                     else f" + 0*(0 // ({term_str(d)}))" for d in hidden)
        return f"{lhs} {f.op} {_side(f.rhs)}"
    if isinstance(f, (And, Or)) and not f.ordered:
        return f"{type(f).__name__}({', '.join(formula_str(a) for a in f.args)})"     # as sympy prints it
    if isinstance(f, And):
        return " and ".join(f"({formula_str(a)})" if isinstance(a, Or) and a.ordered else formula_str(a)
                            for a in f.args)
    if isinstance(f, Or):
        return " or ".join(formula_str(a) for a in f.args)
    raise TypeError(f"not a condition: {f!r}")


def _side(term: Expr) -> str:
    text = term_str(term)
    bare = isinstance(term, (Symbol, Integer)) or not isinstance(term, (sympy.Add, sympy.Mul))
    return text if bare else f"({text})"
