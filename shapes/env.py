"""The shape environment: owns every symbol and every decision about sizes.

>>> env = ShapeEnv()
>>> T = env.create_backed_symbol(50, Source("x.size(1)", "x", 1), declared=(2, 1024), dim_name="T")
>>> env.evaluate(f"({T} % 4) != 0")          # true for the example (50), not provable: a guard
True
>>> env.evaluate(f"(1 + ({T} - {T} % 4) // 4) != (4 + {T} - {T} % 4)")   # proven: no guard
True
>>> [str(g.condition) for g in env.guards]
['(s0 % 4) != 0']
>>> report = env.produce_guards()
>>> report.violations[0].counterexample
{'T': 4}

Decisions follow torch.export's documented rules (see tests/test_shape_env.py,
which cites the documentation sentence behind each rule): sizes 0 and 1 in an
example input become constants; other dynamic input dims get the range
``[2, inf)`` intersected with the user's ``Dim``, with a declared minimum of 0
or 1 kept as the user wrote it (for the program's input checks) while tracing
assumes those sizes behave like 2; a question the solver cannot settle is
decided by the example (a guard) for backed sizes and is a data-dependent
error for unbacked ones.
"""
from __future__ import annotations

import contextlib
import itertools
from typing import cast

from sympy import Expr, Integer, Symbol

from shapeproof import solver as S
from shapeproof.solver import (
    DEFAULT_TIMEOUT, FloorDiv, LearnedKind, Solver, Undefined, Verdict, evaluate, parse_condition, parse_term,
    term_str, truth,
)

from .errors import CheckFailed, DataDependentError, InputOutOfRange
from .graph import DependencyGraph
from .knowledge import Knowledge
from .explain import explain as _explain
from .provenance import Provenance, capture
from .records import Guard, MergedBranch, Purpose, Query, RuntimeAssert
from .report import produce_guards as _produce_guards
from .symbols import DimKind, Range, Source, Specialization, SymbolInfo, span_str

__all__ = ["ShapeEnv"]


def _as_condition(cond) -> S.Formula:
    return cond if isinstance(cond, S.Formula) else parse_condition(cond)


def _as_term(expr) -> Expr:
    return parse_term(expr)


