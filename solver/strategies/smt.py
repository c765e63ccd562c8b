"""The ``z3`` strategy: decide the goal with Z3's integer arithmetic.

Encoding, chosen by measurement on torch 2.13's test guards:
native SMT-LIB ``div``/``mod`` on Int terms decided every test guard in
2-7 ms, while torch's validator encoding (``ToInt(ToReal/ToReal)`` under
QF_NRA), q/r auxiliaries without bounds and bit-vectors were 10-1000x slower
or returned unknown on ``(2*T*T)//T == 2*T``.  SMT-LIB division is Euclidean,
which equals Python's floor division whenever the divisor is positive, so:

* a divisor that interval analysis shows positive uses ``div``/``mod`` as is;
* a negative one uses ``(-a) div (-b)`` and ``-((-a) mod (-b))``;
* an unknown sign gets ``If(b > 0, ...)`` over both.

SMT-LIB ``x div 0`` is an unconstrained value, so each relation carries
``b != 0`` for its divisors (see ``formula``); Python's ``or`` is encoded left to right as it
evaluates, sympy's ``Or`` as any operand holding.
Interval bounds of division nodes are added as hints, guarded by every divisor
within the node being nonzero, so they never constrain those free values.
``math.isqrt(n)`` is a fresh integer ``r`` with ``r >= 0, r*r <= n < (r+1)**2``
where ``n >= 0`` (its row's ``Defining`` column): one ``r`` per point, so a model
is a counterexample and a proof holds.  Z3
runs under a deterministic ``rlimit`` and a wall-clock timeout; running out is
UNKNOWN, never a verdict.  It does not always stop at either (a sum of 199
floor divisions ran 7 s under a 0.5 s timeout), so it runs in a helper process
that is ended when it overruns (``z3_process``); the question goes there as
SMT-LIB text.

Float nodes have no encoding: each integer-valued float node (``math.floor`` of
a float, a float comparison) is a free integer within its interval, and whether
it evaluates is a free boolean that every relation reading it requires (true
where the enclosures show it raises nowhere in the box, false where it is
defined nowhere).  Where the float is an affine chain (``float(t) * 0.1 * 3``,
``t / 16``) the integer is also bound to a linear relaxation of its exact value
(``relax``).  What Python computes is one assignment of those, so a proof holds;
a model is a counterexample only if Python says so at its point (else the answer
is unknown).
"""
from __future__ import annotations

import threading

import sympy
import z3
from sympy import Expr, Symbol

from ..language import formula as F
from . import relax, z3_process
from ..problems.bounds import Bounds, INF
from ..language.nodes import FLOAT_WRAPPERS, Defined, Defining, iter_nodes, row_of
from ..problems.deadline import Deadline, OutOfTime
from ..problems.problem import Problem
from ..problems.strategy import Outcome, Strategy, check_counterexample, proven, refuted, unknown
from ..language.terms import divisors

__all__ = ["Z3Strategy", "Encoder"]

_writing = threading.local()


def _context() -> z3.Context:
    """This thread's Z3 context for writing questions (Z3's contexts are not thread-safe).

    Questions are only written here; each is solved in a fresh context of the
    helper process (``z3_server``).  Measured: in a shared context the same
    query was proven in 20 ms, then timed out when asked again (learned state
    and the cumulative ``rlimit`` counter carry over), so verdicts depended on
    the queries before them; a fresh context makes every verdict a function of
    the query alone, which replaying a query log relies on.  Writing needs no
    fresh one, and making one costs 3-6 ms.
    """
    ctx = getattr(_writing, "ctx", None)
    if ctx is None:
        ctx = _writing.ctx = z3.Context()
    return ctx


