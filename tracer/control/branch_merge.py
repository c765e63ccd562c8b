"""One trace through a size branch whose two sides agree: the body is taken for every input.

``if W % 4 != 0: x = F.pad(x, (0, 4 - W % 4))`` splits the declared ranges
between a path that pads and one that does not, and a trace follows one of
them; k such stages cost 2**k traces.  Yet where the condition is false the
body would be an identity if its pad amount were 0.  So when Python tests
such an ``if`` (the guard comes from a conditional jump of the user's code,
``branch_sites``), the trace answers so that the body runs, records no
guard, and watches the body run:

* every tensor call of the body goes through ``_BodyMode`` (a
  ``TorchFunctionMode`` pushed for the body only): a pad, slice, resize,
  copy, view or ``cat`` is accepted as an identity *where the condition is
  false* when the engine proves it one there (pads of 0, slices of whole
  dims, a resize to the size the tensor has), after replacing each size
  argument that is not neutral there by a value proven equal to it where
  the condition holds and neutral where it does not (``4 - W % 4`` becomes
  ``(4 - W % 4) % 4``; the replacement is traced, so the program computes it);
* when the body ends (a line event of the frame, ``sys.settrace`` armed for
  the body only), every name it bound that the function reads elsewhere
  must hold, where the condition is false, what it held before: a tensor
  through a chain of those identities from its old value, a size proven
  equal to its old value.

Views between identities are followed as index maps (``view_maps``), so a
chain that takes a table apart and puts it back together is the table.  The
forms with another path (``branch_sites``): an ``if``/``else`` whose one side
only binds names to plain reads (``table = self.table``) takes the other
side; an early ``return self.table`` takes the rest of the function, which
must return it there; an ``else`` that is the end of the ``if`` body with
other values in places takes the body up to there.  Each name the skipped
side binds or reads in place must then hold, where it is skipped, that value.

Every later stage then sees one symbolic size for both sides
(``W + (4 - W % 4) % 4``), so k padding stages cost one trace.  Anything
unexpected raises ``BranchNotMerged`` into the trace, which is then made
again without merging that ``if`` (``refused``): a merge never rests on a
hope.  The identities are those of ``export/programs/identities.py`` (each checked
against eager there), read at the level of the calls Python makes; a copy
(pad, ``cat``, ``contiguous``) laid out unlike its input keeps only its values
(a name holding it at the end is checked for layout), and export checks that
no in-place op of the program writes to memory copies may share.
"""
from __future__ import annotations

import ast
import inspect
import sys
from dataclasses import dataclass, field
from types import FrameType

import sympy
import torch
import torch.nn.functional as F_nn
from torch.overrides import TorchFunctionMode

from shapeproof import solver as S
from shapeproof.shapes import Provenance, capture

from .branch_sites import BranchSite, Refusal, branch_site
from .branch_tests import Unreadable, formula_of, indicator, leaves, steer, test_tree, value_of
from .effects import EFFECTS
from ..torch_internals import contiguous_strides
from ..sympy_bridge import UnsupportedExpression
from . import view_maps as VM

__all__ = ["BranchMerging", "BranchNotMerged", "MergedSite", "no_new_frames"]


class BranchNotMerged(Exception):
    """A body taken for every input is not an identity where its condition is false: trace again without."""

    def __init__(self, key: tuple[str, int], reason: str):
        super().__init__(f"{key[0]}:{key[1]}: {reason}")
        self.key, self.reason = key, reason


@dataclass(frozen=True)
class MergedSite:
    """A branch merged in a trace: where its body is (its ops in the program are found by source line)."""

    key: tuple[str, int]
    filename: str
    body_lines: tuple[int, int]
    condition: S.Formula
    rewrites: tuple[tuple[sympy.Expr, sympy.Expr], ...]   # (size argument, its replacement), engine terms


# torch functions a body may call, besides the identity rules below: questions about a tensor, and calls
# whose results are new values (or views) with no effect
_QUERIES = {*(getattr(torch.Tensor, name) for name in ("size", "dim", "numel", "stride", "__len__",
                                                         "element_size", "nelement")),
            *(inspect.getattr_static(torch.Tensor, name).__get__
              for name in ("shape", "ndim", "dtype", "device", "T", "mT"))}
