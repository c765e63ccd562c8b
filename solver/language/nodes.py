"""Every node kind of the engine and what it means, one row each.

A row says, for one node kind, everything any part of shapeproof needs to
know about it:

========== =================================================================
python     its value on Python ints and floats (raises where Python raises)
numpy      its value on numpy arrays (int64 / float64), lane by lane
interval   bounds of its value from bounds of its arguments
z3         its SMT encoding from encoded arguments (``sign``: the divisor's sign, if known)
torch      torch's sympy form (``T`` is ``tracer.torch_internals``; the solver never imports torch)
text       the engine's printed text (what ``parse`` reads back)
code       Python code for torch's input checks (``guard_code``)
defined    Python code that is true where ``code`` does not raise, given code of arguments that do not
           (empty: it never raises)
names      how guard text and torch's sympy spell it (the parser's and the bridge's table)
domain     for an integer node defined on part of the integers only: a term nonzero exactly where it
           is defined, given its arguments are (a division's divisor; ``math.isqrt(n)``'s
           ``max(n + 1, 0)``), which every relation reading the node carries among its divisors
========== =================================================================

The interpreters (``evaluate``, ``bounds``, ``enumerate``, ``smt``,
``guard_code``, ``parse``, term printing and folding here, and the tracer's
``sympy_bridge``/``torch_strategy``) walk terms and look each node up here,
so adding a node kind is adding a row, and ``tests/test_nodes.py`` checks
every column of every row against ``python`` on random inputs.  Columns a
kind cannot have say why (``Unmodelled``): floats are decided by enumeration
only, so Z3 has no float encoding.

Conditions join relations with connectives (``formula.py``), whose spellings mean:

=============================================== ==============================================
``a and b``, ``a or b`` (Python)                 left to right, as Python evaluates: an operand
                                                 that raises before one decides makes it undefined
``And(a, b)``, ``Or(a, b)``, ``a & b``,          sympy's: order-independent, Kleene's strong
``a | b`` (sympy; torch's guards)                logic: ``Or`` true where any operand is true,
                                                 false where all are false, else undefined;
                                                 ``Or(x, True)`` is ``True``; ``And`` dually
``not a``, ``~a``, ``Not(a)``, ``sym_not(a)``    swaps true and false (undefined stays undefined)
``a < b < c``                                    Python's ``a < b and b < c``
``(a) == (b)``, ``Eq(a, b)`` on conditions       both evaluated: undefined where either is
=============================================== ==============================================

Integer nodes mean what the Python operator means on ints:
``FloorDiv(-7, 2) == -4``, ``Mod(-7, 2) == 1``, ``Mod(7, -2) == -1``; division
by zero is undefined, and so is ``math.isqrt`` of a negative int.  They subclass ``sympy.Expr`` rather than
``sympy.Function`` (construction is about 30x cheaper, 2 µs vs 65 µs), and fold
only what is exact for every input (constants with a nonzero divisor, ``x //
1``); anything that could hide a division by zero is left to the rewriter,
which keeps the divisor beside the term.  Float nodes keep Python's IEEE-double
meaning and are never reassociated or folded (see ``floats.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np
import sympy
import z3
from sympy import Expr, Integer, Symbol

from . import interval_math as I

__all__ = [
    "Kind", "Rounding", "Row", "Unmodelled", "TABLE", "row_of", "rows_named", "as_term", "iter_nodes",
    "term_may_raise",
    "FloorDiv", "Mod", "CeilDiv", "TruncDiv", "Min", "Max",
    "FloatTerm", "FloatConst", "ToFloat", "IntTrueDiv", "FAdd", "FSub", "FMul", "FDiv", "FFloorDiv", "FMod",
    "FNeg", "FloatPow", "FSqrt", "ISqrt", "Defining", "FloorToInt", "CeilToInt", "TruncToInt", "RoundToInt",
    "FloatLt", "FloatLe", "FloatEq", "Defined", "DOMAIN_NODES",
]


class Kind(str, Enum):
    """What a node is, which decides how parser and bridge build it and how strategies treat it."""

    RING = "ring"                  # sympy's +, *, ** (natural exponents)
    DIVISION = "division"          # integer division nodes: undefined where the divisor is 0
    ROOT = "root"                  # math.isqrt: undefined for a negative int
    CHOICE = "choice"              # min, max
    FLOAT_CONST = "float_const"    # a double literal
    TO_FLOAT = "to_float"          # float(int)
    TRUE_DIV = "true_div"          # int / int, correctly rounded
    FLOAT = "float"                # float arithmetic
    ROUNDING = "rounding"          # float -> int
    COMPARISON = "comparison"      # 1 where Python's comparison is true, else 0
    DEFINED = "defined"            # 1 where its argument evaluates without raising


class Rounding(str, Enum):
    """How a float becomes an int: ``math.floor``, ``math.ceil``, ``int``, ``round`` (half to even)."""

    FLOOR = "floor"
    CEIL = "ceil"
    TRUNC = "trunc"
    ROUND = "round"


@dataclass(frozen=True)
class Unmodelled:
    """A column a node kind has no entry for, and why."""

    why: str

    def __call__(self, *args):
        raise TypeError(f"not modelled: {self.why}")


def _never_raises(*args: str) -> str:
    """The ``defined`` column of a node whose Python code raises nowhere its arguments' does not."""
    return ""


