"""Soundness fuzz: random guards against an independent plain-Python oracle.

    python -m bench.fuzz_soundness [--queries 100000] [--seed 0] [--timeout 0.1]

Each query is random guard *text* over 1-3 symbols (``+ - * // %``, min/max,
``CeilDiv``/``TruncDiv``/``int(a / b)``, float scale factors such as
``math.floor(0.29*float(x))`` and ``math.ceil(x / 16)``, float floor division
such as ``(x / 3 // 1) != 4``, square roots and powers on doubles
(``math.floor(math.sqrt(x*y))``, ``int(x ** 0.5)``, ``math.floor(2.0 ** x)``,
``math.isqrt(x)``), negative operands and divisors, Python's
``and``/``or``/``not`` and sympy's ``And``/``Or``/``Not``/``&``/``|``/``~`` in
either order, ``True``/``False`` operands), sometimes with a fact (a third of
them comparisons on floats, such as ``x / 3 > 1.5``), over small or unbounded
ranges.  The oracle never uses the solver: it reads the text with Python's
``ast`` and evaluates a whitelist of node kinds with Python's own operators (an
exception is "not true", and so is a complex power such as ``(-4) ** 0.5``);
sympy's connectives it evaluates as sympy means them (an operand that decides
does, in any order).  Ground truth is brute force over bounded boxes; over
unbounded ranges every counterexample is checked, and every proof is
spot-checked at a few hundred points, large ones included.

Prints one table: queries, wrong verdicts, exceptions other than
``ParseError``, calls past 2x the timeout + 1 s, verdict counts, the share
decided, time percentiles and the slowest call against its bound.  Exit status
1 if any of the three must-be-zero counts is not.
"""
from __future__ import annotations

import argparse
import ast
import math
import random
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field

from shapeproof.solver import ParseError, prove

# ---------------------------------------------------------------------------
# The oracle: guard text -> a Python function of the symbol values


def _ceil_div(a, b):
    return -((-a) // b)


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _power(a, b):
    """Python's ``a ** b``; a complex result (a negative base, a fractional exponent) counts as raising."""
    value = a ** b
    if isinstance(value, complex):
        raise ValueError("complex power")
    return value


_CALLS = {"min": min, "max": max, "int": int, "float": float, "abs": abs, "CeilDiv": _ceil_div,
          "TruncDiv": _trunc_div, "math.ceil": math.ceil, "math.floor": math.floor, "math.trunc": math.trunc,
          "math.sqrt": math.sqrt, "math.isqrt": math.isqrt, "math.pow": math.pow}
_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
           ast.Pow: _power}
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}


class Unsupported(Exception):
    pass


class _Undefined(ValueError):
    """A sympy connective neither of whose operands decides, with one that raises: not true."""


def _sympy_connective(decides: bool, parts):
    """sympy's ``Or`` (``decides`` True) or ``And`` over compiled operands: an operand whose value is
    ``decides`` decides, in any order; otherwise undefined if any operand raises."""
    def evaluate(env):
        values = []
        for p in parts:
            try:
                values.append(bool(p(env)))
            except (ZeroDivisionError, OverflowError, ValueError):
                values.append(None)
        if decides in values:
            return decides
        if None in values:
            raise _Undefined
        return not decides
    return evaluate


def compile_guard(text: str):
    """A function ``env -> bool`` with Python's meaning of ``text``; it raises where Python raises."""
    return _compile(ast.parse(text, mode="eval").body)


