"""``SymNode.expr`` answers from its cache first while the engine traces.

torch's ``SymNode.expr`` caches the replaced expression by the ShapeEnv's
replacements version, but asks ``self._expr.is_number`` before looking at the
cache, and sympy computes ``is_number`` afresh on every call by walking the
expression.  Every arithmetic or comparison on a ``SymInt`` reads ``expr``
several times: a ViT export reads it ~100,000 times, and the walks were ~10%
of the whole export (1.65 s -> 1.48 s per torch.export call).

The fast path below returns exactly what torch's getter returns: the cache
is only ever filled for an expression that is not a number, and with
version 0 both return ``_expr`` itself; everything else goes to torch's own
getter.  Like ``exact_cancel``, it is installed only while at least one
engine trace runs, so torch.export outside shapeproof (the bench's baseline)
is untouched, and on any other thread the getter is torch's own.
"""
from __future__ import annotations

from .patching import SharedPatch, on_engine_thread
from .torch_internals import SymNode

__all__ = ["cached_sym_exprs"]

_torch_expr = SymNode.__dict__["expr"]


def _expr(node):
    expr = node._expr
    shape_env = node.shape_env
    if shape_env is not None and not isinstance(expr, int) and on_engine_thread():
        version = shape_env._replacements_version_counter
        if version == 0:
            return expr
        if node._expr_cache is not None and version == node._expr_ver:
            return node._expr_cache
    return _torch_expr.fget(node)


cached_sym_exprs = SharedPatch(lambda: setattr(SymNode, "expr", property(_expr, doc=_torch_expr.__doc__)),
                               lambda: setattr(SymNode, "expr", _torch_expr))
cached_sym_exprs.__doc__ = "Within: ``SymNode.expr`` reads its cached replacement before ``is_number``."
