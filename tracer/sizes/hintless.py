"""Questions torch answers itself for sizes it has no example of, answered the same way over backed sizes.

torch asks some questions of sizes only to choose among ways of computing
the same fake tensor, and for a size without a hint (an unbacked one) it
answers them without a guard, by rules written so that every answer is right:

* ``guard_or_false`` / ``guard_or_true``: the caller names the answer to take
  when the question cannot be settled, and is correct either way (at worst
  slower, or with a ``torch._check`` it adds, which the engine judges as any
  other assertion);
* ``size == 1`` (or ``size > 1``) asked by stride and memory-format code: a
  size of 1 leaves its stride free, so the answer only picks strides;
  torch's size-oblivious rule answers as if the size were at least 2;
* the fake output of a view, computed by torch's meta for views of sizes
  without a hint, which asks neither;
* a stride compared with the one contiguity expects, asked by ``contiguous()``
  (``stride != expected`` means "not contiguous"): answered so, the tensor is
  copied, and the copy is laid out contiguously, as ``contiguous()`` leaves
  every tensor (VitDet's and SAM's crop of a padded window grid).

Over backed sizes torch asks the same questions as guards, so a reduced grid
that is 1 at the bottom of a range (``(H - 1) // 32 + 1``, spatial-reduction
attention) restricts the range to where it is not, and each cell of answers
needs a trace.  None of these answers reaches the program's ops: export's
graph keeps ``reshape``, ``view``, ``linear`` and ``convolution`` as operators
whose kernels lay out their results when the program runs, and a
``contiguous`` of a tensor the fake calls non-contiguous stays in it as a
copy, which changes no value.  So a question of backed sizes that the engine
cannot settle over the whole range, asked by torch's layout code
(``LAYOUT_FUNCTIONS``, the C++ kernels of ``LAYOUT_OPS``), gets the answer
torch gives a hintless size, and no guard.  Broadcasting (``BROADCAST_FUNCTIONS``)
asks ``size == 1`` where either answer gives the same common shape; only a size
computed by division is answered so there: an input dim and its affine
relatives keep torch's backed answers, which its 0/1 rules and the relations
broadcasting records between dims rest on.
"""
from __future__ import annotations

import dis
import functools
from types import CodeType, FrameType
from typing import Callable

import sympy
import torch

from ..patching import SharedPatch
from ..user_source import instructions
from ..sympy_bridge import divides
from ..torch_internals import (
    ASSERTING_FUNCTIONS, BROADCAST_FUNCTIONS, LAYOUT_FUNCTIONS, LAYOUT_METHODS, LAYOUT_OPS, OP_CALLS,
    SHAPE_ENV_MODULES, TORCH_FUNCTION_HOOK, Mod, op_schema, set_view_hint_test, view_hint_test,
)

__all__ = ["hintless_answer", "layout_question", "hintless_views"]

# how far above evaluate_expr a layout function may ask (torch's helpers nest a few calls deep)
_LAYOUT_DEPTH = 25
_RELATIONS = (sympy.Eq, sympy.Ne, sympy.Gt, sympy.Ge, sympy.Lt, sympy.Le)


def hintless_answer(expr, fallback_value, frame: FrameType,
                    at_least_one: Callable) -> tuple[str, bool] | None:
    """The answer torch gives ``expr`` for sizes without a hint, with the rule's name; None when torch would
    guard.  ``frame``: evaluate_expr's caller.  ``at_least_one(e)``: whether the engine proves ``e >= 1``."""
    asking = layout_question(frame)
    if asking is None:
        return None
    where, broadcasting = asking
    if fallback_value is not None:
        if broadcasting and not _reduced_size_is_one(expr):
            return None
        return f"guard_or in {where}", bool(fallback_value)
    if broadcasting:
        return None
    answer = _as_if_at_least_two(expr, at_least_one)
    if answer is None and where in _CONTIGUOUS:
        answer = _strides_differ(expr)
        return None if answer is None else (f"not contiguous in {where}", answer)
    return None if answer is None else (f"size-oblivious in {where}", answer)


_CONTIGUOUS = ("Tensor.contiguous", "aten::contiguous")


def _strides_differ(expr) -> bool | None:
    """``expr``, two sizes' products compared for (in)equality, answered as if they differed: torch's
    contiguity test asks ``stride != expected`` and returns "not contiguous" when it holds."""
    if isinstance(expr, (sympy.Eq, sympy.Ne)) and not (expr.lhs.is_number or expr.rhs.is_number):
        return isinstance(expr, sympy.Ne)
    return None


def _reduced_size_is_one(expr) -> bool:
    """Whether ``expr`` asks if a size computed by division (``(H - 1) // 32 + 1``, a product of such) is 1.
    An input dim and its affine relatives keep torch's answer for backed sizes: there torch's 0/1 rules and
    the relations broadcasting records between dims are the spec (``u[1:] + w`` ties ``w`` to ``u - 1``)."""
    if not isinstance(expr, (sympy.Eq, sympy.Ne)) or 1 not in (expr.lhs, expr.rhs):
        return False
    size = expr.rhs if expr.lhs == 1 else expr.lhs
    return any(divides(type(node)) for node in sympy.preorder_traversal(size))


