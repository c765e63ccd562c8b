"""The node table (``solver/language/nodes.py``): every row fills every column, and every column agrees with
``python``.

This is where the interpreters used to drift apart (guard code, z3, numpy,
bounds and the torch bridge each had their own copy of what a node means).
"""
import math
import random

import numpy as np
import pytest
import sympy
import z3
from sympy import Integer

from shapeproof.solver.language import interval_math as I
from shapeproof.solver.language.evaluate import Undefined, evaluate_term, holds
from shapeproof.solver.language.guard_code import _Printer
from shapeproof.solver.language.nodes import TABLE, Defining, FloatPow, FSqrt, ISqrt, Kind, Row, Unmodelled
from shapeproof.solver.language.parse import parse_condition, parse_term
from shapeproof.solver.language.terms import symbol, term_str

COLUMNS = ("python", "numpy", "interval", "z3", "torch", "text", "code", "defined")
ROWS = sorted(TABLE.values(), key=lambda r: r.cls.__name__)
IDS = [r.cls.__name__ for r in ROWS]
FLOAT_ARGS = {Kind.FLOAT, Kind.ROUNDING, Kind.COMPARISON}


def _arity(row: Row, rng: random.Random) -> int:
    if row.kind in (Kind.RING, Kind.CHOICE) and row.cls is not sympy.Pow:
        return rng.randint(2, 4)
    if row.kind in (Kind.TO_FLOAT, Kind.ROUNDING, Kind.DEFINED, Kind.FLOAT_CONST,
                    Kind.ROOT) or row.cls.__name__ in ("FNeg", "FSqrt"):
        return 1
    return 2


def _wide_float(rng: random.Random) -> float:
    """A double over the whole range the power and root nodes see: sizes as doubles (up to 2**53 and past
    it), tiny and huge magnitudes (where ``**`` underflows or overflows), the exponents code writes."""
    return rng.choice([
        rng.uniform(-50, 50), float(rng.randint(-20, 20)), rng.randint(-20, 20) + 0.5, 0.5, -0.5, 2.0, 0.0,
        -0.0, float(rng.randint(0, 2 ** 53)), float(rng.randint(0, 2 ** 26) ** 2),
        math.copysign(10.0 ** rng.uniform(-300, 300), rng.random() - 0.3)])


def _wide_int(rng: random.Random) -> int:
    """An int for ``isqrt``: small ones of either sign, squares and their neighbours up to int64's edge."""
    r = rng.choice([rng.randint(0, 2 ** 15), rng.randint(0, 2 ** 31 - 2)])
    return rng.choice([rng.randint(-60, 60), r * r, r * r - 1, r * r + 1, (r + 1) * (r + 1) - 1,
                       rng.randint(0, 2 ** 62 - 1)])


def _args(row: Row, rng: random.Random) -> list:
    """Random Python arguments in the row's domain (divisors nonzero; an exponent natural and small)."""
    n = _arity(row, rng)
    if row.cls in (FloatPow, FSqrt):
        values = [_wide_float(rng) for _ in range(n)]
    elif row.cls is ISqrt:
        values = [_wide_int(rng)]
    elif row.kind in FLOAT_ARGS:
        values = [rng.choice([rng.uniform(-50, 50), float(rng.randint(-20, 20)), rng.randint(-20, 20) + 0.5])
                  for _ in range(n)]
        if row.kind is Kind.COMPARISON and rng.random() < 0.3:
            values[0] = values[1]
    else:
        values = [rng.randint(-60, 60) for _ in range(n)]
    if row.cls is sympy.Pow:
        values[1] = rng.randint(0, 5)
    if row.divisor is not None and values[row.divisor] == 0:
        values[row.divisor] = 3
    return values


def _samples(row: Row, count: int = 200):
    rng = random.Random(row.cls.__name__)
    return [_args(row, rng) for _ in range(count)]