_FRESH = {*(getattr(torch, name) for name in ("zeros", "ones", "full", "empty", "zeros_like", "ones_like",
                                               "full_like", "empty_like")),
          *(getattr(torch.Tensor, name) for name in (
              "new_zeros", "new_ones", "new_full", "new_empty", "permute", "transpose", "flatten",
              "unsqueeze", "squeeze", "narrow", "expand", "expand_as", "to", "type_as", "float", "__add__",
              "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__neg__"))}


# ---------------------------------------------------------------------------- one body

_MISSING = object()


@dataclass
class _Body:
    """A body being run for every input; ``skipped`` is where the original program would not run it."""

    merging: "BranchMerging"
    site: BranchSite
    frame: FrameType
    tree: object
    condition: S.Formula
    answers: dict                                # the test's comparisons -> the value the trace gives them
    before: dict                                 # bound names read elsewhere -> their value before the body
    entered: bool = False
    derived: dict = field(default_factory=dict)  # id(result) -> (result, the tensor it equals where skipped)
    maps: dict = field(default_factory=dict)     # id(result) -> (result, its IndexMap or None), per body call
    rewrites: list = field(default_factory=list)
    where: Provenance | None = None              # the test, as Python asked it
    returned: object = _MISSING                  # what the frame returned (a body that is the function's end)
    mode: TorchFunctionMode | None = None        # while open: the calls' watcher, and the tracing it replaced
    previous_trace: object = None
    previous_local: object = None

    @property
    def skipped(self) -> S.Formula:
        return S.neg(self.condition)

    # -- proofs ---------------------------------------------------------------
    def term(self, value):
        if isinstance(value, bool):
            raise _Refused("a boolean where a size was expected")
        if isinstance(value, int):
            return sympy.Integer(value)
        if isinstance(value, torch.SymInt):
            try:
                return self.merging.env.conversions().term(value.node.expr)
            except UnsupportedExpression as exc:
                raise _Refused(f"a size the engine cannot read ({exc})") from None
        raise _Refused(f"a {type(value).__name__} where a size was expected")

    def proven(self, goal: S.Formula, side: S.Formula) -> bool:
        return self.merging.env.engine.proven(goal, assuming=(side,), where=capture(start=self.frame))

    def holds(self, goal: S.Formula) -> bool:
        """``goal`` is proven where the body is skipped (``view_maps.Where``)."""
        return self.proven(goal, self.skipped)

    def neutral(self, value, zero):
        """``value``, or a value proven equal to it where the body runs and to ``zero`` where skipped."""
        term = self.term(value)
        if self.proven(S.eq(term, self.term(zero)), self.skipped):
            return value
        for candidate in self._candidates(value, term, zero):
            replaced = self.term(candidate)
            if (self.proven(S.eq(replaced, term), self.condition)
                    and self.proven(S.eq(replaced, self.term(zero)), self.skipped)):
                self.rewrites.append((term, replaced))
                return candidate
        raise _Refused(f"no value of {S.term_str(term)} is {zero} where the body is skipped")

    def _candidates(self, value, term, zero):
        """``value % m`` for the constant divisors of the value and the condition, then the value times the
        condition's 0/1 indicator (shifted by ``zero``)."""
        sides = [rel_side for rel in S.relations(self.condition) for rel_side in (rel.lhs, rel.rhs)]
        moduli = S.constant_divisors([term, *sides])
        if zero == 0:
            for m in sorted(moduli):
                yield value % m
        holds = indicator(self.tree)
        if holds is not None:
            runs = 1 - holds if self.site.runs_where_false else holds
            yield zero + (value - zero) * runs

    def contiguous_where_skipped(self, x: torch.Tensor) -> bool:
        """``x`` is laid out contiguously wherever the body is skipped (so a copy of it has its strides)."""
        if _contiguous_by_form(x):
            return True
        expected, parts = sympy.Integer(1), []
        for size, stride in reversed(list(zip(x.shape, x.stride()))):
            size_term = self.term(size)
            parts.append(S.disj(S.le(size_term, 1), S.eq(self.term(stride), expected)))
            expected = expected * size_term
        return self.proven(S.conj(*parts), self.skipped)

    def laid_out_alike_where_skipped(self, result: torch.Tensor, x: torch.Tensor) -> bool:
        """The copy ``result`` of ``x`` has ``x``'s strides wherever the body is skipped (dims of size 1
        aside, as torch's layout checks leave them).  Eager kernels of the copies merged here allocate by
        the same rule as their meta functions (a clone keeps a dense tensor's strides; a resize or a
        non-zero pad keeps channels-last), so the program's copy is then laid out as the skipped
        original: later kernels see the same strides and compute the same bits, and the program's views,
        traced on ``result``'s strides, hold."""
        if result.dim() != x.dim():
            return False
        if _contiguous_by_form(result) and _contiguous_by_form(x):      # then the shapes decide
            same = [S.eq(self.term(a), self.term(b)) for a, b in zip(result.shape, x.shape)]
            return self.holds(S.conj(*same))
        parts = [S.disj(S.le(self.term(size), 1), S.eq(self.term(r_stride), self.term(x_stride)))
                 for size, r_stride, x_stride in zip(x.shape, result.stride(), x.stride())]
        return self.proven(S.conj(*parts), self.skipped)

    def lays_out_alike(self, a, new: torch.Tensor, old: torch.Tensor) -> bool:
        """``a <op> new`` and ``a <op> old`` (+ - * /, ``new`` with ``old``'s values and dtype) compute the
        same bits laid out alike, wherever the body is skipped, whatever ``new``'s layout: each element is
        computed alone, and TensorIterator orders the result's dims by the first operand whose strides
        tell two dims apart, which is ``a`` for every two dims of size > 1 when ``a`` is contiguous and
        has the result's shape (``new`` only broadcasts into it)."""
        if not isinstance(a, torch.Tensor) or new.dtype != old.dtype or new.device != old.device \
                or a.dim() < new.dim():
            return False
        fits = [S.disj(S.eq(self.term(n), 1), S.eq(self.term(n), self.term(s)))
                for n, s in zip(reversed(new.shape), reversed(a.shape))]
        return self.holds(S.conj(*fits)) and self.contiguous_where_skipped(a)

    def equal_where_skipped(self, new, old, layout: bool = True) -> bool:
        """``new`` holds ``old``'s values wherever the body is skipped (tensors: and is laid out alike,
        unless ``layout`` is False)."""
        if new is old:
            return True
        if isinstance(new, torch.Tensor):
            if not isinstance(old, torch.Tensor):
                return False
            first, seen = new, {id(new)}
            while id(new) in self.derived:
                new = self.derived[id(new)][1]
                if new is old:
                    return True
                if id(new) in seen:
                    return False
                seen.add(id(new))
            found = self.maps.get(id(first), (None, None))[1]
            return (found is not None and first.dtype == old.dtype and VM.is_source(found, old, self)
                    and (not layout or self.laid_out_alike_where_skipped(first, old)))
        if isinstance(new, (tuple, list)) and isinstance(old, (tuple, list)):
            return len(new) == len(old) and all(self.equal_where_skipped(a, b) for a, b in zip(new, old))
        if isinstance(new, (int, torch.SymInt)) and isinstance(old, (int, torch.SymInt)) \
                and not isinstance(new, bool) and not isinstance(old, bool):
            return self.proven(S.eq(self.term(new), self.term(old)), self.skipped)
        return type(new) is type(old) and isinstance(new, (str, float, bool, type(None))) and new == old

    def identity(self, result, source):
        """``result`` has ``source``'s values wherever the body is skipped."""
        if result is not source:                  # ``contiguous`` of a contiguous tensor is the tensor
            self.derived[id(result)] = (result, source)
            self._same_values(result, source)
        return result

    def _same_values(self, result, source) -> None:
        source_map = self.map_of(source)
        self.maps[id(result)] = (result, None if source_map is None else VM.resized(source_map, result, self))

    def copied(self, result, source):
        """``result``, a copy of ``source``, has its values wherever the body is skipped; it is
        ``source`` itself there only if laid out alike (else only its index map says so, and a name
        holding it at the body's end is checked for layout then)."""
        if self.laid_out_alike_where_skipped(result, source):
            return self.identity(result, source)
        self._same_values(result, source)
        return result

    # -- index maps (``view_maps``) -------------------------------------------
    def map_of(self, t: torch.Tensor) -> VM.IndexMap | None:
        """Which elements of a tensor from before the body ``t`` holds where the body is skipped."""
        if id(t) in self.maps:
            return self.maps[id(t)][1]
        try:
            return VM.identity(t, self)         # a tensor from before the body
        except _Refused:
            return None

    def follow(self, func, args, kwargs, result) -> None:
        """Record the index map of a body call's tensor result (None: a new value)."""
        if not isinstance(result, torch.Tensor) or id(result) in self.maps \
                or any(result is a for a in args if isinstance(a, torch.Tensor)):
            return
        try:
            found = _follow(self, func, args, kwargs, result)
        except Exception:          # noqa: BLE001  (a map only ever allows a merge: none is the safe answer)
            found = None
        self.maps[id(result)] = (result, found)