def _compile(node):
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
        value = node.value
        return lambda env: value
    if isinstance(node, ast.Name):
        name = node.id
        if name in ("True", "False"):
            value = name == "True"
            return lambda env: value
        return lambda env: env[name]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitOr, ast.BitAnd)):     # on conditions
        return _sympy_connective(isinstance(node.op, ast.BitOr), [_compile(node.left), _compile(node.right)])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op, left, right = _BINARY[type(node.op)], _compile(node.left), _compile(node.right)
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.UnaryOp):
        inner = _compile(node.operand)
        if isinstance(node.op, ast.USub):
            return lambda env: -inner(env)
        if isinstance(node.op, ast.UAdd):
            return lambda env: +inner(env)
        if isinstance(node.op, (ast.Not, ast.Invert)):      # ``~`` on a condition: sympy's Not
            return lambda env: not inner(env)
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v) for v in node.values]
        if isinstance(node.op, ast.And):
            def conj(env):
                value = True
                for p in parts:
                    value = p(env)
                    if not value:
                        return value
                return value
            return conj

        def disj(env):
            value = False
            for p in parts:
                value = p(env)
                if value:
                    return value
            return value
        return disj
    if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
        first = _compile(node.left)
        steps = [(_COMPARE[type(o)], _compile(c)) for o, c in zip(node.ops, node.comparators)]

        def compare(env):
            left = first(env)
            for op, right_fn in steps:
                right = right_fn(env)
                if not op(left, right):
                    return False
                left = right
            return True
        return compare
    if isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else (
            f"{func.value.id}.{func.attr}" if isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            else None)
        if name in ("Or", "And"):
            return _sympy_connective(name == "Or", [_compile(a) for a in node.args])
        if name == "Not" and len(node.args) == 1:
            inner = _compile(node.args[0])
            return lambda env: not inner(env)
        if name in _CALLS:
            fn, args = _CALLS[name], [_compile(a) for a in node.args]
            return lambda env: fn(*(a(env) for a in args))
    raise Unsupported(ast.dump(node)[:80])


def oracle_holds(fn, env) -> bool:
    """Python's verdict at one point: true only if evaluation returns a true value without raising."""
    try:
        return bool(fn(env))
    except (ZeroDivisionError, OverflowError, ValueError):
        return False


# ---------------------------------------------------------------------------
# Random guards

SYMBOLS = ["x", "y", "z"]


class Generator:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def leaf(self, syms) -> str:
        r = self.rng.random()
        if r < 0.55:
            return self.rng.choice(syms)
        value = self.rng.randint(-7, 7)
        return f"({value})" if value < 0 else str(value)

    def term(self, syms, depth: int) -> str:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return self.leaf(syms)
        a, b = self.term(syms, depth - 1), self.term(syms, depth - 1)
        kind = rng.random()
        if kind < 0.35:
            return f"({a} {rng.choice(['+', '-', '*'])} {b})"
        if kind < 0.55:
            return f"({a} {rng.choice(['//', '%'])} {b})"
        if kind < 0.65:
            return f"{rng.choice(['min', 'max'])}({a}, {b})"
        if kind < 0.75:
            return f"{rng.choice(['CeilDiv', 'TruncDiv'])}({a}, {b})"
        if kind < 0.80:
            return f"int({a} / {b})"
        return self.float_term(a, b)

    def float_term(self, a: str, b: str) -> str:
        rng = self.rng
        scale = rng.choice(["0.29", "0.5", "0.1", "0.25", "1.5", "0.3", "2.0", "0.75"])
        return rng.choice([
            f"math.floor({scale}*float({a}))", f"int({a} * {scale})", f"math.ceil({a} / 16)",
            f"math.ceil({a} / 3)", f"math.floor({a} / {b})", f"math.trunc(float({a}) * 0.1 * 3)",
            f"math.ceil(float({a}) * {scale} * {b})", f"math.floor({a} / {scale})",
            f"int({a} / {b} * {scale})", f"int({a} / 3 // 1)",
        ] + [        # roots and powers: exact as isqrt up to 2**50, IEEE doubles past it, undefined below 0
            f"math.floor(math.sqrt({a}))", f"int({a} ** 0.5)", f"math.ceil(math.sqrt({a} * {b}))",
            f"math.floor(float({a} * {a}) ** 0.5)", f"math.isqrt({a})", f"math.floor({a} ** {scale})",
            f"math.floor(2.0 ** {a})", f"math.trunc(math.pow({a}, 0.5) * {b})",
        ])

    def relation(self, syms, depth: int) -> str:
        rng = self.rng
        op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
        a, b = self.term(syms, depth), self.term(syms, depth)
        if rng.random() < 0.12:                           # a comparison with a float side
            return self.float_relation(syms, a, b, op)
        return f"{a} {op} {b}"

    def float_relation(self, syms, a: str, b: str, op: str) -> str:
        rng = self.rng
        return rng.choice([f"{a} / {b} {op} {self.leaf(syms)}", f"{a} * 0.1 * 3 {op} {a} * 0.3",
                           f"float({a}) * 0.5 {op} {b}", f"{a} {op} 0.5 + {b}", f"({a} / 3 // 1) {op} {b}",
                           f"{a} / 3 {op} 1.5", f"({a} / 7 % 1) {op} 0.5", f"math.sqrt({a}) {op} {b}",
                           f"{a} ** 0.5 {op} 2.5"])

    def condition(self, syms, depth: int, size: int) -> str:
        rng = self.rng
        if size <= 1 or rng.random() < 0.5:
            text = self.relation(syms, depth)
        else:
            k = rng.randint(1, size - 1)
            parts = [self.condition(syms, depth, k), self.condition(syms, depth, size - k)]
            if rng.random() < 0.1:                        # sympy's absorption (and Python's short cut)
                parts[rng.randint(0, 1)] = rng.choice(["True", "False"])
            a, b = parts
            text = rng.choice([f"({a}) and ({b})", f"({a}) or ({b})",         # Python's, left to right
                               f"Or({a}, {b})", f"And({a}, {b})", f"({a}) | ({b})", f"({a}) & ({b})"])
        if rng.random() < 0.1:
            return rng.choice([f"not ({text})", f"Not({text})", f"~({text})"])
        return text

    def fact(self, syms) -> str:
        """A fact: a third of them a comparison on floats (``x / 3 > 1.5``)."""
        rng = self.rng
        if rng.random() < 1 / 3:
            op = rng.choice(["==", "!=", "<", "<=", ">", ">="])
            return self.float_relation(syms, self.term(syms, 1), self.term(syms, 1), op)
        return self.condition(syms, 1, 1)

    def ranges(self, syms) -> dict:
        rng = self.rng
        out = {}
        for s in syms:
            r = rng.random()
            lo = rng.randint(-6, 6)
            if r < 0.75:
                out[s] = (lo, lo + rng.randint(0, 6))
            elif r < 0.85:
                out[s] = (lo, None)
            elif r < 0.92:
                out[s] = (None, lo)
            else:
                out[s] = (None, None)
        return out

    def query(self):
        syms = SYMBOLS[:self.rng.randint(1, 3)]
        goal = self.condition(syms, self.rng.randint(1, 3), self.rng.randint(1, 3))
        facts = [self.fact(syms) for _ in range(self.rng.random() < 0.3)]
        return goal, self.ranges(syms), facts