def _python(row: Row, args):
    try:
        return row.python(*args)
    except (ZeroDivisionError, OverflowError, ValueError):
        return None


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_row_fills_every_column(row):
    for column in COLUMNS:
        value = getattr(row, column)
        assert callable(value), (row.cls.__name__, column)
        if isinstance(value, Unmodelled):
            assert value.why, (row.cls.__name__, column)
    assert row.kind is not Kind.ROUNDING or row.rounding is not None
    assert row.kind not in (Kind.DIVISION, Kind.CHOICE, Kind.TO_FLOAT, Kind.TRUE_DIV,
                            Kind.ROUNDING) or row.names


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_numpy_agrees_with_python(row):
    for args in _samples(row):
        expected = _python(row, args)
        if expected is None:
            continue
        arrays = [np.asarray([a], dtype=np.float64 if isinstance(a, float) else np.int64) for a in args]
        if row.cls is sympy.Pow:
            arrays[1] = args[1]
        with np.errstate(all="ignore"):
            got = np.asarray(row.numpy(*arrays)).reshape(-1)[0]
        assert got == expected, (row.cls.__name__, args, got, expected)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_interval_contains_python(row):
    if row.is_float or row.is_wrapper:
        for args in _samples(row):
            value = _python(row, args)
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                assert row.interval(*(I.EVERYTHING for _ in args)).contains(value)
        return
    rng = random.Random(row.cls.__name__)
    for _ in range(200):
        args = _args(row, rng)
        boxes = [I.Interval(a - rng.randint(0, 5), a + rng.randint(0, 5)) for a in args]
        if row.cls is sympy.Pow:
            boxes[1] = I.point_interval(args[1])
        bound = row.interval(*boxes)
        for _ in range(10):
            point = [rng.randint(int(b.lo), int(b.hi)) for b in boxes]
            value = _python(row, point)
            if value is not None:
                assert bound is not None and bound.contains(value), (row.cls.__name__, boxes, point, value)


@pytest.mark.parametrize("row", [r for r in ROWS if not isinstance(r.z3, Unmodelled)],
                         ids=[r.cls.__name__ for r in ROWS if not isinstance(r.z3, Unmodelled)])
def test_z3_agrees_with_python(row):
    ctx = z3.Context()
    for args in _samples(row, 60):
        expected = _python(row, args)
        encoded = [z3.IntVal(a, ctx) for a in args]
        signs = [0] if row.divisor is None else [0, 1 if args[row.divisor] > 0 else -1]
        for sign in signs:
            out = row.z3(sign, *encoded)
            if isinstance(out, Defining):          # a fresh integer: its facts must force Python's value
                if any(abs(a) > 2 ** 40 for a in args):
                    continue                       # nonlinear: Z3 takes seconds on such constants
                r = z3.Int("r", ctx)
                if expected is None:               # undefined there: the facts leave it free
                    assert _solve(ctx, out.facts(r)) == z3.sat
                    continue
                assert _solve(ctx, [*out.facts(r), r == expected]) == z3.sat, (row.cls.__name__, args)
                assert _solve(ctx, [*out.facts(r), r != expected]) == z3.unsat, (row.cls.__name__, args)
                continue
            got = z3.simplify(out).as_long()
            assert got == expected, (row.cls.__name__, args, sign)


def _solve(ctx, facts):
    solver = z3.Solver(ctx=ctx)
    solver.add(*facts)
    return solver.check()


def _node(row: Row, args):
    """The node over constants (floats as float constants) and the symbols standing for the int ones."""
    from shapeproof.solver.language.floats import float_const
    if row.kind is Kind.FLOAT_CONST:
        return float_const(args[0]), {}
    names = [symbol(f"x{i}") for i in range(len(args))]
    terms = [float_const(a) if isinstance(a, float) else s for a, s in zip(args, names)]
    point = {s: a for a, s in zip(args, names) if not isinstance(a, float)}
    ring = row.cls in (sympy.Add, sympy.Mul, sympy.Pow)
    node = row.cls(*terms, evaluate=False) if ring else row.cls(*terms)
    if row.cls is sympy.Pow:
        node = terms[0] ** args[1]
        point.pop(names[1], None)
    return node, point


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_text_and_guard_code_read_back_to_python(row):
    for args in _samples(row, 60):
        expected = _python(row, args)
        node, point = _node(row, args)
        named = {s.name: v for s, v in point.items()}
        if row.kind is Kind.COMPARISON:     # printed as the condition it stands for
            assert holds(parse_condition(term_str(node)), named) == bool(expected), term_str(node)
        elif not row.is_float and row.kind is not Kind.DEFINED:
            # Defined is a marker guard text never spells
            try:
                value = evaluate_term(parse_term(term_str(node)), named)
            except Undefined:
                value = None
            assert value == expected, (row.cls.__name__, term_str(node))
        code = _Printer({s: s.name for s in point}).term(node)
        try:
            value = eval(code,
                         {"math": math, "__builtins__": {"int": int, "float": float, "abs": abs, "min": min,
                                                                "max": max, "round": round}}, named)
        except (ZeroDivisionError, OverflowError, ValueError):
            value = None
        assert value == expected, (row.cls.__name__, code)


