"""A safe parser for shape guards, as torch prints them and as people write them.

>>> str(parse_condition("((1 + (seq_len // S)) % N) != 0"))
'((1 + (seq_len // S)) % N) != 0'
>>> str(parse_condition("math.ceil(T / 16) != 1"))
'math.ceil(T / 16) != 1'
>>> str(parse_condition("L['x'].size()[1] % 4 == 0"))
"(L['x'].size()[1] % 4) == 0"

Nothing is evaluated: the text is tokenized and read by a recursive-descent
parser for a small Python-like grammar (Python's precedence, chained
comparisons, ``and``/``or``/``not``; ``&``/``|``/``~`` on conditions as sympy
prints them, with sympy's meaning: ``nodes.py`` lists each connective's), and
names resolve against a fixed table of functions.  Anything
else is a ``ParseError`` that names the position and what was expected:
bitwise operators on integers, a condition compared with an integer, digits
outside ASCII.  Input size, nesting depth, literal size and the size of the
expanded result (``size.py``) are bounded, and sums and products are built in
one step each, so parsing is linear and hostile text fails fast.

Integer division nodes remember their divisor even when sympy cancels them
(``x // y - x // y`` is ``0`` but still undefined at ``y == 0``).  Float
operations (``/``, ``sym_float``, ``0.5``) keep Python's double-precision
meaning (``floats.py``), and so does ``**`` with a float side or a negative
exponent (``n ** 0.5``, ``x ** -1``), as in Python.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable, cast

import sympy
from sympy import Expr, Integer

from . import floats as FL
from . import formula as F
from .size import Size, SizeOf
from .nodes import Kind, Row, rows_named
from .terms import FloorDiv, Max, Mod, divisors, symbol

__all__ = ["ParseError", "parse", "parse_condition", "parse_term", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds that keep parsing cheap on hostile input."""

    max_chars: int = 200_000
    max_depth: int = 64
    max_int_digits: int = 60
    max_literal_chars: int = 120
    max_exponent: int = 64
    # expanded size of any term (see size.py): sympy.expand costs about 0.4 ms per monomial
    max_monomials: int = 512
    max_degree: int = 128
    max_coefficient_bits: int = 1024


DEFAULT_LIMITS = Limits()