# ---------------------------------------------------------------------------
# Judging one verdict


def _box(ranges):
    return [range(lo, hi + 1) for lo, hi in ranges.values()]


def _sample_points(ranges, rng: random.Random, count: int):
    """Points of an unbounded box: ends, small values, and large magnitudes up to 2**62."""
    names = list(ranges)
    specials = [0, 1, -1, 2, -2, 3, 7, 16, 17, 100, -100, 2 ** 31, 2 ** 53 + 1, 2 ** 57 + 15, 10 ** 18,
                2 ** 62]
    specials += [-v for v in specials]
    points = []
    for _ in range(count):
        point = {}
        for name in names:
            lo, hi = ranges[name]
            pick = (rng.choice(specials) if rng.random() < 0.6
                    else rng.randint(-(2 ** rng.randint(1, 62)), 2 ** 62))
            if lo is not None and pick < lo:
                pick = lo + abs(pick) % 50
            if hi is not None and pick > hi:
                pick = hi - abs(pick) % 50
            if lo is not None and hi is not None:
                pick = min(max(pick, lo), hi)
            point[name] = pick
        points.append(point)
    return points


def judge(goal_fn, fact_fns, ranges, verdict, rng) -> str | None:
    """None if the verdict is right, else why it is wrong."""
    def violates(env):
        return all(oracle_holds(f, env) for f in fact_fns) and not oracle_holds(goal_fn, env)

    if verdict.status.value == "refuted":
        cex = dict(verdict.counterexample)
        if not set(cex) <= set(ranges):
            return f"counterexample {cex} names unknown symbols"
        for name in set(ranges) - set(cex):     # a symbol the guard does not use: any value in range
            lo, hi = ranges[name]
            cex[name] = lo if lo is not None else (hi if hi is not None else 0)
        for name, (lo, hi) in ranges.items():
            if (lo is not None and cex[name] < lo) or (hi is not None and cex[name] > hi):
                return f"counterexample {cex} is out of range"
        return None if violates(cex) else f"counterexample {cex} does not violate the guard"
    if verdict.status.value != "proven":
        return None
    bounded = all(lo is not None and hi is not None for lo, hi in ranges.values())
    if bounded:
        import itertools
        names = list(ranges)
        for combo in itertools.product(*_box(ranges)):
            env = dict(zip(names, combo))
            if violates(env):
                return f"proven, but Python says no at {env}"
        return None
    for env in _sample_points(ranges, rng, 300):
        if violates(env):
            return f"proven, but Python says no at {env}"
    return None