class _Refused(Exception):
    pass


def _contiguous_by_form(t: torch.Tensor) -> bool:
    """``t``'s strides are, expression for expression, the ones torch gives a contiguous tensor of its shape
    (its allocations and its views of contiguous tensors make them so): contiguous at every size, without
    a proof over strides that are products of sizes."""
    return all(_same_expression(a, b) for a, b in zip(t.stride(), contiguous_strides(t.shape)))


def _same_expression(a, b) -> bool:
    a, b = (v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(v) for v in (a, b))
    return a == b


# ---------------------------------------------------------------------------- identity rules, per call

def _bind(func, args, kwargs) -> dict:
    return dict(inspect.signature(func).bind(*args, **kwargs).arguments)


def _pad(body: _Body, func, args, kwargs):
    a = _bind(F_nn.pad, args, kwargs)
    x, mode = a["input"], a.get("mode", "constant")
    if mode != "constant":
        raise _Refused(f"a pad in mode {mode!r}")
    amounts = [body.neutral(p, 0) for p in a["pad"]]
    return body.copied(func(x, amounts, mode, a.get("value")), x)


# resizes that are exact at the same size for every input (tests/test_branch_merge.py checks them on eager):
# nearest modes copy; linear and cubic ones do too with ``antialias`` (without it, 0 * inf is nan)
_EXACT_RESIZE = ("nearest", "nearest-exact")


