"""Cheap exact cancellation in torch's ``FloorDiv`` while the engine traces.

torch's ``FloorDiv.eval`` (and ``ModularIndexing.eval``) divide base and
divisor by a common factor and pass each quotient through ``sympy.simplify``.
The factor divides every term by construction (an integer gcd times factors
common to every product, ``simple_floordiv_gcd``), so distributing it
(``expand_mul``) already gives the exact quotient; ``simplify`` only restyles
it, at a cost: on a Swin trace (reshape ``-1`` over padded windows) it was
53 s of a 131 s profile, and a trace took 36 s instead of 60 s without it.
The engine decides every guard from the value of a term, not its spelling, so
nothing it proves changes.  A quotient that is not a polynomial with integer
coefficients still goes to ``simplify``.

Only torch's ``functions`` module sees the substitute (its ``sympy`` global is
swapped for a view of sympy with another ``simplify``), only while at least
one engine trace is running, and the view's ``simplify`` is sympy's own on
every other thread, so torch.export outside shapeproof (the bench's
baseline, another thread's export) is untouched.
"""
from __future__ import annotations

import types

import sympy

from .patching import SharedPatch, on_engine_thread
from .torch_internals import sympy_functions

__all__ = ["exact_quotient", "exact_cancellation"]


def exact_quotient(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` (a product with the inverse of a factor of it) as a polynomial, else
    ``sympy.simplify(expr)``."""
    expanded = sympy.expand_mul(expr, deep=False)
    return expanded if _integer_polynomial(expanded) else sympy.simplify(expr)


def _integer_polynomial(expr: sympy.Expr) -> bool:
    for term in sympy.Add.make_args(expr):
        coefficient, rest = term.as_coeff_Mul()
        if not coefficient.is_Integer:
            return False
        for factor in sympy.Mul.make_args(rest):
            if factor.is_Number or (factor.is_Pow and not (factor.exp.is_Integer and factor.exp > 0)):
                return False
    return True


def _simplify(expr, *args, **kwargs):
    if on_engine_thread() and not args and not kwargs:
        return exact_quotient(expr)
    return sympy.simplify(expr, *args, **kwargs)


class _SympyWithExactQuotient(types.ModuleType):
    """sympy, as torch's ``functions`` module sees it, with ``simplify`` replaced by ``exact_quotient`` on a
    thread running an engine trace."""

    simplify = staticmethod(_simplify)

    def __getattr__(self, name):
        return getattr(sympy, name)


_view = _SympyWithExactQuotient("sympy")
# sympy's names as the view's own attributes: torch reads ``sympy.Add`` and the like on every size operation,
# and a module ``__getattr__`` is only the slow fallback of a failed lookup
_view.__dict__.update({name: value for name, value in vars(sympy).items()
                       if not name.startswith("__") and name != "simplify"})
exact_cancellation = SharedPatch(lambda: setattr(sympy_functions, "sympy", _view),
                                 lambda: setattr(sympy_functions, "sympy", sympy))
exact_cancellation.__doc__ = "Within: torch's FloorDiv cancels common factors without ``sympy.simplify``."