@dataclass(frozen=True)
class Row:
    cls: type
    kind: Kind
    python: Callable[..., Any]
    numpy: Callable[..., Any]
    interval: Callable[..., Any]
    z3: Callable[..., Any]
    torch: Callable[..., Any]
    text: Callable[..., str]          # text(printer, node)
    code: Callable[..., str]
    names: tuple[str, ...] = ()
    divisor: int | None = None        # the argument that must be nonzero
    infix: str = ""                   # the Python operator, for binary operator nodes
    rounding: Rounding | None = None
    exact_ints_below: float = 2.0 ** 62   # numpy agrees with Python on int operands below this magnitude
    quotient_node: type | None = None     # rounding of an exact quotient a/b as an integer node
    defined: Callable[..., str] = _never_raises
    domain: Callable[..., Expr] | None = None
    # a float node whose Python raises exactly where a finite operand gives a value that is not finite
    # (sqrt of a negative, a complex or overflowing power): the lanes enumeration marks undefined
    undefined_where_not_finite: bool = False

    @property
    def is_float(self) -> bool:
        return self.kind in (Kind.FLOAT_CONST, Kind.TO_FLOAT, Kind.TRUE_DIV, Kind.FLOAT)

    @property
    def is_wrapper(self) -> bool:
        """Integer-valued over float operands."""
        return self.kind in (Kind.ROUNDING, Kind.COMPARISON, Kind.DEFINED)


# ---------------------------------------------------------------------------------------------
# Node classes: thin; their meaning is their row.

def as_term(value) -> Expr:
    """Coerce an int or an integer sympy expression into a term."""
    if isinstance(value, bool):
        raise TypeError("a bool is not an integer term")
    if isinstance(value, int):
        return Integer(value)
    if isinstance(value, Expr):
        return value
    raise TypeError(f"not an integer term: {value!r}")


class _Node(Expr):
    is_commutative = True
    __slots__ = ()

    def _sympystr(self, printer) -> str:
        return TABLE[type(self)].text(_TextPrinter(printer), self)


class _IntNode(_Node):
    """Base of the integer-valued nodes."""

    is_integer = True
    __slots__ = ()


class _Division(_IntNode):
    """Binary integer division node: folds constants (nonzero divisor), unit divisors and a constant
    divisor of every coefficient only (exact: no rounding can occur)."""

    __slots__ = ()

    def __new__(cls, a, b):
        a, b = as_term(a), as_term(b)
        if b.is_Integer:
            row = TABLE[cls]
            if int(b) in (1, -1):
                folded = _UNIT_DIVISOR[cls](a, int(b))
                if folded is not None and _keeps_errors(cls, a):
                    return folded
            if a.is_Integer and b != 0:
                return Integer(row.python(int(a), int(b)))
            if b != 0:
                quotient = _exact_quotient(a, int(b))
                if quotient is not None and _keeps_errors(cls, a):
                    return Integer(0) if cls is Mod else quotient
        return Expr.__new__(cls, a, b)


def _keeps_errors(cls: type, a: Expr) -> bool:
    """Whether folding ``cls(a, b)`` keeps every error Python raises on it: a remainder folded to 0
    drops ``a``, which may divide by a size that can be 0."""
    return cls is not Mod or not term_may_raise(a)