def _inexact_resize(body) -> str | None:
    """A resize of the body written with a literal mode that is not exact at the same size (ViT's
    ``mode="bicubic", align_corners=False``), which ``_interpolate`` would refuse once traced to it."""
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if not isinstance(node, ast.Call) or getattr(node.func, "attr", getattr(node.func, "id", None)) \
                != "interpolate":
            continue
        given = {k.arg: k.value for k in node.keywords}
        mode, antialias = given.get("mode"), given.get("antialias")
        if isinstance(mode, ast.Constant) and mode.value not in _EXACT_RESIZE and not (
                isinstance(antialias, ast.Constant) and antialias.value is True):
            return f"line {node.lineno}: a resize in mode {mode.value!r}, not exact at the same size"
    return None


def _interpolate(body: _Body, func, args, kwargs):
    a = _bind(F_nn.interpolate, args, kwargs)
    x, size = a["input"], a.get("size")
    exact = a.get("mode", "nearest") in _EXACT_RESIZE or a.get("antialias", False)
    if size is None or a.get("scale_factor") is not None or not exact:
        raise _Refused("a resize that is not exact at the same size")
    spatial = list(x.shape[2:])
    sizes = [size] * len(spatial) if isinstance(size, (int, torch.SymInt)) else list(size)
    if len(sizes) != len(spatial):
        raise _Refused("a resize to another rank")
    same = S.conj(*(S.eq(body.term(s), body.term(d)) for s, d in zip(sizes, spatial)))
    result = func(*args, **kwargs)
    return body.copied(result, x) if body.proven(same, body.skipped) else result


def _getitem(body: _Body, func, args, kwargs):
    x, index = args[0], args[1]
    parts = list(index) if isinstance(index, tuple) else [index]
    result = func(*args, **kwargs)
    if any(p is Ellipsis for p in parts):
        at = parts.index(Ellipsis)
        parts[at:at + 1] = [slice(None)] * (x.dim() - len(parts) + 1)
    if len(parts) > x.dim() or not all(isinstance(p, slice) for p in parts):
        return result
    whole = []
    for part, size in zip(parts, x.shape):
        if part.step not in (None, 1) or part.start not in (None, 0):
            return result
        if part.stop is not None:
            whole.append(S.ge(body.term(part.stop), body.term(size)))
    return body.identity(result, x) if body.proven(S.conj(*whole), body.skipped) else result


