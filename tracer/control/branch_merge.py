"""One trace through a size branch whose two sides agree: the body is taken for every input.

``if W % 4 != 0: x = F.pad(x, (0, 4 - W % 4))`` splits the declared ranges
between a path that pads and one that does not, and a trace follows one of
them; k such stages cost 2**k traces.  Yet where the condition is false the
body would be an identity if its pad amount were 0.  So when Python tests
such an ``if`` (the guard comes from a conditional jump of the user's code,
``branch_sites``), the trace answers so that the body runs, records no
guard, and watches the body run:

* every tensor call of the body goes through ``body_rules.BodyMode`` (a
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
import sys
from dataclasses import dataclass, field
from types import FrameType

import sympy
import torch
from torch.overrides import TorchFunctionMode

from shapeproof import solver as S
from shapeproof.shapes import Provenance, capture

from .branch_sites import BranchSite, Refusal, SiteAbandoned, branch_site
from .branch_tests import Unreadable, formula_of, indicator, leaves, steer, test_tree, value_of
from .effects import EFFECTS
from ..torch_internals import contiguous_strides
from ..sympy_bridge import UnsupportedExpression
from . import view_maps as VM
from .body_rules import BodyMode, Refused, follow, inexact_resize

__all__ = ["BranchMerging", "BranchNotMerged", "MergedSite", "no_new_frames"]


class BranchNotMerged(SiteAbandoned):
    """A body taken for every input is not an identity where its condition is false: trace again without."""


@dataclass(frozen=True)
class MergedSite:
    """A branch merged in a trace: where its body is (its ops in the program are found by source line)."""

    key: tuple[str, int]
    filename: str
    body_lines: tuple[int, int]
    condition: S.Formula
    rewrites: tuple[tuple[sympy.Expr, sympy.Expr], ...]   # (size argument, its replacement), engine terms


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
            raise Refused("a boolean where a size was expected")
        if isinstance(value, int):
            return sympy.Integer(value)
        if isinstance(value, torch.SymInt):
            try:
                return self.merging.env.conversions().term(value.node.expr)
            except UnsupportedExpression as exc:
                raise Refused(f"a size the engine cannot read ({exc})") from None
        raise Refused(f"a {type(value).__name__} where a size was expected")

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
        raise Refused(f"no value of {S.term_str(term)} is {zero} where the body is skipped")

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
        except Refused:
            return None

    def follow(self, func, args, kwargs, result) -> None:
        """Record the index map of a body call's tensor result (None: a new value)."""
        if not isinstance(result, torch.Tensor) or id(result) in self.maps \
                or any(result is a for a in args if isinstance(a, torch.Tensor)):
            return
        try:
            found = follow(self, func, args, kwargs, result)
        except Exception:          # noqa: BLE001  (a map only ever allows a merge: none is the safe answer)
            found = None
        self.maps[id(result)] = (result, found)


def _contiguous_by_form(t: torch.Tensor) -> bool:
    """``t``'s strides are, expression for expression, the ones torch gives a contiguous tensor of its shape
    (its allocations and its views of contiguous tensors make them so): contiguous at every size, without
    a proof over strides that are products of sizes."""
    return all(_same_expression(a, b) for a, b in zip(t.stride(), contiguous_strides(t.shape)))


def _same_expression(a, b) -> bool:
    a, b = (v.node.expr if isinstance(v, torch.SymInt) else sympy.Integer(v) for v in (a, b))
    return a == b


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
        except (Refused, Unreadable) as exc:
            self.refusals.setdefault(site.key, str(exc))
            return None
        if body is None or expr not in body.answers:
            return None
        self._start(body)
        return body.answers[expr]

    def _open_body(self, site: BranchSite, frame: FrameType) -> _Body | None:
        unseen = EFFECTS.check(site.checked, frame)
        if unseen is not None:
            raise Refused(unseen)
        inexact = inexact_resize(site.body)
        if inexact is not None:          # refused now, not after a trace that runs into it
            raise Refused(inexact)
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
                raise Refused(f"a condition the engine cannot read: {expr}")
            parts[expr] = cond
            known = engine.statically_known(cond)
            if known is not None:
                fixed[expr] = known
        takes_if_body = not site.runs_where_false     # else the `else`, or the rest past an early return
        answers = steer(tree, takes_if_body, fixed)
        if answers is None:
            raise Refused("no answer to the test's comparisons takes the body")
        condition = formula_of(tree, parts) if takes_if_body else S.neg(formula_of(tree, parts))
        if engine.statically_known(condition) is not None:
            return None                  # the branch is decided: nothing to merge
        return _Body(self, site, frame, tree, condition, answers, self._before(site, frame))

    @staticmethod
    def _before(site: BranchSite, frame: FrameType) -> dict:
        before = {name: frame.f_locals.get(name, _MISSING) for name in site.read_elsewhere}
        if any(v is _MISSING for v in before.values()):
            raise Refused("the body binds a name read elsewhere that was unbound before it")
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
        body.mode = BodyMode(body)
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
            except Refused:
                same = False
            if not same:
                self.fail(body, f"`{name}`, read after the `if`, differs where the body would be skipped")
        if body.site.returns is not None:
            try:
                returned = value_of(body.site.returns, body.frame, EFFECTS)
                same = body.equal_where_skipped(body.returned, returned)
            except (Refused, Unreadable):
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
            except (Refused, Unreadable):
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