@dataclass
class Tally:
    queries: int = 0
    parse_errors: int = 0
    wrong: list = field(default_factory=list)
    exceptions: list = field(default_factory=list)
    late: list = field(default_factory=list)
    verdicts: dict = field(default_factory=lambda: {"proven": 0, "refuted": 0, "unknown": 0})
    seconds: list = field(default_factory=list)


def run(queries: int, seed: int, timeout: float, progress: bool = False) -> Tally:
    gen = Generator(random.Random(seed))
    spot_checks = random.Random(seed + 1)        # apart, so the queries do not depend on the verdicts
    tally = Tally()
    limit = 2 * timeout + 1.0
    for i in range(queries):
        goal, ranges, facts = gen.query()
        tally.queries += 1
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                verdict = prove(goal, ranges=ranges, facts=facts, timeout=timeout)
        except ParseError:
            tally.parse_errors += 1
            continue
        except Exception as exc:  # noqa: BLE001 - counting them is the point
            tally.exceptions.append((goal, ranges, facts,
                                     "".join(traceback.format_exception_only(exc)).strip()))
            continue
        finally:
            elapsed = time.perf_counter() - start
            tally.seconds.append(elapsed)
            if elapsed > limit:
                tally.late.append((goal, ranges, facts, elapsed))
        tally.verdicts[verdict.status.value] += 1
        try:
            why = judge(compile_guard(goal), [compile_guard(f) for f in facts], ranges, verdict, spot_checks)
        except Unsupported as exc:
            why = f"the oracle cannot read the guard: {exc}"
        if why is not None:
            tally.wrong.append((goal, ranges, facts, str(verdict), why))
        if progress and (i + 1) % 10000 == 0:
            print(f"  {i + 1} queries, {len(tally.wrong)} wrong", file=sys.stderr, flush=True)
    return tally


def table(t: Tally, timeout: float) -> str:
    times = sorted(t.seconds)
    answered = sum(t.verdicts.values())
    decided = (t.verdicts["proven"] + t.verdicts["refuted"]) / answered if answered else 0.0

    def pct(p):
        return 1000 * times[min(len(times) - 1, int(p * len(times)))] if times else 0.0
    rows = [
        ("queries", t.queries), ("wrong verdicts", len(t.wrong)),
        ("exceptions other than ParseError", len(t.exceptions)),
        (f"calls past 2x timeout + 1 s ({2 * timeout + 1:.1f} s)", len(t.late)),
        ("ParseError (bad input, expected)", t.parse_errors),
        ("proven", t.verdicts["proven"]), ("refuted", t.verdicts["refuted"]),
        ("unknown", t.verdicts["unknown"]), ("decided (of the guards that parse)", f"{100 * decided:.2f}%"),
        ("time p50 ms", f"{pct(0.5):.2f}"), ("time p90 ms", f"{pct(0.9):.2f}"),
        ("time p99 ms", f"{pct(0.99):.2f}"),
        (f"time max ms (bound {1000 * (2 * timeout + 1):.0f})", f"{1000 * times[-1]:.1f}" if times else "0"),
    ]
    lines = ["| measure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=0.1)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    t = run(args.queries, args.seed, args.timeout, progress=True)
    print(table(t, args.timeout))
    print(f"seed {args.seed}, timeout {args.timeout} s, wall {time.perf_counter() - start:.0f} s")
    for goal, ranges, facts, verdict, why in t.wrong[:20]:
        print(f"WRONG: {goal!r} ranges={ranges} facts={facts}: {verdict} -- {why}")
    for goal, ranges, facts, exc in t.exceptions[:20]:
        print(f"EXCEPTION: {goal!r} ranges={ranges} facts={facts}: {exc}")
    for goal, ranges, facts, elapsed in t.late[:20]:
        print(f"LATE: {goal!r} ranges={ranges} facts={facts}: {elapsed:.2f} s")
    return 1 if t.wrong or t.exceptions or t.late else 0


if __name__ == "__main__":
    raise SystemExit(main())