class Encoder:
    """Translates terms and formulas into Z3 expressions in one context."""

    def __init__(self, ctx: z3.Context, bounds: Bounds, deadline: Deadline | None = None):
        self.ctx = ctx
        self.bounds = bounds
        self.deadline = deadline
        self.vars: dict[Symbol, z3.ArithRef] = {}
        self.memo: dict[Expr, z3.ArithRef] = {}
        self.hints: list[z3.BoolRef] = []
        self.evaluates: dict[Expr, z3.BoolRef] = {}     # float node -> whether it evaluates (free)
        self.defined: list[z3.ArithRef] = []            # fresh integers of ``Defining`` columns

    def var(self, sym: Symbol) -> z3.ArithRef:
        if sym not in self.vars:        # numbered: a symbol's name may be any source path
            self.vars[sym] = z3.Int(f"s{len(self.vars)}", self.ctx)
        return self.vars[sym]

    def term(self, t: Expr) -> z3.ArithRef:
        if t.is_Integer:
            return z3.IntVal(int(t), self.ctx)
        cached = self.memo.get(t)
        if cached is None:
            if self.deadline is not None:
                self.deadline.check()          # raises OutOfTime: a large term takes long to write
            cached = self.memo[t] = self._term(t)
        return cached

    def _sign(self, divisor: Expr) -> int:
        b = self.bounds(divisor)
        if b is not None and b.lo > 0:
            return 1
        if b is not None and b.hi < 0:
            return -1
        return 0

    def _term(self, t: Expr) -> z3.ArithRef:
        """The row's ``z3`` column over encoded arguments, with an interval hint for division nodes."""
        if isinstance(t, Symbol):
            return self.var(t)
        if isinstance(t, FLOAT_WRAPPERS):
            return self._float_node(t)
        row = row_of(t)
        args = [self.term(a) for a in t.args]
        sign = self._sign(t.args[row.divisor]) if row.divisor is not None else 0
        out = row.z3(sign, *args)
        if isinstance(out, Defining):         # a fresh integer, numbered: the text must not depend on the run
            value = z3.Int(f"r{len(self.defined)}", self.ctx)
            self.defined.append(value)
            self.hints.extend(out.facts(value))
            out = value
        if row.domain is not None:
            self._hint(t, out)
        return out

    def _float_node(self, t: Expr) -> z3.ArithRef:
        """A free integer within ``t``'s interval (whatever it is where ``t`` raises: every relation that
        reads it requires ``evaluates[t]`` too)."""
        n = len(self.evaluates)
        self.evaluates[t] = z3.Bool(f"d{n}", self.ctx)
        value = z3.Int(f"w{n}", self.ctx)
        bound = self.bounds(t)
        if bound is None:                      # defined nowhere in the box
            self.hints.append(z3.Not(self.evaluates[t]))
        elif self.bounds.evaluates(t):         # everywhere (where the divisors a relation carries are not 0)
            self.hints.append(self.evaluates[t])
        if bound is not None and bound.lo != -INF:
            self.hints.append(value >= int(bound.lo))
        if bound is not None and bound.hi != INF:
            self.hints.append(value <= int(bound.hi))
        relaxed = relax.constraints(t, value, self.term, lambda e: z3.If(e >= 0, e, -e), self._finite)
        if relaxed:                             # where it evaluates, Python's value satisfies them
            self.hints.append(z3.Implies(self.evaluates[t], z3.And(relaxed)))
        return value

    def _finite(self, node: Expr) -> bool:
        """Whether the float node is finite wherever it evaluates (no overflow to inf, no nan: where it would
        overflow, an end of its enclosure is inf, since IEEE rounding is monotone)."""
        enclosure = self.bounds.floats(node)
        return enclosure is not None and enclosure.finite

    def _defined(self, r: F.Rel) -> list[z3.BoolRef]:
        """Where ``r`` evaluates: its divisors nonzero, and each float node it reads evaluating."""
        found = [self.term(d) != 0 for d in sorted(r.divisors, key=sympy.default_sort_key)
                 if not isinstance(d, Defined)]
        nodes: list[Expr] = []
        stack = [r.lhs, r.rhs, *(d.args[0] if isinstance(d, Defined) else d for d in r.divisors)]
        while stack:                   # the float nodes outside float nodes (each evaluates its inner ones)
            node = stack.pop()
            if isinstance(node, FLOAT_WRAPPERS):
                nodes.append(node)
            elif not isinstance(node, Symbol):
                stack.extend(node.args)
        for node in dict.fromkeys(nodes):
            self.term(node)
            found.append(self.evaluates[node])
        return found

    def _hint(self, t: Expr, encoded) -> None:
        """``t``'s interval as a hint, where every divisor in ``t`` is nonzero: the interval assumes the
        inner ones nonzero too, and ``a div 0`` is one free value shared by all its occurrences, so an
        unguarded hint could exclude exactly the points where the goal is undefined."""
        bound = self.bounds(t)
        if bound is None:
            return
        parts = []
        if bound.lo != -INF:
            parts.append(encoded >= int(bound.lo))
        if bound.hi != INF:
            parts.append(encoded <= int(bound.hi))
        if parts:
            defined = [self.term(d) != 0 for d in sorted(divisors([t]), key=sympy.default_sort_key)]
            hint = z3.And(parts)
            self.hints.append(z3.Implies(z3.And(defined), hint) if defined else hint)

    def holds(self, f: F.Formula) -> z3.BoolRef:
        """Z3 formula for "``f`` is defined and true"."""
        if isinstance(f, F.Const):
            return z3.BoolVal(f.value, self.ctx)
        if isinstance(f, F.Rel):
            lhs, rhs = self.term(f.lhs), self.term(f.rhs)
            compare = {"==": lhs == rhs, "!=": lhs != rhs, "<": lhs < rhs, "<=": lhs <= rhs,
                       ">": lhs > rhs, ">=": lhs >= rhs}[f.op]
            defined = self._defined(f)
            return z3.And(*defined, compare) if defined else compare
        parts = [self.holds(a) for a in f.args]
        # all operands hold: the meaning of either ``and``; one holds: sympy's ``Or``
        if isinstance(f, F.And) or not f.ordered:
            return (z3.And if isinstance(f, F.And) else z3.Or)(*parts)
        # Python's ``or``: an operand counts only where every earlier one is defined and false
        options: list[z3.BoolRef] = []
        earlier_false: list[z3.BoolRef] = []
        for a, part in zip(f.args, parts):
            options.append(z3.And(*earlier_false, part) if earlier_false else part)
            earlier_false.append(self.holds(F.neg(a)))
        return z3.Or(*options)