def iter_nodes(term: Expr) -> Iterator[Expr]:
    """Every distinct subterm of ``term`` (each once, parents before children)."""
    seen: set[Expr] = set()
    stack = [term]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        yield node
        stack.extend(node.args)


def term_may_raise(term: Expr) -> bool:
    """Whether Python can raise evaluating ``term``: a division by a non-constant (or by 0), or a float
    node that can (``formula.may_raise`` asks it of a relation's sides)."""
    return any((isinstance(node, _Division) and not (node.args[1].is_Integer and node.args[1] != 0))
               or getattr(node, "may_raise", False) for node in iter_nodes(term))


def _exact_quotient(a: Expr, b: int) -> Expr | None:
    """``a / b`` when every coefficient of the integer term ``a`` is a multiple of ``b``, else None.

    Then every division of ``a`` by ``b`` is exact and rounding cannot matter:
    ``(2*k) // 2 == k`` wherever ``x`` was learned to be ``2*k``.
    """
    terms = sympy.Add.make_args(a)
    parts = [t.as_coeff_Mul() for t in terms]
    if not all(c.is_Integer and int(c) % b == 0 for c, _ in parts):
        return None
    return sympy.Add(*(Integer(int(c) // b) * rest for c, rest in parts))


class FloorDiv(_Division):
    """``a // b``: the floor of ``a / b`` for every sign."""


class Mod(_Division):
    """``a % b`` with Python's sign convention (the result has the sign of ``b``)."""


class CeilDiv(_Division):
    """``ceil(a / b)``, i.e. ``-((-a) // b)``."""


class TruncDiv(_Division):
    """``a / b`` rounded toward zero (C semantics, ``int(a / b)`` without the double)."""


# x // 1 == x, x // -1 == -x, x % ±1 == 0, ceil(x / 1) == x, trunc(x / 1) == x (exact for every x)
_UNIT_DIVISOR: dict[type, Callable[[Expr, int], Expr | None]] = {
    FloorDiv: lambda a, b: a if b == 1 else -a,
    Mod: lambda a, b: Integer(0),
    CeilDiv: lambda a, b: a if b == 1 else None,
    TruncDiv: lambda a, b: a if b == 1 else None,
}


class _MinMax(_IntNode):
    """n-ary min/max: flattened, constants folded, duplicates dropped, arguments sorted."""

    __slots__ = ()

    def __new__(cls, *args):
        flat: list[Expr] = []
        for arg in args:
            arg = as_term(arg)
            flat.extend(arg.args if type(arg) is cls else (arg,))
        constants = [int(a) for a in flat if a.is_Integer]
        rest = sorted(set(a for a in flat if not a.is_Integer), key=sympy.default_sort_key)
        if constants:
            rest.insert(0, Integer(TABLE[cls].python(*constants)))
        if not rest:
            raise TypeError(f"{TABLE[cls].names[0]}() needs at least one argument")
        if len(rest) == 1:
            return rest[0]
        return Expr.__new__(cls, *rest)


class Min(_MinMax):
    pass


class Max(_MinMax):
    pass


class ISqrt(_IntNode):
    """``math.isqrt(n)``: the floor of the exact square root, undefined for a negative ``n``.

    Folds a constant ``n >= 0`` and a perfect square ``c*m**2`` (``c`` a square): ``isqrt(g**2)`` is
    ``max(g, -g)`` for every int ``g``."""

    __slots__ = ()
    may_raise = True

    def __new__(cls, n):
        n = as_term(n)
        if n.is_Integer and n >= 0:
            return Integer(math.isqrt(int(n)))
        root = _square_root(n)
        if root is not None:
            return Max(root, -root)
        return Expr.__new__(cls, n)


def _square_root(n: Expr) -> Expr | None:
    """``m`` with ``n == m**2`` exactly, when ``n`` is a square coefficient times even powers."""
    coeff, rest = n.as_coeff_Mul()
    if rest == 1 or not (coeff.is_Integer and coeff > 0) or math.isqrt(int(coeff)) ** 2 != int(coeff):
        return None
    factors = []
    for factor in sympy.Mul.make_args(rest):
        base, k = factor.as_base_exp()
        if not (k.is_Integer and k > 0 and k % 2 == 0):
            return None
        factors.append(base ** (int(k) // 2))
    return Integer(math.isqrt(int(coeff))) * sympy.Mul(*factors)


class FloatTerm(_Node):
    """A float-valued node: opaque to sympy's arithmetic, so nothing is reassociated."""

    is_integer = False
    __slots__ = ()
    may_raise = True            # ZeroDivisionError, OverflowError: see formula.may_raise


class FloatConst(FloatTerm):
    """A double, stored as its exact value (a dyadic ``Rational``)."""

    @property
    def value(self) -> float:
        return float(self.args[0])


class ToFloat(FloatTerm):
    pass


class IntTrueDiv(FloatTerm):
    """``a / b`` of two ints: Python rounds the exact quotient once."""


class FAdd(FloatTerm):
    pass


class FSub(FloatTerm):
    pass


class FMul(FloatTerm):
    pass


class FDiv(FloatTerm):
    pass


class FFloorDiv(FloatTerm):
    pass


class FMod(FloatTerm):
    pass


class FNeg(FloatTerm):
    pass


class FloatPow(FloatTerm):
    """Python's ``a ** b`` on doubles (an int operand converted first, as Python does: ``n ** 0.5`` is
    ``float(n) ** 0.5``, and so is ``n ** -1``): the C library's ``pow``, which is not correctly rounded
    (``x ** 0.5 != math.sqrt(x)`` for about 1 double in 1200).  Undefined where Python raises (``0.0`` to
    a negative power, overflow) or returns a complex number (a negative base, a fractional exponent)."""


class FSqrt(FloatTerm):
    """``math.sqrt(a)``: correctly rounded (IEEE 754); undefined for a negative ``a``."""


class _Wrapper(_IntNode):
    """An integer-valued node over float operands (never folded)."""

    __slots__ = ()
    may_raise = True

    def __new__(cls, *args):
        return Expr.__new__(cls, *args)


class FloorToInt(_Wrapper):
    pass


class CeilToInt(_Wrapper):
    pass


class TruncToInt(_Wrapper):
    pass


class RoundToInt(_Wrapper):
    """Python's ``round(x)`` of a float: to the nearest int, ties to even."""


class _Comparison(_Wrapper):
    is_float_comparison = True          # formula_str prints ``FloatLt(a, b) != 0`` as ``a < b``


class FloatLt(_Comparison):
    pass


class FloatLe(_Comparison):
    pass


class FloatEq(_Comparison):
    pass


class Defined(_Wrapper):
    marks_definedness = True            # formula_str prints a relation's ``Defined(w)`` as ``0*(w)``


# ---------------------------------------------------------------------------------------------
# Printing helpers for the ``text`` column

class _TextPrinter:
    """What a ``text`` column needs of sympy's printer."""

    def __init__(self, printer):
        self.printer = printer

    def plain(self, e: Expr) -> str:
        return self.printer._print(e)

    def operand(self, e: Expr) -> str:
        """``e`` so that it binds as one operand of a binary Python operator."""
        text = self.printer._print(e)
        if isinstance(e, (Symbol, _IntNode)) or (e.is_Integer and e >= 0):
            return text
        return f"({text})"

    def bare(self, e: Expr) -> str:
        """A function argument: a binary float operation without its enclosing parentheses."""
        text = self.printer._print(e)
        return text[1:-1] if isinstance(e, FloatTerm) and len(e.args) == 2 else text

    def sympy(self, e: Expr) -> str:
        return getattr(self.printer, f"_print_{type(e).__name__}")(e)


def _infix(op: str, operand: str = "plain") -> Callable[..., str]:
    def text(p: _TextPrinter, n: Expr) -> str:
        show = getattr(p, operand)
        return f"({show(n.args[0])} {op} {show(n.args[1])})"
    return text


def _call(name: str, show: str = "plain") -> Callable[..., str]:
    def text(p: _TextPrinter, n: Expr) -> str:
        return f"{name}({', '.join(getattr(p, show)(a) for a in n.args)})"
    return text


# ---------------------------------------------------------------------------------------------
# Semantics helpers

def trunc_div(a: int, b: int) -> int:
    """C-style division (toward zero) on Python ints, exact for any size."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _natural_power(base, k):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
        raise TypeError(f"not a natural exponent: {k!r}")
    return base ** k


def _np_trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b > 0), q, -q)


def _z3_floordiv(sign: int, a, b):
    pos, neg = (lambda: a / b), (lambda: (-a) / (-b))
    return pos() if sign > 0 else neg() if sign < 0 else z3.If(b > 0, pos(), neg())


def _z3_mod(sign: int, a, b):
    pos, neg = (lambda: a % b), (lambda: -((-a) % (-b)))
    return pos() if sign > 0 else neg() if sign < 0 else z3.If(b > 0, pos(), neg())


def _z3_truncdiv(sign: int, a, b):
    return z3.If((a >= 0) == (b > 0), _z3_floordiv(sign, a, b), -_z3_floordiv(sign, -a, b))


def _z3_pick(keep_new):
    def fold(sign: int, *args):
        out = args[0]
        for a in args[1:]:
            out = z3.If(keep_new(a, out), a, out)
        return out
    return fold


def _z3_power(sign: int, base, k):
    n = k.as_long()
    return z3.Product([base] * n) if n > 0 else z3.IntVal(1, base.ctx)


class Defining(NamedTuple):
    """A ``z3`` column's value that is a fresh integer ``r`` with ``facts(r)``: each point of the other
    variables has exactly one ``r`` where the node is defined, so the facts add no constraint on them."""

    facts: Callable[[Any], list]


def _z3_isqrt(sign: int, n) -> Defining:
    return Defining(lambda r: [z3.Implies(n >= 0, z3.And(r >= 0, r * r <= n, n < (r + 1) * (r + 1)))])


def _np_isqrt(n):
    """``math.isqrt`` lane by lane on int64 below 2**62 (0 where ``n`` is negative: undefined there): the
    double's root is within one of the exact one, which one step each way corrects."""
    n = np.maximum(n, 0)
    r = np.floor(np.sqrt(np.asarray(n).astype(np.float64))).astype(np.int64)
    r = np.where(r * r > n, r - 1, r)
    return np.where((r + 1) * (r + 1) <= n, r + 1, r)


def _float_pow(a: float, b: float) -> float:
    """Python's ``a ** b`` on doubles; a complex result is undefined (``ValueError``), like ``math.pow``."""
    value = a ** b
    if isinstance(value, complex):
        raise ValueError(f"{a!r} ** {b!r} is complex")
    return value


def _pow_lane(a, b) -> float:
    try:
        return _float_pow(float(a), float(b))
    except (ZeroDivisionError, OverflowError, ValueError):
        return math.nan


# Python's own ``**`` lane by lane: ``np.power`` may dispatch to a vectorized ``pow`` (SVML on AVX-512)
# that differs from the C library's in the last bit
_np_pow_lanes = np.frompyfunc(_pow_lane, 2, 1)


def _np_float_pow(a, b):
    return np.asarray(_np_pow_lanes(a, b), dtype=np.float64)


# Where ``math.pow`` (the ``code`` column) raises on finite doubles: a negative base with a fractional
# exponent, 0.0 to a negative power, and overflow, decided in log space below 2**1023.999 (there the
# result is below the largest double by far more than pow's error; within that last 0.07% of the
# exponent range it is called undefined, which only ever rejects)
_POW_OVERFLOW_LOG2 = 1023.999


def _pow_defined(a: str, b: str) -> str:
    return (f"(not (math.isfinite({a}) and math.isfinite({b})) or (({a} >= 0 or {b} == math.floor({b})) "
            f"and ({a} != 0 or {b} >= 0) "
            f"and ({a} == 0 or {b} * math.log2(abs({a})) < {_POW_OVERFLOW_LOG2})))")


def _pow_text(p: "_TextPrinter", n: Expr) -> str:
    base = p.plain(n.args[0])
    return f"({'(' + base + ')' if base.startswith('-') else base} ** {p.plain(n.args[1])})"


# ``float(n)`` and the int quotient ``a / b`` raise OverflowError from this magnitude on: the largest double
# is 2**1024 - 2**971, and the halfway point to 2**1024 rounds (to even) up to it
DOUBLE_OVERFLOW = 2 ** 1024 - 2 ** 970
_DOUBLE_OVERFLOW = "(2**1024 - 2**970)"


def _nonzero_divisor(a: str, b: str) -> str:
    return f"{b} != 0"


def _divisor(a: Expr, b: Expr) -> Expr:
    return b


def _trunc_code(a: str, b: str) -> str:
    # ``int(a / b)`` would round through a double
    return f"((abs({a}) // abs({b})) if (({a} >= 0) == ({b} > 0)) else (-(abs({a}) // abs({b}))))"


_NO_FLOAT_Z3 = Unmodelled("float nodes are decided by enumeration only (strategy z3 answers unknown on them)")
def _FLOAT_BOUND(*parts):
    """Float values are not bounded (the wrappers around them bound their integer result)."""
    return I.EVERYTHING


def _float_binary(cls, op: str, numpy_op, torch_form, names=(), divisor=None) -> Row:
    """A binary float operation: Python's operator on doubles."""
    python = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
              "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b}[op]
    if cls is IntTrueDiv:
        defined = lambda a, b: f"{b} != 0 and abs({a}) < abs({b}) * {_DOUBLE_OVERFLOW}"      # noqa: E731
    else:       # float arithmetic overflows to inf (no exception); a float divisor of 0.0 raises
        defined = _nonzero_divisor if divisor is not None else _never_raises
    return Row(cls, Kind.TRUE_DIV if cls is IntTrueDiv else Kind.FLOAT, python, numpy_op, _FLOAT_BOUND,
               _NO_FLOAT_Z3, torch_form, _infix(op), lambda a, b: f"({a} {op} {b})", names, divisor, op,
               exact_ints_below=2.0 ** 53 if cls is IntTrueDiv else 2.0 ** 62, defined=defined)


def _rounding(cls, kind: Rounding, function: str, python, numpy_op, torch_name: str, names, quotient) -> Row:
    return Row(cls, Kind.ROUNDING, python, numpy_op, lambda a: I.EVERYTHING, _NO_FLOAT_Z3,
               lambda T, a: getattr(T, torch_name)(a), _call(function, "bare"), lambda a: f"{function}({a})",
               names, rounding=kind, quotient_node=quotient,
               defined=lambda a: f"math.isfinite({a})")      # inf: OverflowError, nan: ValueError


def _comparison(cls, op: str, python, numpy_op, torch_relation) -> Row:
    return Row(cls, Kind.COMPARISON, lambda a, b: int(python(a, b)), numpy_op, lambda a, b: I.Interval(0, 1),
               _NO_FLOAT_Z3, lambda T, a, b: sympy.Piecewise((1, torch_relation(a, b)), (0, True)),
               _infix(op), lambda a, b: f"int({a} {op} {b})", infix=op, exact_ints_below=2.0 ** 53)


_ROWS = [
    # -- integer ring: sympy's own classes ------------------------------------------------------
    Row(sympy.Add, Kind.RING, lambda *xs: sum(xs), lambda *xs: _fold(np.add, xs), I.sum_of,
        lambda sign, *xs: z3.Sum(list(xs)), lambda T, *xs: sympy.Add(*xs), lambda p, n: p.sympy(n),
        lambda *xs: "(" + " + ".join(xs) + ")"),
    Row(sympy.Mul, Kind.RING, lambda *xs: math.prod(xs), lambda *xs: _fold(np.multiply, xs), I.product_of,
        lambda sign, *xs: z3.Product(list(xs)), lambda T, *xs: sympy.Mul(*xs), lambda p, n: p.sympy(n),
        lambda *xs: "(" + " * ".join(xs) + ")"),
    Row(sympy.Pow, Kind.RING, _natural_power, lambda base, k: base ** k, I.power, _z3_power,
        lambda T, a, k: sympy.Pow(a, k), lambda p, n: p.sympy(n), lambda a, k: f"({a} ** {k})",
        ("PowByNatural", "pow")),
    # -- integer division -----------------------------------------------------------------------
    Row(FloorDiv, Kind.DIVISION, lambda a, b: a // b, lambda a, b: a // b, I.floordiv, _z3_floordiv,
        lambda T, a, b: T.FloorDiv(a, b), _infix("//", "operand"), lambda a, b: f"({a} // {b})",
        ("FloorDiv", "CleanDiv", "IntFloorDiv", "floordiv"), divisor=1, infix="//",
        defined=_nonzero_divisor, domain=_divisor),
    Row(Mod, Kind.DIVISION, lambda a, b: a % b, lambda a, b: a % b, I.mod, _z3_mod,
        lambda T, a, b: T.PythonMod(a, b), _infix("%", "operand"), lambda a, b: f"({a} % {b})",
        ("Mod", "PythonMod"), divisor=1, infix="%", defined=_nonzero_divisor, domain=_divisor),
    Row(CeilDiv, Kind.DIVISION, lambda a, b: -((-a) // b), lambda a, b: -((-a) // b), I.ceildiv,
        lambda sign, a, b: -_z3_floordiv(sign, -a, b), lambda T, a, b: -T.FloorDiv(-a, b), _call("CeilDiv"),
        lambda a, b: f"(-((-{a}) // {b}))", ("CeilDiv",), divisor=1, defined=_nonzero_divisor,
        domain=_divisor),
    Row(TruncDiv, Kind.DIVISION, trunc_div, _np_trunc_div, I.truncdiv, _z3_truncdiv,
        lambda T, a, b: T.TruncToInt(T.IntTrueDiv(a, b)), _call("TruncDiv"), _trunc_code, ("TruncDiv",),
        divisor=1, defined=_nonzero_divisor, domain=_divisor),
    # -- choice -----------------------------------------------------------------------------------
    Row(Min, Kind.CHOICE, lambda *xs: min(xs), lambda *xs: np.minimum.reduce(np.broadcast_arrays(*xs)),
        I.minimum,
        _z3_pick(lambda a, out: a < out), lambda T, *xs: T.Min(*xs), _call("min"),
        lambda *xs: f"min({', '.join(xs)})", ("min", "Min", "sym_min", "torch.sym_min")),
    Row(Max, Kind.CHOICE, lambda *xs: max(xs), lambda *xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
        I.maximum,
        _z3_pick(lambda a, out: a > out), lambda T, *xs: T.Max(*xs), _call("max"),
        lambda *xs: f"max({', '.join(xs)})", ("max", "Max", "sym_max", "torch.sym_max")),
    # -- integer square root ----------------------------------------------------------------------
    Row(ISqrt, Kind.ROOT, math.isqrt, _np_isqrt, I.isqrt, _z3_isqrt,
        Unmodelled("torch has no integer square root (FloorToInt(OpaqueUnaryFn_sqrt(ToFloat(n))) is one "
                   "only below 2**52)"),
        _call("math.isqrt"), lambda a: f"math.isqrt({a})", ("math.isqrt", "isqrt"),
        defined=lambda a: f"{a} >= 0", domain=lambda n: Max(n + 1, 0)),
    # -- floats (Python's doubles) ------------------------------------------------------------------
    Row(FloatConst, Kind.FLOAT_CONST, lambda v: v, np.float64, lambda v: I.EVERYTHING, _NO_FLOAT_Z3,
        lambda T, v: sympy.Float(v), lambda p, n: repr(n.value), lambda v: f"({v!r})"),
    Row(ToFloat, Kind.TO_FLOAT, float, lambda a: np.asarray(a).astype(np.float64), _FLOAT_BOUND, _NO_FLOAT_Z3,
        lambda T, a: T.ToFloat(a), _call("float"), lambda a: f"float({a})",
        ("float", "ToFloat", "sym_float", "torch.sym_float"),
        defined=lambda a: f"abs({a}) < {_DOUBLE_OVERFLOW}"),
    _float_binary(IntTrueDiv, "/", np.true_divide, lambda T, a, b: T.IntTrueDiv(a, b),
                  ("IntTrueDiv", "FloatTrueDiv"), divisor=1),
    _float_binary(FAdd, "+", np.add, lambda T, a, b: sympy.Add(a, b)),
    _float_binary(FSub, "-", np.subtract, lambda T, a, b: sympy.Add(a, -b)),
    _float_binary(FMul, "*", np.multiply, lambda T, a, b: sympy.Mul(a, b)),
    _float_binary(FDiv, "/", np.true_divide, lambda T, a, b: T.FloatTrueDiv(a, b), divisor=1),
    # numpy's // and % on floats are Python's
    _float_binary(FFloorDiv, "//", np.floor_divide, Unmodelled("torch has no float floor division node"),
                  divisor=1),
    _float_binary(FMod, "%", np.remainder, Unmodelled("torch has no float modulo node"), divisor=1),
    Row(FNeg, Kind.FLOAT, lambda a: -a, np.negative, _FLOAT_BOUND, _NO_FLOAT_Z3, lambda T, a: -a,
        lambda p, n: f"(-{p.plain(n.args[0])})", lambda a: f"(-{a})"),
    # ``math.pow`` is ``**`` on doubles wherever ``**`` is real, and raises where it is complex
    Row(FloatPow, Kind.FLOAT, _float_pow, _np_float_pow, _FLOAT_BOUND, _NO_FLOAT_Z3,
        lambda T, a, b: T.FloatPow(a, b), _pow_text, lambda a, b: f"math.pow({a}, {b})",
        ("FloatPow", "math.pow"), infix="**", defined=_pow_defined, undefined_where_not_finite=True),
    # numpy's sqrt is IEEE's, correctly rounded as math.sqrt is
    Row(FSqrt, Kind.FLOAT, math.sqrt, np.sqrt, _FLOAT_BOUND, _NO_FLOAT_Z3,
        lambda T, a: T.OpaqueUnaryFn_sqrt(a), _call("math.sqrt", "bare"), lambda a: f"math.sqrt({a})",
        ("math.sqrt", "sqrt", "OpaqueUnaryFn_sqrt", "torch._sym_sqrt", "sym_sqrt", "torch.sym_sqrt"),
        defined=lambda a: f"not ({a} < 0)", undefined_where_not_finite=True),
    _rounding(FloorToInt, Rounding.FLOOR, "math.floor", math.floor, np.floor, "FloorToInt",
              ("math.floor", "floor", "FloorToInt"), FloorDiv),
    _rounding(CeilToInt, Rounding.CEIL, "math.ceil", math.ceil, np.ceil, "CeilToInt",
              ("math.ceil", "ceil", "ceiling", "CeilToInt"), CeilDiv),
    _rounding(TruncToInt, Rounding.TRUNC, "int", math.trunc, np.trunc, "TruncToInt",
              ("int", "math.trunc", "trunc", "TruncToInt"), TruncDiv),
    # Python's round() and numpy's rint both round half to even on doubles
    _rounding(RoundToInt, Rounding.ROUND, "round", round, np.rint, "RoundToInt", ("round", "RoundToInt"),
              None),
    _comparison(FloatLt, "<", lambda a, b: a < b, np.less, sympy.Lt),
    _comparison(FloatLe, "<=", lambda a, b: a <= b, np.less_equal, sympy.Le),
    _comparison(FloatEq, "==", lambda a, b: a == b, np.equal, sympy.Eq),
    Row(Defined, Kind.DEFINED, lambda a: 1, lambda a: np.ones(1, dtype=np.int64), lambda a: I.Interval(1, 1),
        _NO_FLOAT_Z3, lambda T, a: sympy.Integer(1), _call("Defined", "bare"), lambda a: f"(0*{a} + 1)"),
]


def _fold(op, xs):
    out = xs[0]
    for x in xs[1:]:
        out = op(out, x)
    return out


TABLE: dict[type, Row] = {row.cls: row for row in _ROWS}


def row_of(term: Expr) -> Row:
    """The row of ``term``'s node kind; ``TypeError`` for anything that is not a term of the engine."""
    row = TABLE.get(type(term))
    if row is None or (row.cls is sympy.Pow and not (term.args[1].is_Integer and term.args[1] >= 0)):
        raise TypeError(f"not an integer term: {term} ({type(term).__name__})")
    return row


def rows_named(*kinds: Kind) -> dict[str, Row]:
    """Spelling -> row, for the rows of ``kinds`` (all rows if none given)."""
    return {name: row for row in _ROWS if not kinds or row.kind in kinds for name in row.names}


FLOAT_WRAPPERS: tuple[type[Expr], ...] = tuple(row.cls for row in _ROWS if row.is_wrapper)
ROUNDING = {row.rounding: row.cls for row in _ROWS if row.rounding is not None}
COMPARISONS: tuple[type[Expr], ...] = tuple(row.cls for row in _ROWS if row.kind is Kind.COMPARISON)
DIVISION_NODES: tuple[type[Expr], ...] = tuple(row.cls for row in _ROWS if row.kind is Kind.DIVISION)
# integer nodes defined on part of the integers only (their ``domain`` column)
DOMAIN_NODES: tuple[type[Expr], ...] = tuple(row.cls for row in _ROWS if row.domain is not None)