def _copy(body: _Body, func, args, kwargs):
    """``clone`` and ``contiguous``.  ``contiguous`` copies only a tensor not laid out contiguously, which
    over merged sizes is a question of their values (a guard); a copy has its values either way."""
    x = args[0]
    if func is torch.Tensor.contiguous:
        memory_format = kwargs.get("memory_format", args[1] if len(args) > 1 else torch.contiguous_format)
        if memory_format is not torch.contiguous_format:
            raise _Refused(f"contiguous({memory_format})")
        result = torch.Tensor.clone(x, memory_format=torch.contiguous_format)
    else:
        result = func(*args, **kwargs)
    return body.copied(result, x)


def _view(body: _Body, func, args, kwargs):
    x = args[0]
    shape = args[1] if len(args) == 2 and isinstance(args[1], (tuple, list, torch.Size)) else args[1:]
    result = func(*args, **kwargs)
    if kwargs or len(shape) != x.dim() or any(isinstance(s, int) and s == -1 for s in shape):
        return result
    same = S.conj(*(S.eq(body.term(s), body.term(d)) for s, d in zip(shape, x.shape)))
    return body.identity(result, x) if body.proven(same, body.skipped) else result


def _cat(body: _Body, func, args, kwargs):
    tensors = list(args[0] if args else kwargs["tensors"])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    result = func(*args, **kwargs)
    if len(tensors) < 2 or any(t.dtype != result.dtype for t in tensors):
        return result
    for keep in tensors:
        others = [t for t in tensors if t is not keep]
        empty = S.conj(*(S.eq(body.term(t.shape[dim]), 0) for t in others if t.dim() == result.dim()))
        if all(t.dim() == result.dim() for t in others) and body.proven(empty, body.skipped):
            return body.copied(result, keep)
    return result


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _dims(args, start: int = 1) -> list[int]:
    rest = args[start:]
    return list(rest[0]) if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)) else list(rest)


def _follow(body: _Body, func, args, kwargs, result: torch.Tensor) -> VM.IndexMap | None:
    """The index map of ``result = func(*args, **kwargs)`` (``view_maps``); None when it has none."""
    T = torch.Tensor
    x = args[0] if args else None
    if func in (torch.cat, torch.concat, torch.concatenate):
        tensors = list(args[0] if args else kwargs["tensors"])
        if any(t.dim() != result.dim() or t.dtype != result.dtype for t in tensors):
            return None
        dim = _dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), result.dim())
        return VM.joined([body.map_of(t) for t in tensors], [body.term(t.shape[dim]) for t in tensors], dim,
                         result, body)
    if not isinstance(x, torch.Tensor) or result.dtype != x.dtype:
        return None
    source = body.map_of(x)
    if source is None:
        return None
    if func is T.__getitem__:
        parts = list(args[1]) if isinstance(args[1], tuple) else [args[1]]
        return VM.index(source, parts, result, body)
    if func is T.narrow and not kwargs:
        dim, start, length = _dim(args[1], x.dim()), args[2], args[3]
        return VM.index(source, [slice(None)] * dim + [slice(start, start + length)], result, body)
    if kwargs:
        return None
    if func is T.transpose:
        order = list(range(x.dim()))
        a, b = _dim(args[1], x.dim()), _dim(args[2], x.dim())
        order[a], order[b] = order[b], order[a]
        return VM.permuted(source, order)
    if func is T.permute:
        return VM.permuted(source, [_dim(d, x.dim()) for d in _dims(args)])
    if func is T.unsqueeze:
        return VM.unsqueezed(source, _dim(args[1], x.dim() + 1))
    if func is T.squeeze:
        return VM.squeezed(source, result, body)
    if func in (T.view, T.reshape, T.flatten, T.view_as, T.reshape_as):
        return VM.reshaped(source, result, body)
    if func in (T.to, T.float, T.type_as):
        return VM.resized(source, result, body)      # the same dtype: the same values
    return None


_RULES = {F_nn.pad: _pad, F_nn.interpolate: _interpolate, torch.Tensor.__getitem__: _getitem,
          torch.Tensor.contiguous: _copy, torch.Tensor.clone: _copy, torch.Tensor.view: _view,
          torch.Tensor.reshape: _view, torch.cat: _cat, torch.concat: _cat, torch.concatenate: _cat}


