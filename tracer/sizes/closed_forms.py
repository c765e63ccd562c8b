"""An op's output size of one input dim, nested divisions deep, becomes the one division it equals.

torch computes a strided layer's output size from its input's by SymInt
arithmetic, so sizes after k layers nest k divisions; where a size occurs
twice in the next (TensorFlow's "SAME" padding pads by ``1 + E % 2``, the
conv then gives ``(E + E % 2) // 2``), the k-th holds 2**k copies of the
input dim and each question on it costs as much.  Each output size of one
symbol with two divisions or more is written as ``(a*x + b) // c``
(``solver.affine_floor``: ``(H + 2**k - 1) // 2**k``) where the engine proves
the two equal over the symbol's range and the facts known (inside a side of
a cond, under its condition too: the tensor only exists there), so the next
layer starts from one division again.

The size's node is given the equal expression in place: its proxy in the
graph, its hint and every node sharing it are unchanged, and what the
program computes is the same.  torch keys proxies by the node's identity,
not its expression.
"""
from __future__ import annotations

import sympy
import torch

from shapeproof.solver import affine_floor, eq, nested_divisions
from ..sympy_bridge import UnsupportedExpression
from ..torch_internals import FloorDiv, SymNode, pytree

__all__ = ["ClosedForms"]


class ClosedForms:
    """Rewrites the sizes of one engine trace's op outputs (``fake_mode``), memoized per expression and
    side of a cond."""

    def __init__(self, shape_env):
        self.env = shape_env
        self._forms: dict = {}      # (expression, the conds' conditions) -> its closed form or None

    def simplify(self, out) -> None:
        engine = getattr(self.env, "engine", None)
        if engine is None:
            return
        for leaf in pytree.tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                for size in leaf.shape:
                    if isinstance(size, torch.SymInt) and isinstance(size.node, SymNode):
                        self._rewrite(size.node, engine)

    def _rewrite(self, node: SymNode, engine) -> None:
        expr = node._expr
        if not isinstance(expr, sympy.Expr) or expr.is_Atom:
            return
        key = (expr, tuple(engine.assumptions))
        if key not in self._forms:
            self._forms[key] = self._closed_form(expr, engine)
        form = self._forms[key]
        if form is not None:
            node._expr, node._expr_cache, node._expr_ver = form, None, -1

    def _closed_form(self, expr: sympy.Expr, engine) -> sympy.Expr | None:
        if len(expr.free_symbols) != 1:
            return None
        try:
            term = self.env.conversions().term(expr)
        except UnsupportedExpression:
            return None
        if not nested_divisions(term):
            return None
        (symbol,) = expr.free_symbols
        lower = self.env.var_to_range[symbol].lower if symbol in self.env.var_to_range else 0
        fitted = affine_floor(term, int(lower)) if isinstance(lower, (int, sympy.Integer)) else None
        if fitted is None:
            return None
        a, b, c = fitted
        form = a * symbol + b if c == 1 else FloorDiv(a * symbol + b, c)
        try:
            same = eq(term, self.env.conversions().term(form))
        except UnsupportedExpression:
            return None
        return form if engine.proven(same) else None