_OVERFLOW = 2 ** 1024 - 2 ** 970          # float() of an int raises from here on
_EDGES = {int: [0, 1, -1, _OVERFLOW, _OVERFLOW - 1, -_OVERFLOW, 3 * 2 ** 1100],
          float: [0.0, -0.0, 1.5, -2.0, math.inf, -math.inf, math.nan, 1e308]}


@pytest.mark.parametrize("row", [r for r in ROWS if r.kind is not Kind.FLOAT_CONST],
                         ids=[r.cls.__name__ for r in ROWS if r.kind is not Kind.FLOAT_CONST])
def test_defined_is_true_exactly_where_python_does_not_raise(row):
    """The ``defined`` column, over random arguments and the edges where Python raises (a zero divisor,
    ``float`` past the largest double, rounding inf or nan)."""
    rng = random.Random(row.cls.__name__)
    kind = float if row.kind in FLOAT_ARGS else int
    cases = [_args(row, rng) for _ in range(100)]
    for _ in range(300):
        args = _args(row, rng)
        cases.append([rng.choice(_EDGES[kind]) if rng.random() < 0.6 else a for a in args])
    if row.cls is sympy.Pow:
        cases = [[a[0], abs(int(a[1])) % 4] for a in cases if isinstance(a[0], int)]
    names = [f"a{i}" for i in range(4)]
    raised = 0
    for args in cases:
        env = dict(zip(names, args))
        check = row.defined(*names[:len(args)])
        defined = bool(eval(check, {"math": math}, env)) if check else True
        raised += not defined
        assert defined == (_python(row, args) is not None), (row.cls.__name__, args, check)
    assert raised or row.defined(*names[:2]) == "", row.cls.__name__       # the edges reached a raise


@pytest.mark.parametrize("row", [r for r in ROWS if r.names], ids=[r.cls.__name__ for r in ROWS if r.names])
def test_every_spelling_parses_to_the_row(row):
    for name in row.names:
        args = _samples(row, 1)[0]
        if row.kind is Kind.TO_FLOAT:
            text = f"math.floor({name}(x0) / 3)"
            expected = math.floor(row.python(args[0]) / 3)
        elif row.kind is Kind.TRUE_DIV:
            text, expected = f"math.floor({name}(x0, x1))", math.floor(row.python(*args))
        elif row.kind is Kind.FLOAT:            # a float function: rounded to be a term
            text = f"math.floor({name}({', '.join(repr(a) for a in args)}))"
            value = _python(row, args)
            expected = None if value is None or not math.isfinite(value) else math.floor(value)
        else:
            shown = [repr(a) if isinstance(a, float) or (row.cls is sympy.Pow and i == 1) else f"x{i}"
                     for i, a in enumerate(args)]
            text = f"{name}({', '.join(shown)})"
            expected = _python(row, args)
        point = {f"x{i}": a for i, a in enumerate(args) if not isinstance(a, float)}
        if expected is None:
            with pytest.raises(Undefined):
                evaluate_term(parse_term(text), point)
            continue
        assert evaluate_term(parse_term(text), point) == expected, text


@pytest.mark.parametrize("row", [r for r in ROWS if not isinstance(r.torch, Unmodelled)],
                         ids=[r.cls.__name__ for r in ROWS if not isinstance(r.torch, Unmodelled)])
def test_torch_form_agrees_with_python(row):
    pytest.importorskip("torch")
    from shapeproof.tracer import torch_internals as T
    for args in _samples(row, 60):
        expected = _python(row, args)
        if expected is None:
            continue
        sympy_args = [sympy.Float(a) if isinstance(a, float) else Integer(a) for a in args]
        got = row.torch(T, *sympy_args) if row.kind is not Kind.FLOAT_CONST else row.torch(T, args[0])
        if isinstance(expected, float):
            assert float(got) == pytest.approx(expected, rel=1e-12, abs=1e-12), (row.cls.__name__, args)
        else:
            assert int(got) == expected, (row.cls.__name__, args, got)