class _BodyMode(TorchFunctionMode):
    """Every tensor call of a body taken for every input: identities checked, pure calls passed, the rest
    refused."""

    def __init__(self, body: _Body):
        super().__init__()
        self.body = body

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = _RULES.get(func)
        if rule is not None:
            try:
                result = rule(self.body, func, args, kwargs)
            except _Refused as exc:
                self.body.merging.fail(self.body, str(exc))
            self.body.follow(func, args, kwargs, result)
            return result
        if func in _QUERIES:
            return func(*args, **kwargs)
        if func in _FRESH:
            result = func(*args, **kwargs)
            self.body.follow(func, args, kwargs, result)
            return result
        name = getattr(func, "__qualname__", func)
        self.body.merging.fail(self.body, f"it calls {name}, which is not known to be free of effects")


# ---------------------------------------------------------------------------- a trace's merges

class BranchMerging:
    """The branch merges of one trace (``EngineShapeEnv.branch_merging``).

    ``refused``: sites (file, line of the ``if``) this trace must not merge,
    found by an earlier attempt.  ``merged`` lists the merges made, for
    export's check of the program; ``refusals`` says why ``if``s on sizes
    were not merged (for explanations); ``failed`` is set when a merge was
    abandoned mid-trace (the trace is then made again without it).
    """

    def __init__(self, env, refused: frozenset = frozenset()):
        self.env = env
        self.refused = set(refused)
        self.merged: list[MergedSite] = []
        self.refusals: dict[tuple[str, int], str] = {}
        self.failed: BranchNotMerged | None = None
        self._open: _Body | None = None
        # flags whose test was merged (``padded = h % 4 != 0 or ...; if padded: ...``), by frame and name:
        # the flag's value then, and the body's (tree, condition, answers) for later ``if flag:`` tests
        self._flags: dict[tuple[int, str], tuple[FrameType, object, tuple]] = {}

    def decide(self, expr, frame: FrameType) -> bool | None:
        """The value to give the guard ``expr`` asked by ``frame``'s ``if``, or None to let it be a guard."""
        body = self._open
        if body is not None:
            if body.frame is frame and not body.entered and expr in body.answers:
                return body.answers[expr]
            return None
        site = branch_site(frame)
        if site is None or site.key in self.refused:
            return None
        if isinstance(site, Refusal):
            self.refusals.setdefault(site.key, site.reason)
            return None
        try:
            body = self._open_body(site, frame)
        except (_Refused, Unreadable) as exc:
            self.refusals.setdefault(site.key, str(exc))
            return None
        if body is None or expr not in body.answers:
            return None
        self._start(body)
        return body.answers[expr]

    def _open_body(self, site: BranchSite, frame: FrameType) -> _Body | None:
        unseen = EFFECTS.check(site.checked, frame)
        if unseen is not None:
            raise _Refused(unseen)
        inexact = _inexact_resize(site.body)
        if inexact is not None:          # refused now, not after a trace that runs into it
            raise _Refused(inexact)
        tested = self._tested_flag(site, frame)
        if tested is not None:           # ``if flag:`` again: Python's ``or`` left the flag one operand only
            tree, condition, answers = tested
            return _Body(self, site, frame, tree, condition, answers, self._before(site, frame))
        tree = test_tree(site.test, frame, EFFECTS)
        conversions, engine = self.env.conversions(), self.env.engine
        fixed, parts = {}, {}
        for leaf in leaves(tree):
            if isinstance(leaf.value, bool):
                continue
            expr = leaf.value.node.expr
            cond = conversions.condition_or_none(expr)
            if cond is None:
                raise _Refused(f"a condition the engine cannot read: {expr}")
            parts[expr] = cond
            known = engine.statically_known(cond)
            if known is not None:
                fixed[expr] = known
        takes_if_body = not site.runs_where_false     # else the `else`, or the rest past an early return
        answers = steer(tree, takes_if_body, fixed)
        if answers is None:
            raise _Refused("no answer to the test's comparisons takes the body")
        condition = formula_of(tree, parts) if takes_if_body else S.neg(formula_of(tree, parts))
        if engine.statically_known(condition) is not None:
            return None                  # the branch is decided: nothing to merge
        return _Body(self, site, frame, tree, condition, answers, self._before(site, frame))

    @staticmethod
    def _before(site: BranchSite, frame: FrameType) -> dict:
        before = {name: frame.f_locals.get(name, _MISSING) for name in site.read_elsewhere}
        if any(v is _MISSING for v in before.values()):
            raise _Refused("the body binds a name read elsewhere that was unbound before it")
        return before

    def _tested_flag(self, site: BranchSite, frame: FrameType) -> tuple | None:
        """The merged test of a flag an earlier ``if flag:`` of this frame tested, if the flag still holds
        what that test left in it."""
        if not isinstance(site.test, ast.Name):
            return None
        found = self._flags.get((id(frame), site.test.id))
        if found is None or found[0] is not frame or frame.f_locals.get(site.test.id) is not found[1]:
            return None
        return found[2]

    # -- watching the body ----------------------------------------------------
    def _start(self, body: _Body) -> None:
        self._open = body
        body.where = capture(start=body.frame)
        body.mode = _BodyMode(body)
        body.mode.__enter__()
        body.previous_trace, body.previous_local = sys.gettrace(), body.frame.f_trace
        sys.settrace(body.previous_trace if body.previous_trace is not None else no_new_frames)
        body.frame.f_trace = self._line_watcher(body)
        body.frame.f_trace_lines = True

    def _line_watcher(self, body: _Body):
        first, last = body.site.body_lines
        asked_first, asked_last = body.site.asked_lines
        chained = body.frame.f_trace

        def watch(frame, event, arg):
            if chained is not None:
                chained(frame, event, arg)
            if self._open is not body:
                return chained
            if event == "line" and first <= frame.f_lineno <= last:
                body.entered = True
            elif event == "line" and not body.entered and asked_first <= frame.f_lineno <= asked_last:
                pass
            elif event == "exception":
                self._stop(body)
                return chained
            else:
                if event == "return":
                    body.returned = arg
                self._close(body)
                return chained
            return watch
        return watch

    def _stop(self, body: _Body) -> None:
        if self._open is body:
            self._open = None
            assert body.mode is not None, "an open body has its mode"
            body.mode.__exit__(None, None, None)
            body.frame.f_trace = body.previous_local                # type: ignore[assignment]
            sys.settrace(body.previous_trace)                       # type: ignore[arg-type]

    def abandon(self) -> None:
        """Stop watching a body the trace left by an error (the end of a trace that failed)."""
        if self._open is not None:
            self._stop(self._open)

    def _close(self, body: _Body) -> None:
        self._stop(body)
        if not body.entered:
            self.fail(body, "the body did not run where the test was steered into it")
        locals_now = body.frame.f_locals
        for name, old in body.before.items():
            new = locals_now.get(name, _MISSING)
            try:
                same = new is not _MISSING and body.equal_where_skipped(new, old)
            except _Refused:
                same = False
            if not same:
                self.fail(body, f"`{name}`, read after the `if`, differs where the body would be skipped")
        if body.site.returns is not None:
            try:
                returned = value_of(body.site.returns, body.frame, EFFECTS)
                same = body.equal_where_skipped(body.returned, returned)
            except (_Refused, Unreadable):
                same = False
            if not same:
                self.fail(body, f"the function returns other than `{ast.unparse(body.site.returns)}` "
                                "where the early return is taken")
        for name, expr, partner in body.site.substitutes:
            try:
                new, old = locals_now.get(name, _MISSING), value_of(expr, body.frame, EFFECTS)
                same = body.equal_where_skipped(new, old) or (
                    partner is not None and body.equal_where_skipped(new, old, layout=False)
                    and body.lays_out_alike(locals_now.get(partner, _MISSING), new, old))
            except (_Refused, Unreadable):
                same = False
            if not same:
                self.fail(body, f"`{name}` differs from `{ast.unparse(expr)}`, which the `else` reads in its "
                                "place, where the body would be skipped")
        if body.site.flag is not None:
            flag = body.site.flag
            self._flags[(id(body.frame), flag)] = (body.frame, locals_now.get(flag, _MISSING),
                                                   (body.tree, body.condition, body.answers))
        self.env.engine.record_merged_branch(body.condition, body.where, tuple(body.rewrites))
        self.merged.append(MergedSite(body.site.key, body.site.filename, body.site.body_lines, body.condition,
                                      tuple(body.rewrites)))

    def fail(self, body: _Body, reason: str):
        self._stop(body)
        self.refused.add(body.site.key)
        self.failed = BranchNotMerged(body.site.key, reason)
        raise self.failed


def no_new_frames(frame, event, arg):
    """A global trace function that traces no new frame (it only enables the one frame's line events)."""
    return None