class ParseError(ValueError):
    """Text that is not a guard; ``position`` is a 0-based character offset."""

    def __init__(self, message: str, text: str = "", position: int = 0):
        self.message = message
        self.text = text
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.text:
            return self.message
        start = max(0, self.position - 40)
        excerpt = self.text[start:self.position + 40].replace("\n", " ")
        caret = " " * (self.position - start + (3 if start else 0)) + "^"
        prefix = "..." if start else ""
        return f"{self.message} at position {self.position}:\n  {prefix}{excerpt}\n  {caret}"


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<str>'[^'\\\n]*'|"[^"\\\n]*")
  | (?P<op>//|\*\*|==|!=|<=|>=|[-+*/%()<>\[\],.&|~])
""", re.VERBOSE | re.ASCII)       # ASCII: "４" or "٣" is not a digit here, as it is not in torch's guards

_KEYWORDS = {"and", "or", "not", "True", "False", "None", "if", "else", "lambda", "in", "is"}


@dataclass(frozen=True)
class _Tok:
    kind: str  # num, name, str, op, kw, end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Tok]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", text, pos)
        kind = str(m.lastgroup)          # every alternative is a named group
        if kind != "ws":
            value = m.group()
            if kind == "name" and value in _KEYWORDS:
                kind = "kw"
            tokens.append(_Tok(kind, value, pos))
        pos = m.end()
    tokens.append(_Tok("end", "", len(text)))
    return tokens


# ---------------------------------------------------------------------------
# Values built while parsing

@dataclass(frozen=True)
class _Num:
    """A number: an integer term, or a float term (``floats.py``) when ``real``.

    ``divs`` holds the divisors that must be nonzero, and a ``Defined`` marker for each float
    wrapper built on the way (``floats.prune_defined`` keeps those whose wrapper cancelled).
    """

    expr: Expr
    divs: frozenset = frozenset()
    real: bool = False


@dataclass(frozen=True)
class _Path:
    """An unresolved name or source path such as ``L['x'].size()[1]``."""

    text: str
    pos: int


def _merge(*nums: _Num) -> frozenset:
    return frozenset().union(*(n.divs for n in nums))


def _nonzero(divisor: Expr) -> frozenset:
    """The divisors that dividing by ``divisor`` must record (none for a nonzero constant)."""
    return frozenset() if divisor.is_Integer and divisor != 0 else frozenset({divisor})


_rel_divisors = FL.prune_defined


# ---------------------------------------------------------------------------
# The function table: name -> (arity or None for n-ary, handler on parsed values)

def _int_fn(node) -> Callable:
    def apply(p: "_Parser", args, pos):
        a, b = (p.integer(v, pos) for v in args)
        return _Num(node(a.expr, b.expr), _merge(a, b) | _nonzero(b.expr))
    return apply


def _rel_fn(op: str) -> Callable:
    return lambda p, args, pos: p.compare(op, args[0], args[1], pos)


def _minmax_fn(node) -> Callable:
    def apply(p: "_Parser", args, pos):
        if not args:
            raise ParseError("min/max need at least one argument", p.text, pos)
        nums = [p.integer(v, pos) for v in args]
        return _Num(node(*(n.expr for n in nums)), _merge(*nums))
    return apply


def _round_fn(kind: FL.Rounding) -> Callable:
    def apply(p: "_Parser", args, pos):
        return p.round_to_int(args[0], kind, pos)
    return apply


def _to_real(p: "_Parser", args, pos):
    n = p.number(args[0], pos)
    return _Num(FL.to_float(n.expr), n.divs, real=True)


def _true_div(p: "_Parser", args, pos):
    return p.divide(args[0], args[1], pos)


def _modular_indexing(p: "_Parser", args, pos):
    a, b, c = (p.integer(v, pos) for v in args)
    return _Num(Mod(FloorDiv(a.expr, b.expr), c.expr), _merge(a, b, c) | _nonzero(b.expr) | _nonzero(c.expr))


def _abs(p: "_Parser", args, pos):
    n = p.integer(args[0], pos)
    return _Num(Max(n.expr, -n.expr), n.divs)


def _pow(p: "_Parser", args, pos):
    return p.power(args[0], args[1], pos)


def _float_fn(cls) -> Callable:
    """A float function (``math.sqrt``, ``math.pow``, ``FloatPow``): int arguments converted first."""
    def apply(p: "_Parser", args, pos):
        nums = [p.number(v, pos) for v in args]
        return _Num(FL.float_call(cls, *(n.expr for n in nums)), _merge(*nums), real=True)
    return apply


def _root_fn(node) -> Callable:
    def apply(p: "_Parser", args, pos):
        n = p.integer(args[0], pos)
        root = node(n.expr)
        return _Num(root, n.divs | divisors([root]))       # kept if sympy cancels the node
    return apply


# sympy's And and Or (also spelled ``&`` and ``|``): order-independent, absorbing (``formula``)
_SYMPY_AND = functools.partial(F.conj, ordered=False)
_SYMPY_OR = functools.partial(F.disj, ordered=False)


def _connective(join) -> Callable:
    return lambda p, args, pos: join(*(p.condition(v, pos) for v in args))


# How the parser builds each kind of node from its arguments; which names spell which node is the
# ``names`` column of ``nodes.TABLE``.
_BUILDERS: dict[Kind, Callable[[Row], tuple[int | None, Callable]]] = {
    Kind.DIVISION: lambda row: (2, _int_fn(row.cls)),
    Kind.CHOICE: lambda row: (None, _minmax_fn(row.cls)),
    Kind.TRUE_DIV: lambda row: (2, _true_div),
    Kind.ROUNDING: lambda row: (1, _round_fn(cast(FL.Rounding, row.rounding))),
    Kind.TO_FLOAT: lambda row: (1, _to_real),
    Kind.RING: lambda row: (2, _pow),                   # only ``**`` has a spelling as a function
    Kind.FLOAT: lambda row: (2 if row.infix else 1, _float_fn(row.cls)),
    Kind.ROOT: lambda row: (1, _root_fn(row.cls)),
}

_FUNCTIONS: dict[str, tuple[int | None, Callable]] = {
    **{name: (2, _rel_fn(op)) for name, op in
       [("Eq", "=="), ("Ne", "!="), ("Lt", "<"), ("Le", "<="), ("Gt", ">"), ("Ge", ">="),
        ("StrictLessThan", "<"), ("LessThan", "<="), ("StrictGreaterThan", ">"), ("GreaterThan", ">="),
        ("Equality", "=="), ("Unequality", "!=")]},
    "And": (None, _connective(_SYMPY_AND)),
    "Or": (None, _connective(_SYMPY_OR)),
    "Not": (1, lambda p, args, pos: F.neg(p.condition(args[0], pos))),
    "sym_not": (1, lambda p, args, pos: F.neg(p.condition(args[0], pos))),
    "torch.sym_not": (1, lambda p, args, pos: F.neg(p.condition(args[0], pos))),
    **{name: _BUILDERS[row.kind](row) for name, row in rows_named(*_BUILDERS).items()},
    # spellings that are not one node
    "ModularIndexing": (3, _modular_indexing),
    **{name: (1, _abs) for name in ("abs", "Abs")},
    "Integer": (1, lambda p, args, pos: p.integer(args[0], pos)),
}

# Methods that may appear inside a source path, e.g. ``x.size(1)`` or ``L['x'].size()[1]``.
_PATH_METHODS = {"size", "stride", "storage_offset", "numel", "dim", "item", "shape"}


class _Parser:
    def __init__(self, text: str, limits: Limits):
        if len(text) > limits.max_chars:
            raise ParseError(f"guard text is {len(text)} characters; the limit is {limits.max_chars}")
        self.text = text
        self.limits = limits
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0
        self.size = SizeOf()

    # -- token helpers -------------------------------------------------------
    @property
    def tok(self) -> _Tok:
        return self.tokens[self.i]

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "kw") and self.tok.text in texts

    def take(self) -> _Tok:
        tok = self.tok
        self.i += 1
        return tok

    def expect(self, text: str, what: str | None = None) -> _Tok:
        if not self.at(text):
            raise self.error(f"expected {what or repr(text)}")
        return self.take()

    def error(self, expected: str) -> ParseError:
        found = "end of input" if self.tok.kind == "end" else repr(self.tok.text)
        return ParseError(f"{expected}, found {found}", self.text, self.tok.pos)

    def enter(self):
        self.depth += 1
        if self.depth > self.limits.max_depth:
            raise ParseError(f"expression nested deeper than {self.limits.max_depth} levels",
                             self.text, self.tok.pos)

    # -- grammar -------------------------------------------------------------
    def parse_top(self):
        value = self.expression()
        if self.tok.kind != "end":
            raise self.error("expected an operator or the end of the guard")
        return value

    def expression(self):
        self.enter()
        try:
            value = self.and_test()
            return self._joined(value, "or", self.and_test, F.disj,
                                self.condition) if self.at("or") else value
        finally:
            self.depth -= 1

    def and_test(self):
        value = self.not_test()
        return self._joined(value, "and", self.not_test, F.conj, self.condition) if self.at("and") else value

    def _joined(self, value, word: str, operand, join, as_condition):
        """``a word b word c ...`` joined in one step (pairwise joins would be quadratic in the length).

        Callers test for ``word`` first and recurse only through ``operand``: each nesting
        level of the grammar costs Python stack frames, and ``max_depth`` levels must fit.
        """
        parts = [as_condition(value, self.tok.pos)]
        while self.at(word):
            pos = self.take().pos
            parts.append(as_condition(operand(), pos))
        return join(*parts)

    def not_test(self):
        if self.at("not"):
            pos = self.take().pos
            self.enter()
            try:
                return F.neg(self.condition(self.not_test(), pos))
            finally:
                self.depth -= 1
        return self.comparison()

    def comparison(self):
        left = self.bitwise_or()
        steps = []
        while self.at("==", "!=", "<", "<=", ">", ">="):
            tok = self.take()
            right = self.bitwise_or()
            steps.append(self.compare(tok.text, left, right, tok.pos))
            left = right
        if not steps:
            return left
        return F.conj(*steps)

    # ``&``, ``|`` and ``~`` are how sympy prints And, Or and Not, and they mean what sympy's do; on integers
    # Python reads them bitwise, which this grammar does not model, so they are refused there.
    def bitwise_or(self):
        value = self.bitwise_and()
        return self._joined(value, "|", self.bitwise_and, _SYMPY_OR,
                            self._operand_of("|")) if self.at("|") else value

    def bitwise_and(self):
        value = self.arith()
        return self._joined(value, "&", self.arith, _SYMPY_AND,
                            self._operand_of("&")) if self.at("&") else value

    def _operand_of(self, op: str):
        return lambda value, pos: self.logical_operand(value, op, pos)

    def logical_operand(self, value, op: str, pos: int) -> F.Formula:
        if isinstance(value, F.Formula):
            return value
        raise ParseError(f"'{op}' applies to conditions here; on integers it is a bitwise operator, "
                         "which guards do not use", self.text, pos)

    def arith(self):
        """A run of ``+``/``-``: integer terms summed in one step, float ones in Python's order."""
        value = self.term()
        if not self.at("+", "-"):
            return value
        first = self.number(value, self.tok.pos)
        terms, divs, real = [first.expr], set(first.divs), first.real
        acc = None if not real else first.expr                  # the float value so far, once there is one
        while self.at("+", "-"):
            tok = self.take()
            right = self.number(self.term(), tok.pos)
            divs |= right.divs
            if acc is None and not right.real:
                terms.append(right.expr if tok.text == "+" else -right.expr)
                continue
            if acc is None:
                acc = self.checked(sympy.Add(*terms), tok.pos)
            acc = FL.float_binop(tok.text, acc, right.expr)
            real = True
        if acc is None:
            return _Num(self.checked(sympy.Add(*terms), self.tok.pos), frozenset(divs))
        return _Num(acc, frozenset(divs), real)

    def term(self):
        value = self.unary()
        factors: list[_Num] = []
        while self.at("*", "/", "//", "%"):
            tok = self.take()
            right = self.unary()
            if tok.text == "*":
                if not factors:
                    factors.append(self.number(value, tok.pos))
                factors.append(self.number(right, tok.pos))
                continue
            if factors:
                value, factors = self.product(factors, tok.pos), []
            if tok.text == "/":
                value = self.divide(value, right, tok.pos)
            elif tok.text == "//":
                value = self.floor_divide(value, right, tok.pos)
            else:
                value = self.modulo(value, right, tok.pos)
        return self.product(factors, self.tok.pos) if factors else value

    def product(self, factors: list[_Num], pos: int) -> _Num:
        """``f1 * f2 * ...``: integer factors multiplied in one step, float ones in Python's order."""
        divs = _merge(*factors)
        if not any(f.real for f in factors):
            exprs = [f.expr for f in factors]
            self.check_size(self.size.of_product(exprs), pos)      # before sympy multiplies anything
            return _Num(self.checked(sympy.Mul(*exprs), pos), divs)
        acc, ints = None, []
        for f in factors:
            if acc is None and not f.real:
                ints.append(f.expr)
                continue
            if acc is None:
                acc = f.expr if not ints else FL.float_binop("*", self.checked(sympy.Mul(*ints), pos), f.expr)
            else:
                acc = FL.float_binop("*", acc, f.expr)
        return _Num(acc, divs, True)

    def unary(self):
        if self.at("-", "+", "~"):
            tok = self.take()
            self.enter()
            try:
                operand = self.unary()
            finally:
                self.depth -= 1
            if tok.text == "~":
                return F.neg(self.logical_operand(operand, "~", tok.pos))
            n = self.number(operand, tok.pos)
            if tok.text == "+":
                return n
            if not n.real:
                return _Num(-n.expr, n.divs)
            negated = FL.float_const(-n.expr.value) if isinstance(n.expr, FL.FloatConst) else FL.FNeg(n.expr)
            return _Num(negated, n.divs, True)
        return self.power_expr()

    def power_expr(self):
        base = self.primary()
        if self.at("**"):
            pos = self.take().pos
            self.enter()
            try:
                exponent = self.unary()
            finally:
                self.depth -= 1
            return self.power(base, exponent, pos)
        return base

    def primary(self):
        value = self.atom()
        while True:
            if self.at("("):
                value = self.call(value)
            elif self.at("["):
                value = self.subscript(value)
            elif self.at("."):
                pos = self.take().pos
                if self.tok.kind != "name":
                    raise self.error("expected an attribute name after '.'")
                if not isinstance(value, _Path):
                    raise ParseError("attributes are only allowed on names", self.text, pos)
                value = _Path(f"{value.text}.{self.take().text}", value.pos)
            else:
                return value

    def atom(self):
        tok = self.tok
        if tok.kind == "num":
            self.take()
            return self.literal(tok)
        if tok.kind == "name":
            self.take()
            if tok.text.startswith("__"):
                raise ParseError(f"name {tok.text!r} is not allowed", self.text, tok.pos)
            return _Path(tok.text, tok.pos)
        if tok.kind == "kw" and tok.text in ("True", "False"):
            self.take()
            return F.TRUE if tok.text == "True" else F.FALSE
        if self.at("("):
            self.take()
            value = self.expression()
            self.expect(")", "')' to close the '(' at position %d" % tok.pos)
            return value
        raise self.error("expected a number, a name or '('")

    def literal(self, tok: _Tok) -> _Num:
        if len(tok.text) > self.limits.max_literal_chars:
            raise ParseError(f"number literal is too large (longer than {self.limits.max_literal_chars} "
                             "characters)", self.text, tok.pos)
        if re.fullmatch(r"[0-9]+", tok.text):
            if len(tok.text) > self.limits.max_int_digits:
                raise ParseError("number literal is too large", self.text, tok.pos)
            return _Num(Integer(int(tok.text)))
        value = float(tok.text)                      # Python reads the literal as this double
        if value in (float("inf"), float("-inf")):
            raise ParseError("float literal overflows a double", self.text, tok.pos)
        return _Num(FL.float_const(value), real=True)

    def call(self, target):
        open_tok = self.take()
        self.enter()
        try:
            args = []
            while not self.at(")"):
                args.append(self.expression())
                if not self.at(")"):
                    self.expect(",", "',' or ')' in the argument list")
            self.take()
        finally:
            self.depth -= 1
        if not isinstance(target, _Path):
            raise ParseError("only named functions can be called", self.text, open_tok.pos)
        name = target.text
        if name in _FUNCTIONS:
            arity, handler = _FUNCTIONS[name]
            if arity is not None and len(args) != arity:
                raise ParseError(f"{name}() takes {arity} argument(s), got {len(args)}", self.text,
                                 target.pos)
            return handler(self, args, target.pos)
        method = name.rsplit(".", 1)[-1]
        if "." in name and method in _PATH_METHODS and all(
                isinstance(a, _Num) and a.expr.is_Integer for a in args):
            return _Path(f"{name}({', '.join(str(a.expr) for a in args)})", target.pos)
        raise ParseError(f"unknown function {name!r}", self.text, target.pos)

    def subscript(self, target):
        open_tok = self.take()
        negative = self.at("-")
        if negative:
            self.take()
        tok = self.tok
        if (tok.kind == "num" and re.fullmatch(r"[0-9]+", tok.text)
                and len(tok.text) <= self.limits.max_int_digits):
            index = ("-" if negative else "") + tok.text
        elif tok.kind == "str" and not negative:
            index = repr(tok.text[1:-1])
        else:
            raise self.error("expected an integer or a string index")
        self.take()
        self.expect("]", "']'")
        if not isinstance(target, _Path):
            raise ParseError("only names can be indexed", self.text, open_tok.pos)
        return _Path(f"{target.text}[{index}]", target.pos)

    # -- typed views of values -----------------------------------------------
    def number(self, value, pos: int) -> _Num:
        if isinstance(value, _Num):
            return value
        if isinstance(value, _Path):
            if value.text in _FUNCTIONS:
                raise ParseError(f"{value.text} is a function and must be called", self.text, value.pos)
            return _Num(symbol(value.text))
        raise ParseError("expected a number, found a condition", self.text, pos)

    def integer(self, value, pos: int) -> _Num:
        n = self.number(value, pos)
        if n.real:
            raise ParseError("expected an integer; use //, math.floor or math.ceil to round a true division",
                             self.text, pos)
        return n

    def condition(self, value, pos: int) -> F.Formula:
        if isinstance(value, F.Formula):
            return value
        n = self.number(value, pos)  # Python truthiness of a number
        if n.real:
            return FL.compare_float("!=", n.expr, Integer(0), _rel_divisors(n.divs, n.expr, Integer(0)))
        return F.rel("!=", n.expr, Integer(0), _rel_divisors(n.divs, n.expr, Integer(0)))

    def checked(self, expr: Expr, pos: int) -> Expr:
        """``expr`` if its expansion stays within the limits, else a ParseError (nothing is expanded)."""
        self.check_size(self.size(expr), pos)
        return expr

    def check_size(self, size: Size, pos: int) -> None:
        limits = self.limits
        for what, value, limit in (("terms", size.monomials, limits.max_monomials),
                                   ("degree", size.degree, limits.max_degree),
                                   ("coefficient bits", round(size.bits), limits.max_coefficient_bits)):
            if value > limit:
                raise ParseError(f"the expression is too large to reason about: expanded, it would have "
                                 f"{what} up to {value}, and the limit is {limit}", self.text, pos)

    def divide(self, a, b, pos: int) -> _Num:
        a, b = self.number(a, pos), self.number(b, pos)
        if b.expr == 0:
            raise ParseError("division by zero", self.text, pos)
        divs = _merge(a, b) | (frozenset() if b.real else _nonzero(b.expr))
        return _Num(FL.true_div(a.expr, b.expr), divs, real=True)

    def floor_divide(self, a, b, pos: int) -> _Num:
        a, b = self.number(a, pos), self.number(b, pos)
        if a.real or b.real:
            return _Num(FL.float_binop("//", a.expr, b.expr), _merge(a, b), real=True)
        return _Num(FloorDiv(a.expr, b.expr), _merge(a, b) | _nonzero(b.expr))

    def modulo(self, a, b, pos: int) -> _Num:
        a, b = self.number(a, pos), self.number(b, pos)
        if a.real or b.real:
            return _Num(FL.float_binop("%", a.expr, b.expr), _merge(a, b), real=True)
        return _Num(Mod(a.expr, b.expr), _merge(a, b) | _nonzero(b.expr))

    def round_to_int(self, value, kind: FL.Rounding, pos: int) -> _Num:
        n = self.number(value, pos)
        if not n.real:
            return n
        node = FL.round_float(kind, n.expr)
        return _Num(node, n.divs | {FL.Defined(node)})

    def power(self, base, exponent, pos: int) -> _Num:
        base, exponent = self.number(base, pos), self.number(exponent, pos)
        e = exponent.expr
        if base.real or exponent.real or (e.is_Integer and e < 0):     # Python's float power
            return _Num(FL.float_binop("**", base.expr, e), _merge(base, exponent), real=True)
        if not (e.is_Integer and 0 <= e <= self.limits.max_exponent):
            raise ParseError(f"exponent must be an integer literal from 0 to {self.limits.max_exponent}",
                             self.text, pos)
        if base.expr.is_Integer:                    # sympy folds a constant power at once: bound it first
            self.checked(sympy.Pow(base.expr, e, evaluate=False), pos)
        return _Num(self.checked(base.expr ** int(e), pos), base.divs)

    def compare(self, op: str, left, right, pos: int) -> F.Formula:
        if isinstance(left, F.Formula) or isinstance(right, F.Formula):
            if not (isinstance(left, F.Formula) and isinstance(right, F.Formula)):
                raise ParseError("cannot compare a condition with a number (Python would compare a bool "
                                 "with an int)", self.text, pos)
            if op not in ("==", "!="):
                raise ParseError(f"cannot compare conditions with {op}", self.text, pos)
            same = F.iff(left, right)
            return same if op == "==" else F.neg(same)
        a, b = self.number(left, pos), self.number(right, pos)
        divs = _rel_divisors(_merge(a, b), a.expr, b.expr)
        if a.real or b.real:
            return FL.compare_float(op, a.expr, b.expr, divs)
        return F.rel(op, a.expr, b.expr, divs)


def parse(text: str, limits: Limits = DEFAULT_LIMITS):
    """Parse ``text`` into a condition (``Formula``) or an integer term (sympy ``Expr``)."""
    if not isinstance(text, str):
        raise TypeError(f"expected guard text, got {type(text).__name__}")
    parser = _Parser(text, limits)
    try:
        value = parser.parse_top()
    except RecursionError:
        raise ParseError("expression nested too deeply", text, 0) from None
    if isinstance(value, F.Formula):
        return value
    n = parser.number(value, 0)
    if n.real:
        raise ParseError("expected an integer expression, found a float expression", text, 0)
    return n.expr


def parse_condition(text, limits: Limits = DEFAULT_LIMITS) -> F.Formula:
    """A ``Formula`` from guard text (a ``Formula`` is returned unchanged)."""
    if isinstance(text, F.Formula):
        return text
    value = parse(text, limits)
    if not isinstance(value, F.Formula):
        raise ParseError("expected a condition such as 'a == b', found an integer expression", text, 0)
    return value


def parse_term(text, limits: Limits = DEFAULT_LIMITS) -> Expr:
    """An integer term from text (a sympy ``Expr`` or ``int`` is returned as a term)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Integer(text)
    if isinstance(text, Expr):
        return text
    value = parse(text, limits)
    if isinstance(value, F.Formula):
        raise ParseError("expected an integer expression, found a condition", text, 0)
    return value