def _as_if_at_least_two(expr, at_least_one: Callable) -> bool | None:
    """``expr``, a size compared with 1 or 2, as if the size were at least 2 (torch's size-oblivious
    meaning); None when it is no such comparison, or its answer is not one for every size from 2 up."""
    if not isinstance(expr, _RELATIONS):
        return None
    size, bound = expr.lhs, expr.rhs
    if size.is_number and not bound.is_number:
        size, bound, relation = bound, size, expr.reversed.func
    else:
        relation = expr.func
    if not bound.is_number or size.is_number:
        return None
    factor, unscaled = size.as_content_primitive()      # a stride per element: 16*n != 16 is n != 1
    if factor.is_positive and bound / factor in (1, 2):
        size, bound = unscaled, bound / factor
    if bound not in (1, 2) or not at_least_one(size):
        return None
    answers = {bool(relation(value, bound)) for value in (2, 3, 2**62)}     # one answer from 2 up
    return answers.pop() if len(answers) == 1 else None


def layout_question(frame: FrameType | None) -> tuple[str, bool] | None:
    """Which layout code asks, walking out from ``frame`` (evaluate_expr's caller), and whether it is
    broadcasting (``BROADCAST_FUNCTIONS``); None for any other code, and for an assertion."""
    while frame is not None and frame.f_globals.get("__name__") in SHAPE_ENV_MODULES:
        if frame.f_code.co_name in ASSERTING_FUNCTIONS:
            return None
        frame = frame.f_back
    if frame is None:
        return None
    kernel = _kernel_asking(frame)
    if kernel is not None:
        return kernel, False
    for _ in range(_LAYOUT_DEPTH):
        if frame is None or frame.f_code.co_name in ASSERTING_FUNCTIONS:
            return None
        place = (frame.f_globals.get("__name__"), frame.f_code.co_name)
        if place in LAYOUT_FUNCTIONS or place in BROADCAST_FUNCTIONS:
            return ".".join(place), place in BROADCAST_FUNCTIONS
        frame = frame.f_back
    return None


def _kernel_asking(frame: FrameType) -> str | None:
    """The layout operator whose C++ kernel asked, when ``frame`` (the first Python frame outside the shape
    environment) is the call into it: an OpOverload call, a Tensor method through export's
    ``__torch_function__``, or a Tensor method called straight from Python code (torch's decompositions)."""
    holder = OP_CALLS.get((str(frame.f_globals.get("__name__")), frame.f_code.co_name))
    if holder is not None:
        schema = op_schema(frame.f_locals.get(holder))
        return schema.name if schema is not None and schema.name in LAYOUT_OPS else None
    if frame.f_code.co_name == TORCH_FUNCTION_HOOK:
        name = getattr(frame.f_locals.get("func"), "__name__", None)
    else:
        name = _method_called(frame)
    return f"Tensor.{name}" if name in LAYOUT_METHODS else None


def _method_called(frame: FrameType) -> str | None:
    """The name of the method ``frame`` is calling right now (``x.reshape(...)``), read from its bytecode:
    the last attribute load before the call that starts where the call does (the receiver may itself be a
    call, ``x.expand(s).reshape(n, -1)``, whose load starts there too but comes earlier)."""
    table = instructions(frame.f_code)
    found = table.get(frame.f_lasti)
    if found is None or found[0] != "CALL" or found[1] is None:
        return None
    start = (found[1].lineno, found[1].col_offset)
    loads = [name for offset, where, name in _attribute_loads(frame.f_code)
             if offset < frame.f_lasti and where == start]
    return loads[-1] if loads else None


@functools.lru_cache(maxsize=512)
def _attribute_loads(code: CodeType) -> tuple[tuple[int, tuple, str], ...]:
    """Each attribute load of ``code``: its offset, where its expression starts, the attribute's name."""
    return tuple((i.offset, (i.positions.lineno, i.positions.col_offset), i.argval)
                 for i in dis.get_instructions(code)
                 if i.opname in _ATTRIBUTE_LOADS and i.positions is not None)


_ATTRIBUTE_LOADS = ("LOAD_METHOD", "LOAD_ATTR")


# -- views --------------------------------------------------------------------------------------------------

_torch_view_hint_test = view_hint_test()


def _without_hints_in_engine_traces(a, shape) -> bool:
    """torch's test; and, in an engine trace, true of a view that only regroups: its target shape has as
    many elements as its input on every size in range (proven from the ranges alone).  Such a view asks
    nothing about its sizes but how to lay them out.  A view whose element count is equal only on some
    sizes keeps torch's own meta, so its checks stay what torch records."""
    if _torch_view_hint_test(a, shape):
        return True
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    envs = [size.node.shape_env for size in [*a.shape, *shape]
            if isinstance(size, torch.SymInt) and getattr(size.node.shape_env, "hintless_views", False)]
    if not envs:
        return False
    if any(not isinstance(size, (int, torch.SymInt)) for size in shape):
        return False
    given = [size for size in shape if not (isinstance(size, int) and size == -1)]
    if len(shape) - len(given) > 1 or any(isinstance(size, int) and size < 0 for size in given):
        return False
    count, given_count = _product(a.shape), _product(given)
    # a -1 takes what the given sizes leave: the counts agree where they divide the input's
    inferring = len(given) < len(shape)
    same_count = sympy.Eq(Mod(count, given_count), 0) if inferring else sympy.Eq(count, given_count)
    return same_count == sympy.true or envs[0]._maybe_evaluate_static(same_count, axioms=()) == sympy.true


def _product(sizes) -> sympy.Expr:
    out = sympy.Integer(1)
    for size in sizes:
        out *= size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)
    return out


hintless_views = SharedPatch(lambda: set_view_hint_test(_without_hints_in_engine_traces),
                             lambda: set_view_hint_test(_torch_view_hint_test))

