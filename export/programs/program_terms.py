"""An exported program read as shapeproof terms over the canonical input variables.

Two traces are compared through this view: every symbolic integer an op
receives becomes a term computed *exactly* from the graph's own arithmetic
nodes (``sym_size``, ``+``, ``//``, ``%``, ``sym_max``, and float
arithmetic such as ``math.ceil(T / 16)`` on IEEE doubles), the way the
program computes it at run time, and every tensor's shape and strides are
torch's symbolic ones (``node.meta["val"]``) converted through the sympy
bridge.  Anything without an exact reading (data-dependent sizes, ops
outside the table) raises ``Unreadable``; ``merge.py`` then compares such a
value by the op and arguments that compute it, or keeps the traces apart.
"""
from __future__ import annotations

import math
import operator

import sympy
import torch
from shapeproof import solver as F      # the solver's facade: conditions and the node table
from shapeproof.solver import floats as FL
from shapeproof.tracer.sympy_bridge import UnsupportedExpression, to_term
from sympy import Expr, Integer

__all__ = ["ProgramTerms", "Unreadable", "is_tensor_node", "is_sym_node"]


class Unreadable(ValueError):
    """A value of the program with no exact term over the canonical input variables."""


def _binary(build):
    return lambda read, node: build(read.value(node.args[0]), read.value(node.args[1]))


def _arithmetic(op: str, integer):
    """``a op b`` as Python computes it: on ints exactly, with a float side on doubles."""
    def build(a, b):
        return FL.float_binop(op, a, b) if FL.is_float(a) or FL.is_float(b) else integer(a, b)
    return _binary(build)


def _compare(op):
    def build(a, b):
        return FL.compare_float(op, a, b) if FL.is_float(a) or FL.is_float(b) else F.rel(op, a, b)
    return _binary(build)


def _rounding(kind: F.Rounding):
    return lambda read, node: FL.round_float(kind, read.value(node.args[0]))


def _size(read, node):
    return read.shape(node.args[0])[_dim(node.args[1], read.shape(node.args[0]))]


def _stride(read, node):
    return read.strides(node.args[0])[_dim(node.args[1], read.shape(node.args[0]))]


def _dim(d: int, shape: tuple) -> int:
    return d + len(shape) if d < 0 else d


# Integer nodes by what the graph calls them: Python's operators by the node table's ``infix``
# column, torch's ``sym_*`` functions by its ``names`` column.
_DIVISION = {row.infix: row.cls for row in F.TABLE.values() if row.kind is F.Kind.DIVISION and row.infix}
_CHOICE = F.rows_named(F.Kind.CHOICE)

# FX targets of symbolic integer/boolean arithmetic, each with its exact term (Python semantics)
_SYM_OPS = {
    operator.add: _arithmetic("+", operator.add),
    operator.sub: _arithmetic("-", operator.sub),
    operator.mul: _arithmetic("*", operator.mul),
    operator.floordiv: _arithmetic("//", _DIVISION["//"]),
    operator.mod: _arithmetic("%", _DIVISION["%"]),
    operator.truediv: _binary(FL.true_div),
    operator.neg: lambda read, node: _negate(read.value(node.args[0])),
    torch.sym_float: lambda read, node: FL.to_float(read.value(node.args[0])),
    math.floor: _rounding(F.Rounding.FLOOR),
    math.ceil: _rounding(F.Rounding.CEIL),
    math.trunc: _rounding(F.Rounding.TRUNC),
    torch.sym_int: _rounding(F.Rounding.TRUNC),
    torch.sym_max: _binary(_CHOICE[torch.sym_max.__name__].cls),
    torch.sym_min: _binary(_CHOICE[torch.sym_min.__name__].cls),
    torch.sym_sum: lambda read, node: sympy.Add(*(read.value(a) for a in node.args[0])),
    operator.eq: _compare("=="), operator.ne: _compare("!="), operator.lt: _compare("<"),
    operator.le: _compare("<="), operator.gt: _compare(">"), operator.ge: _compare(">="),
    torch.sym_not: lambda read, node: F.neg(read.value(node.args[0])),
    operator.and_: lambda read, node: F.conj(read.value(node.args[0]), read.value(node.args[1])),
    operator.or_: lambda read, node: F.disj(read.value(node.args[0]), read.value(node.args[1])),
    torch.ops.aten.sym_size.int: _size,
    torch.ops.aten.sym_stride.int: _stride,
    torch.ops.aten.sym_numel.default: lambda read, node: math.prod(read.shape(node.args[0])),
}


def _negate(value):
    return FL.FNeg(value) if FL.is_float(value) else -value


def is_sym_node(node: torch.fx.Node) -> bool:
    """A node computing a symbolic int/bool (shape arithmetic), not a tensor."""
    return node.op == "call_function" and isinstance(node.meta.get("val"), (torch.SymInt, torch.SymBool, int,
                                                                           bool, torch.SymFloat, float))


def is_tensor_node(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)


class ProgramTerms:
    """Terms for the symbolic values of one traced program.

    ``symbols`` maps torch's symbols to terms over the canonical input
    variables (``regions.symbol_terms``).  Shapes and strides come from
    torch's metadata; whether they can be trusted at a point is the caller's
    business (``merge.py`` proves them equal to the reference trace's).
    """

    def __init__(self, program: torch.export.ExportedProgram, symbols: dict, variables: set):
        self.program = program
        self.symbols = symbols
        self.variables = variables
        self._values: dict = {}
        self._shapes: dict = {}
        self._strides: dict = {}

    # -- torch metadata ----------------------------------------------------------------
    def term(self, value) -> Expr:
        """A torch int/SymInt (from metadata) as a term over the canonical variables."""
        if isinstance(value, bool):
            raise Unreadable(f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return Integer(value)
        if not isinstance(value, torch.SymInt):
            raise Unreadable(f"not an integer: {value!r}")
        try:
            term = to_term(value.node.expr, rename=self.symbols)
        except UnsupportedExpression as exc:
            raise Unreadable(str(exc)) from None
        if not term.free_symbols <= self.variables:
            raise Unreadable(f"{term} depends on something other than input sizes")
        return term

    def shape(self, node) -> tuple[Expr, ...]:
        if node not in self._shapes:
            val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
            if not isinstance(val, torch.Tensor):
                raise Unreadable(f"{node} is not a tensor")
            self._shapes[node] = tuple(self.term(s) for s in val.shape)
        return self._shapes[node]

    def strides(self, node) -> tuple[Expr, ...]:
        if node not in self._strides:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise Unreadable(f"{node} is not a tensor")
            self._strides[node] = tuple(self.term(s) for s in val.stride())
        return self._strides[node]

    # -- values the program computes ---------------------------------------------------------
    def value(self, arg):
        """The exact term (or condition, for a symbolic bool) of an integer argument of an op."""
        if isinstance(arg, bool):
            return F.TRUE if arg else F.FALSE
        if isinstance(arg, int):
            return Integer(arg)
        if isinstance(arg, float) and math.isfinite(arg):
            return FL.float_const(arg)
        if not isinstance(arg, torch.fx.Node):
            raise Unreadable(f"not a number: {arg!r}")
        if arg not in self._values:
            build = _SYM_OPS.get(arg.target) if arg.op == "call_function" else None
            if build is None:
                raise Unreadable(f"no exact reading of {arg.format_node()}")
            self._values[arg] = build(self, arg)
        return self._values[arg]