class ShapeEnv:
    """Symbols, ranges, learned facts, guards and runtime asserts of one trace.

    ``strategy``/``timeout`` choose the strategy and budget for every question
    (see ``shapeproof.solver.prove``), answered by ``solver`` (a fresh
    ``Solver`` unless one is given: the traces of one export share one, whose
    cached verdicts depend only on the question).  ``specialize_zero_one``
    mirrors torch's setting of the same name.
    """

    def __init__(self, strategy="cascade", timeout: float = DEFAULT_TIMEOUT, specialize_zero_one: bool = True,
                 log_queries: bool = True, solver: Solver | None = None):
        self.solver = solver if solver is not None else Solver(timeout)
        self.strategy = strategy
        self.timeout = timeout
        self.specialize_zero_one = specialize_zero_one
        self.log_queries = log_queries
        self.symbols: dict[Symbol, SymbolInfo] = {}
        self.ranges: dict[Symbol, Range] = {}          # current ranges of the symbols still in use
        self.knowledge = Knowledge()
        self.guards: list[Guard] = []
        self.runtime_asserts: list[RuntimeAssert] = []
        self.merged_branches: list[MergedBranch] = []
        self.queries: list[Query] = []
        self.notes: list[str] = []
        self.specialized: list[Specialization] = []     # dims declared dynamic whose example was 0/1
        self.graph = DependencyGraph()
        # symbol introduced by divisibility -> its value in inputs
        self.derived: dict[Symbol, Expr] = {}
        self._order = itertools.count()
        self._created: dict[Symbol, int] = {}
        self._oblivious = 0
        self._by_dim_name: dict[str, Symbol] = {}
        # the sides of ``torch.cond`` being traced: each condition, and a point where all of them hold
        self.assumptions: list[S.Formula] = []
        # (file, line) of an ``if`` on sizes the tracer could not run as a torch.cond -> why (for its fix)
        self.branch_notes: dict[tuple[str, int], str] = {}
        self._witnesses: list[dict[Symbol, int] | None] = []

    # ------------------------------------------------------------------ symbols
    def create_backed_symbol(self, hint: int, source: Source | str, declared: Range | None = None,
                             name: str | None = None, dim_name: str | None = None, dynamic: bool = True,
                             is_size: bool = True, kind: DimKind = DimKind.STRICT,
                             specialize_zero_one: bool | None = None, uncarried_root: bool = False,
                             lowest: int | None = None) -> Expr:
        """A symbol for an input size (or, with ``is_size=False``, an input int) whose example value is
        ``hint``.

        Returns a constant instead when the dim is static or, like torch.export,
        when the example size is 0 or 1 (noted in ``notes``; a dim the user
        declared dynamic is also reported by ``produce_guards``).
        ``specialize_zero_one`` overrides the environment's setting for this
        symbol (torch's ``backed_size_oblivious`` keeps 0/1 examples symbolic);
        the tracer must pass what torch decided, or the two would disagree on
        whether the dim is a constant.  ``uncarried_root``: the symbol is the
        root ``h`` of derived dims (``32*h``) and no input's dim is ``h`` itself
        (see ``SymbolInfo.uncarried_root``).  ``lowest``: the least size the trace takes into account where
        the 0/1 convention would start at 2 (an example of 0 or 1 moved off to trace elsewhere: the
        program is to serve it too).
        """
        source = source if isinstance(source, Source) else Source(source)
        if not dynamic:
            return Integer(hint)
        specialize = self.specialize_zero_one if specialize_zero_one is None else specialize_zero_one
        if not is_size:
            sym = Symbol(name or f"s{len(self.symbols)}", integer=True)
            span = declared if declared is not None else (None, None)
            self._register(SymbolInfo(sym, True, hint, [source], span, span, dim_name=dim_name, kind=kind),
                           source.path)
            return sym
        lo, hi = declared if declared is not None else (None, None)
        # torch specializes a 0/1 example before it reads the declared range: Dim(min=2) with an example
        # of 1 is the specialization error (fix: the dim is that size), not an example out of range
        if hint in (0, 1) and specialize:
            if declared is not None:       # an error, which says it
                self.specialized.append(Specialization(source, hint, (lo, hi), dim_name))
            else:
                self.notes.append(f"{source} is {hint} in the example input, so it is specialized to the "
                                  f"constant {hint} (torch.export treats example sizes 0 and 1 as static); "
                                  f"use an example with {source} >= 2 to keep it dynamic")
            return Integer(hint)
        if (lo is not None and hint < lo) or (hi is not None and hint > hi):
            raise InputOutOfRange(f"the example input has {source} = {hint}, outside the declared range "
                                  f"{span_str((lo, hi))}" + (f" of {dim_name}" if dim_name else ""))
        if dim_name is not None and dim_name in self._by_dim_name:
            existing = self.symbols[self._by_dim_name[dim_name]]
            existing.sources.append(source)
            existing.uncarried_root = existing.uncarried_root and uncarried_root
            self.graph.add_symbol(existing.symbol, source.path)
            return self._current(existing.symbol)
        sym = Symbol(name or f"s{len(self.symbols)}", integer=True)
        declared = (lo if lo is not None else 0, hi)
        tracing_lo = max(2, declared[0]) if specialize else declared[0]
        if lowest is not None:
            tracing_lo = max(declared[0], min(lowest, tracing_lo))
        info = SymbolInfo(sym, True, hint, [source], declared, (tracing_lo, hi), size_like=True,
                          dim_name=dim_name, kind=kind, uncarried_root=uncarried_root)
        if declared[0] < tracing_lo:
            info.notes.append(f"sizes {declared[0]}..{tracing_lo - 1} are allowed by the spec and assumed to "
                              f"behave like size {tracing_lo} (torch.export's 0/1 convention)")
        self._register(info, source.path)
        if dim_name is not None:
            self._by_dim_name[dim_name] = sym
        return sym

    def create_unbacked_symbol(self, source: Source | str, size_like: bool = False, name: str | None = None,
                               where: Provenance | None = None) -> Symbol:
        """A symbol for a size that depends on data (``.item()``, ``nonzero``): no example value."""
        source = source if isinstance(source, Source) else Source(source)
        if source.where is None:
            source = Source(source.path, source.input, source.dim, source.op, where or capture(source.op))
        count = sum(1 for i in self.symbols.values() if not i.backed)
        sym = Symbol(name or f"u{count}", integer=True)
        span = (0, None) if size_like else (None, None)
        self._register(SymbolInfo(sym, False, None, [source], span, span, size_like=size_like), None)
        return sym

    def _register(self, info: SymbolInfo, input_path: str | None) -> None:
        self.symbols[info.symbol] = info
        self.ranges[info.symbol] = info.range
        self._created[info.symbol] = next(self._order)
        self.graph.add_symbol(info.symbol, input_path)

    def add_source(self, sym: Symbol, source: Source) -> None:
        """Another input dim that is the same symbol (duck sizing or a shared ``Dim``)."""
        info = self.symbols[sym]
        if all(src.path != source.path for src in info.sources):
            info.sources.append(source)
            self.graph.add_symbol(sym, source.path)

    def constrain_range(self, sym: Symbol, lo: int | None, hi: int | None) -> None:
        """Narrow a symbol's current range (``torch._check_is_size``, ``constrain_range`` and the like)."""
        sym = self._current(sym)
        if not isinstance(sym, Symbol) or sym not in self.ranges:
            return
        lo = None if lo is None else int(lo)
        hi = None if hi is None else int(hi)
        cur_lo, cur_hi = self.ranges[sym]
        new_lo = lo if cur_lo is None else (cur_lo if lo is None else max(lo, cur_lo))
        new_hi = hi if cur_hi is None else (cur_hi if hi is None else min(hi, cur_hi))
        self.ranges[sym] = (new_lo, new_hi)
        self.knowledge.version += 1

    def note_specialization(self, sym: Symbol, value: int) -> None:
        """The tracer made ``sym`` the constant ``value`` (torch's replacement): a ``Dim.DYNAMIC`` dim may not
        be (``report`` says so), even where the guards that forced it are beyond what the solver proves."""
        info = self.symbols.get(sym)
        if info is not None:
            info.fixed = value

    def initial_range(self, sym: Symbol) -> Range:
        """The range reasoning started from (declared, raised to 2 for backed input dims)."""
        return self.symbols[sym].range

    def mark_size_like(self, sym: Symbol, where: Provenance | None = None) -> None:
        """``torch._check_is_size``: the symbol is a size, so ``>= 0``, and >= 2 in size-oblivious checks."""
        sym = self._current(sym)
        if isinstance(sym, Symbol) and sym in self.symbols:
            self.symbols[sym].size_like = True
        self.check(S.ge(sym, 0), where=where, message="size-like")

    def relate(self, sym: Symbol, value) -> None:
        """Declare ``sym == value`` (a derived dim such as ``H = 2*h``), eliminating ``sym``."""
        value = self.knowledge.term(_as_term(value))
        self._learn(S.eq(sym, value))

    def _current(self, term):
        return self.knowledge.term(term) if isinstance(term, Expr) else term

    # --------------------------------------------------------------- questions
    def hint(self, expr) -> int | None:
        """The example value of ``expr``, or None when it involves data-dependent sizes."""
        term = self.knowledge.term(_as_term(expr))
        env = self._hint_env(term.free_symbols)
        if env is None:
            return None
        try:
            return evaluate(term, env)
        except Undefined:
            return None

    def _hint_env(self, syms) -> dict | None:
        """The example's values of ``syms``; inside a side of a branch (``assuming``), the side's witness:
        a point in range where its condition holds, which the example need not be."""
        witness = self._witnesses[-1] if self._witnesses else {}
        if witness is None:                      # a side that runs nowhere in range
            return None
        env = {}
        for s in syms:
            info = self.symbols.get(s)
            if s in witness:
                env[s] = witness[s]
            elif info is None or info.hint is None:
                return None
            else:
                env[s] = info.hint
        return env

    def _hint_truth(self, cond: S.Formula) -> bool | None:
        env = self._hint_env(cond.free_symbols)
        return None if env is None else truth(cond, env)

    def bound(self, expr) -> Range:
        """Interval of ``expr`` over the current ranges, after normalization."""
        return self.solver.bounds(self.knowledge.term(_as_term(expr)), self.ranges, self.timeout)

    def simplify(self, expr) -> Expr:
        term = self.knowledge.term(_as_term(expr))
        return self.solver.simplify(term, self.ranges, self.timeout)

    def statically_known(self, cond, size_oblivious: bool = False,
                         where: Provenance | None = None, before_torch: bool = False) -> bool | None:
        """True/False when provable from what is known, else None; never records anything.

        The example values (when all sizes have one) satisfy every fact, so only
        the direction they take can be provable: one solver call instead of two.
        ``before_torch``: the tracer asks before torch's own reasoning had its
        turn, so a proof is not counted as one torch could not make.
        """
        c = self.knowledge.condition(_as_condition(cond))
        purpose = Purpose.STATIC_FIRST if before_torch else Purpose.STATIC
        return self._decide(c, self._hint_truth(c), purpose, size_oblivious or self._oblivious > 0, where)

    def proven(self, goal, assuming=(), where: Provenance | None = None) -> bool:
        """Whether ``goal`` holds for every input in range, given what is known and the ``assuming``
        conditions (a side of a branch); never records anything."""
        c = self.knowledge.condition(_as_condition(goal))
        if isinstance(c, S.Const):
            return c.value
        extra = tuple(self.knowledge.condition(_as_condition(a)) for a in assuming)
        return self._solve(c, Purpose.MERGE, False, where, extra).proven

    def counterexample_over_declared(self, goal) -> dict[str, int] | None:
        """None when ``goal`` holds for every input the declared ranges accept, sizes 0 and 1 included where
        torch.export's convention reasons as if they were 2; else an input where it may not (by the user's
        names: ``{'S': 1}``; empty when the solver finds none but proves nothing).  For a claim the tracer
        makes itself (a rolled loop's trip count): its failure at those sizes would be a crash of the
        tracer's making, not the convention's.  Learned substitutions apply; other facts, learned over the
        raised ranges, do not."""
        c = self.knowledge.condition(_as_condition(goal))
        if isinstance(c, S.Const):
            return None if c.value else {}
        ranges = {}
        for s in c.free_symbols:
            info = self.symbols.get(s)
            if info is not None and info.backed:
                ranges[s] = info.declared
            else:
                ranges[s] = self.ranges.get(s, (None, None))
        verdict = self.solver.prove(c, ranges=ranges, strategy=self.strategy, timeout=self.timeout)
        if verdict.proven:
            return None
        labels = {s.name: info.label for s, info in self.symbols.items()}
        return {labels.get(k, k): v for k, v in (verdict.counterexample or {}).items()}

    def record_merged_branch(self, condition, where: Provenance | None = None,
                             rewrites: tuple[tuple[Expr, Expr], ...] = ()) -> MergedBranch:
        """A branch the tracer took for every input (see ``MergedBranch``); no guard, nothing learned."""
        merged = MergedBranch(len(self.merged_branches), _as_condition(condition), where or capture(),
                              rewrites)
        self.merged_branches.append(merged)
        return merged

    def describe_merge(self, merged: MergedBranch) -> str:
        """A merged branch in the user's names: where, when its body runs, what was replaced."""
        frame = merged.where.frame if merged.where is not None else None
        text = f"{frame.short}: " if frame is not None else ""
        text += f"the body runs where {self.render(merged.condition)}"
        for size, replaced in merged.rewrites:
            text += f"; {self.render(size)} is {self.render(replaced)}"
        return text

    def known_from_ranges(self, cond, ranges: dict) -> bool | None:
        """True/False when provable from ``ranges`` alone (no learned facts), else None."""
        c = _as_condition(cond)
        for goal, value in ((c, True), (S.neg(c), False)):
            if self.solver.prove(goal, ranges=ranges, strategy=self.strategy, timeout=self.timeout).proven:
                return value
        return None

    @contextlib.contextmanager
    def size_oblivious(self):
        """Decide framework-internal checks as if every size-like symbol were >= 2 (no guards on 0/1)."""
        self._oblivious += 1
        try:
            yield
        finally:
            self._oblivious -= 1

    def evaluate(self, cond, where: Provenance | None = None, size_oblivious: bool = False,
                 fallback: bool | None = None) -> bool:
        """The value of ``cond`` for this trace, recording a guard when the example had to decide.

        Proven (or disproven) from what is known: no guard.  Otherwise, backed
        sizes follow the example and the chosen branch becomes a guard; an
        undecidable condition on data-dependent sizes returns ``fallback`` if
        given (torch's ``guard_or_false``/``guard_or_true``) or raises
        ``DataDependentError``.
        """
        asked = _as_condition(cond)
        c = self.knowledge.condition(asked)
        if isinstance(c, S.Const):
            return c.value
        oblivious = size_oblivious or self._oblivious > 0
        hint = self._hint_truth(c)
        if hint is None and self._hint_env(c.free_symbols) is not None:
            raise ZeroDivisionError(f"{self.render(c)} divides by zero for the example inputs")
        if oblivious:
            decided = self._decide(c, None, Purpose.SIZE_OBLIVIOUS, True)
            if decided is not None:
                return decided
        decided = self._decide(c, hint, Purpose.EVALUATE, False)
        if decided is not None:
            return decided
        if hint is None:
            if fallback is not None:
                return fallback
            raise self._data_dependent_error(c, where)
        self._record_guard(c if hint else S.neg(c), asked, where, oblivious)
        return hint

    def check(self, cond, where: Provenance | None = None, message: str = "") -> None:
        """``torch._check(cond)``: an assertion the user makes; it becomes a fact for every later question.

        Over backed sizes only, it must hold for the example and is recorded as
        a guard (an assumption about the inputs that ``produce_guards`` checks
        against the declared ranges).  With data-dependent sizes it becomes a
        runtime assert of the exported program.
        """
        asked = _as_condition(cond)
        c = self.knowledge.condition(asked)
        if c == S.TRUE:
            return
        if c == S.FALSE:
            raise CheckFailed(f"torch._check({asked}) can never hold" + (f": {message}" if message else ""))
        hint = self._hint_truth(c)
        if hint is False:
            raise CheckFailed(f"torch._check({self.render(c)}) is false for the example inputs"
                              + (f": {message}" if message else ""))
        if self._decide(c, True, Purpose.CHECK, False):
            return
        if hint is True:
            self._record_guard(c, asked, where, False, from_check=True)
            return
        if self._decide(S.neg(c), True, Purpose.CHECK, False):
            raise CheckFailed(f"torch._check({self.render(c)}) can never hold given what is known"
                              + (f": {message}" if message else ""))
        self.record_runtime_assert(c, where, message)

    # --------------------------------------------------------------- sides of a branch
    @contextlib.contextmanager
    def assuming(self, cond):
        """Within: ``cond`` holds (one side of a ``torch.cond`` is traced).  Questions are decided under it;
        one it leaves open is answered at a point in range where it and every outer side's condition hold
        (its *witness*), and what is recorded (a guard, a runtime assert) is an implication: ``cond`` implies
        it.  Nothing learned inside a side is learned for the inputs at large."""
        c = self.knowledge.condition(_as_condition(cond))
        self.assumptions.append(c)
        self._witnesses.append(self._find_witness())
        try:
            yield
        finally:
            self.assumptions.pop()
            self._witnesses.pop()

    @property
    def side_runs(self) -> bool:
        """Whether the side being traced runs for some input in range (True outside any side)."""
        return not self._witnesses or self._witnesses[-1] is not None

    @property
    def side_point(self) -> dict[Symbol, int] | None:
        """The point in range at which the side being traced is answered (``assuming``); None outside any
        side, or where no input takes it."""
        return self._witnesses[-1] if self._witnesses else None

    def _find_witness(self) -> dict[Symbol, int] | None:
        """A point in range satisfying what is known and every assumption, near the example (a size moved
        as little as it must, 0 and 1 avoided where they can be: a side traced there would answer questions
        on them that its other inputs answer otherwise); None when no input takes the side.  Symbols no
        assumption mentions keep the example's values."""
        together = S.conj(*self.assumptions)
        if isinstance(together, S.Const):
            return {} if together.value else None
        facts = self.knowledge.relevant_facts(together)
        syms = set(together.free_symbols).union(*(f.free_symbols for f in facts))
        example = {s: info.hint for s, info in self.symbols.items() if info.hint is not None}
        if syms <= example.keys():
            near = self._near_example(together, facts, example)
            if near is not None:
                return near
        verdict = self.solver.prove(S.neg(together), ranges=self._ranges_for(syms, False), facts=facts,
                                    strategy=self.strategy, timeout=self.timeout)
        if verdict.proven:
            return None
        # undecided: the example's values stand in (what is recorded is an implication either way)
        by_name = {s.name: s for s in syms}
        return {by_name[k]: v for k, v in (verdict.counterexample or {}).items() if k in by_name}

    def value_here(self, item) -> bool | int | None:
        """A condition's truth, or a term's value, at the example; inside a side of a branch, at the side's
        witness (None where it cannot be computed there)."""
        if isinstance(item, S.Formula):
            return self._hint_truth(self.knowledge.condition(item))
        return self.hint(item)

    def _near_example(self, cond: S.Formula, facts: tuple, example: dict, reach: int = 64) -> dict | None:
        """The point nearest the example, one symbol moved, where ``cond`` and ``facts`` hold (sizes of 2 and
        more first); None when there is none within ``reach``."""
        def holds(point):
            at = {**example, **point}
            return truth(cond, at) is True and all(truth(f, at) is True for f in facts)

        if holds({}):
            return {}
        found = []
        for s in sorted(cond.free_symbols, key=lambda s: s.name):
            lo, hi = self.ranges.get(s, (None, None))
            for d in range(1, reach + 1):
                for v in (example[s] + d, example[s] - d):
                    if (lo is None or v >= lo) and (hi is None or v <= hi) and holds({s: v}):
                        found.append((v < 2, d, s.name, {s: v}))
                        break
                else:
                    continue
                break
        return min(found, key=lambda f: f[:3])[3] if found else None

    def _under_assumptions(self, c: S.Formula) -> S.Formula:
        """``c`` as it holds for the inputs at large: implied by the sides' conditions."""
        if not self.assumptions:
            return c
        return S.disj(S.neg(S.conj(*self.assumptions)), c)

    # --------------------------------------------------------------- deciding
    def _ranges_for(self, syms, oblivious: bool) -> dict:
        ranges = {}
        for s in syms:
            lo, hi = self.ranges.get(s, (None, None))
            info = self.symbols.get(s)
            if oblivious and info is not None and info.size_like:
                lo = 2 if lo is None else max(lo, 2)
            ranges[s] = (lo, hi)
        return ranges

    def _solve(self, goal: S.Formula, purpose: Purpose, oblivious: bool, where: Provenance | None,
               assuming: tuple[S.Formula, ...] = ()) -> Verdict:
        facts = self.knowledge.relevant_facts(goal) + assuming + tuple(self.assumptions)
        syms = set(goal.free_symbols).union(*(f.free_symbols for f in facts))
        ranges = self._ranges_for(syms, oblivious)
        verdict = self.solver.prove(goal, ranges=ranges, facts=facts, strategy=self.strategy,
                                    timeout=self.timeout)
        if self.log_queries:
            self.queries.append(Query(goal, facts, {s.name: r for s, r in ranges.items()}, verdict.strategy,
                                      verdict.status.value, verdict.seconds, purpose, where or capture()))
        return verdict

    def _decide(self, c: S.Formula, hint: bool | None, purpose: Purpose, oblivious: bool,
                where: Provenance | None = None) -> bool | None:
        """Prove ``c`` or its negation; with a hint only the direction the hint allows can succeed."""
        if isinstance(c, S.Const):
            return c.value
        if hint is not False and self._solve(c, purpose, oblivious, where).proven:
            return True
        if hint is not True and self._solve(S.neg(c), purpose, oblivious, where).proven:
            return False
        return None

    # --------------------------------------------------------------- learning
    def record_guard(self, condition, asked=None, where: Provenance | None = None,
                     size_oblivious: bool = False) -> Guard | None:
        """Record a guard decided elsewhere (torch's ShapeEnv mirrored by the tracer); None if already
        known."""
        c = self.knowledge.condition(_as_condition(condition))
        if isinstance(c, S.Const):
            return None
        return self._record_guard(c, _as_condition(asked) if asked is not None else c, where, size_oblivious)

    def record_runtime_assert(self, condition, where: Provenance | None = None, message: str = "") -> None:
        """Record a runtime assert decided elsewhere; it becomes a fact like ``check`` would make it."""
        c = self.knowledge.condition(_as_condition(condition))
        if isinstance(c, S.Const):
            return
        c = self._under_assumptions(c)
        ra = RuntimeAssert(len(self.runtime_asserts), c, where or capture(), message)
        self.runtime_asserts.append(ra)
        self.graph.add_condition("assert", ra.index, c.free_symbols)
        self._learn(c)

    def _record_guard(self, condition: S.Formula, asked: S.Formula, where, oblivious: bool,
                      from_check: bool = False) -> Guard:
        condition, asked = self._under_assumptions(condition), self._under_assumptions(asked)
        guard = Guard(len(self.guards), condition, asked, where or capture(), oblivious, from_check)
        self.guards.append(guard)
        self.graph.add_condition("guard", guard.index, condition.free_symbols)
        known = set(self.knowledge.replacements)
        self._learn(condition)
        guard.taught = frozenset(s for s, by in self.knowledge.replacements.items()
                                 if s not in known and by.free_symbols <= self.derived.keys())
        return guard

    def _learn(self, fact: S.Formula) -> None:
        fact = self.knowledge.condition(fact)
        learned = self.solver.classify_fact(fact, self.ranges, self._prefer_eliminating)
        if learned.kind is LearnedKind.DIVISIBILITY:
            x, c = cast(Symbol, learned.symbol), cast(int, learned.divisor)
            k = self._derive(x, c)
            self.knowledge.eliminate(x, c * k, self.ranges)
        elif learned.kind is LearnedKind.SUBSTITUTION:
            eliminated, replacement = cast(Symbol, learned.symbol), cast(Expr, learned.replacement)
            self.knowledge.eliminate(eliminated, replacement, self.ranges)
            for s in replacement.free_symbols:
                self.graph.add_derivation(eliminated, s)
        elif learned.kind is LearnedKind.FACT:
            implied = self._implied_divisibility(fact)
            if implied is None:
                self.knowledge.add_fact(fact, self.ranges)
            else:
                x, c = implied
                self.knowledge.eliminate(x, c * self._derive(x, c), self.ranges)
                self._learn(fact)        # what the fact says beyond it, in terms of the quotient

    def _implied_divisibility(self, fact: S.Formula) -> tuple[Symbol, int] | None:
        """A divisibility ``x % c == 0`` that ``fact`` implies without stating it, proven under what is known.

        Learned like a stated one, it turns every later ``x // c`` into a
        symbol: the questions that follow ``pixel_unshuffle``'s numel check
        become algebra instead of z3 queries with ``//`` in their facts.
        """
        for x, c in S.divisibility_candidates(fact):
            info = self.symbols.get(x)
            if info is None or info.hint is None or info.hint % c:
                continue                 # the fact holds at the example, so x % c == 0 must too
            goal = S.eq(S.Mod(x, Integer(c)), Integer(0))
            if self._solve(goal, Purpose.LEARN, False, None, assuming=(fact,)).proven:
                return x, c
        return None

    def _derive(self, x: Symbol, c: int) -> Symbol:
        """A symbol ``k`` with ``x == c*k`` (``x`` is divisible by ``c``)."""
        info = self.symbols[x]
        lo, hi = self.ranges.get(x, info.range)
        k = Symbol(f"{x.name}_{c}", integer=True)
        span = (None if lo is None else -((-lo) // c), None if hi is None else hi // c)
        hint = None if info.hint is None else info.hint // c
        label = f"{info.label} / {c}"
        derived = SymbolInfo(k, info.backed, hint, [Source(label)], span, span, info.size_like,
                             kind=info.kind)
        self._register(derived, None)
        self.graph.add_derivation(x, k)
        self.derived[k] = FloorDiv(x, c)
        return k

    def creation_order(self, sym: Symbol) -> int:
        """When ``sym`` was created, relative to the others (0 for a symbol not made here)."""
        return self._created.get(sym, 0)

    def _prefer_eliminating(self, candidates: list[Symbol]) -> Symbol | None:
        """Eliminate a data-dependent symbol before a backed one, else the newest symbol."""
        known = [s for s in candidates if s in self.symbols]
        if not known:
            return None
        return max(known, key=lambda s: (not self.symbols[s].backed, self._created[s]))

    # --------------------------------------------------------------- messages
    def label_map(self) -> dict[Symbol, Symbol]:
        """Symbol -> a symbol named for what the user sees (Dim name or source path)."""
        out = {}
        for sym, info in self.symbols.items():
            out[sym] = Symbol(info.label, integer=True)
        for k, value in self.derived.items():
            out[k] = Symbol(f"({_render_term(value, out)})", integer=True)
        return out

    def render(self, f) -> str:
        """Text of a condition or term in the user's names."""
        mapping = self.label_map()
        if isinstance(f, S.Formula):
            return str(S.substitute(f, {s: mapping[s] for s in f.free_symbols if s in mapping}))
        return _render_term(f, mapping)

    def _origins(self, symbols) -> dict[str, str]:
        """Where each unbacked symbol among ``symbols`` came from, by name."""
        origins = {}
        for s in sorted(symbols, key=lambda s: s.name):
            if s in self.symbols and not self.symbols[s].backed:
                src = self.symbols[s].sources[0]
                origins[s.name] = f"{src.path}" + (f", created at {src.where}" if src.where
                                                   and src.where.frame
                                                   else "")
        return origins

    def concrete_value_error(self, term, where: Provenance | None = None) -> DataDependentError:
        """The error for code asking a Python int of a term that depends on data (``int(t.item())``)."""
        where = where or capture()
        text = term_str(_as_term(term))
        origins = self._origins(_as_term(term).free_symbols)
        suggestions = [f"torch._check({text} >= 0)"]
        lines = [f"The code asks for the concrete value of `{text}`, which depends on data (unbacked sizes) "
                 f"and is only known when the program runs."]
        lines += [f"  {name} = {origin}" for name, origin in origins.items()]
        if where.frame is not None:
            lines.append(f"  asked at {where}")
        lines.append("Keep it symbolic: drop the int(...) (or other Python conversion) around it and use the "
                     "value as it is; say what you know about it with torch._check, e.g.")
        lines += [f"  {s}" for s in suggestions]
        return DataDependentError("\n".join(lines), text, origins, suggestions, where)

    def _data_dependent_error(self, c: S.Formula, where: Provenance | None) -> DataDependentError:
        where = where or capture()
        origins = self._origins(c.free_symbols)
        text = str(c)
        suggestions = [f"torch._check({text})", f"torch._check({S.neg(c)})"]
        lines = [f"Could not decide `{text}` while tracing: it depends on data (unbacked sizes)."]
        lines += [f"  {name} = {origin}" for name, origin in origins.items()]
        if where.frame is not None:
            lines.append(f"  asked at {where}")
            note = self.branch_notes.get((where.frame.filename, where.frame.lineno))
            if note:
                lines.append(f"  the if there could not run as a torch.cond: {note}")
        lines.append("If you know which way it goes, say so before that line so tracing can continue:")
        lines += [f"  {s}" for s in suggestions]
        return DataDependentError("\n".join(lines), text, origins, suggestions, where)

    # --------------------------------------------------------------- reporting
    @property
    def discharged(self) -> list[Query]:
        """Questions settled by proof that torch's own reasoning left open (each one a guard torch would
        otherwise have recorded); those asked before torch had its turn are left out, as torch might have
        settled them itself."""
        return [q for q in self.queries if q.status == "proven" and not q.asked_before_torch]

    def produce_guards(self, strategy=None, timeout: float | None = None):
        """Check every guard against the declared ranges; see ``report.GuardReport``.

        The trace's questions end here: the solver drops the values it kept to
        answer them faster (an export keeps each trace's environment alive).
        """
        report = _produce_guards(self, strategy or self.strategy, timeout or self.timeout)
        self.solver.release()
        return report

    def explain(self, item):
        """Structured and readable explanation of a guard, violation or runtime assert."""
        return _explain(self, item)


def _render_term(term: Expr, mapping: dict) -> str:
    return term_str(term.xreplace({s: mapping[s] for s in term.free_symbols if s in mapping}))