# Z3 ignores its timeout, rlimit and interrupt inside its polynomial arithmetic on high powers: (x + 1)**24
# took 20 s under a 2 s budget, (x + 1)**64 did not return in minutes; shape guards stay far below this
MAX_POWER = 8


def _highest_power(problem: Problem) -> int:
    highest = 0
    for f in (problem.goal, *problem.facts):
        for r in F.relations(f):
            for node in iter_nodes(r.lhs - r.rhs):
                if isinstance(node, sympy.Pow) and node.exp.is_Integer:
                    highest = max(highest, abs(int(node.exp)))
    return highest


class Z3Strategy(Strategy):
    """SMT with native integer division; ``rlimit`` bounds work deterministically."""

    name = "z3"
    open_ended = True
    decides_floats = True       # float nodes as free values: proofs hold, models are checked in Python

    def __init__(self, rlimit: int = 2_000_000, logic: str | None = "QF_NIA"):
        self.rlimit = rlimit
        self.logic = logic

    def decide(self, problem: Problem, deadline: Deadline) -> Outcome:
        if _highest_power(problem) > MAX_POWER:
            return unknown(f"a power above {MAX_POWER}: Z3 does not stop on time in such arithmetic")
        try:
            question, enc = self._question(problem, deadline)
        except OutOfTime:
            return unknown("out of time while writing the question for Z3")
        names = {sym: str(enc.var(sym)) for sym in problem.symbols}
        answer = z3_process.check(question, list(names.values()), deadline.remaining(), self.rlimit,
                                  self.logic)
        if answer.result == "unsat":
            return proven("Z3: no point in range satisfies the facts and violates the goal")
        if answer.result == "sat":
            point = {sym: int(answer.model[name]) for sym, name in names.items()}
            if enc.evaluates and check_counterexample(problem, point) is not None:
                return unknown("Z3 found a model of the question with float nodes as free values, and Python "
                               "evaluates them otherwise there")
            return refuted(point, "Z3 found a model")
        return unknown(f"Z3 gave up: {answer.reason}")

    @staticmethod
    def _question(problem: Problem, deadline: Deadline) -> tuple[str, Encoder]:
        """The question as SMT-LIB text: a point of the box where the facts hold and the goal does not."""
        enc = Encoder(_context(), Bounds(problem.ranges), deadline)
        solver = z3.Solver(ctx=enc.ctx)
        for sym in problem.symbols:
            lo, hi = problem.ranges[sym]
            v = enc.var(sym)
            if lo is not None:
                solver.add(v >= lo)
            if hi is not None:
                solver.add(v <= hi)
        for fact in problem.facts:
            solver.add(enc.holds(fact))
        solver.add(z3.Not(enc.holds(problem.goal)))
        solver.add(*enc.hints)
        return solver.sexpr(), enc
