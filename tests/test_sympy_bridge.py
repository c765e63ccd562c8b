"""torch's sympy shape expressions convert to shapeproof terms with the same values."""
import itertools

import pytest
import sympy
import torch
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from shapeproof.solver import evaluate_term, holds
from shapeproof.tracer import torch_internals as T
from shapeproof.tracer.sympy_bridge import (
    Conversions, UnsupportedExpression, bounds_of, divides, to_condition, to_term,
)

s0 = sympy.Symbol("s0", integer=True, positive=True)
s1 = sympy.Symbol("s1", integer=True, positive=True)
x = sympy.Symbol("x", integer=True)

POSITIVE = [(a, b) for a, b in itertools.product(range(1, 13), range(1, 7))]
SIGNED = [(a, b) for a, b in itertools.product(range(-9, 10), range(1, 6))]

# (expression over (first, second), the symbols, value grid)
TERMS = [
    ("FloorDiv", lambda a, b: T.FloorDiv(a, b), (x, s1), SIGNED),
    ("CleanDiv", lambda a, b: T.CleanDiv(a * b, b), (x, s1), SIGNED),
    ("PythonMod", lambda a, b: T.PythonMod(a, b), (x, s1), SIGNED),
    ("Mod (non-negative)", lambda a, b: T.Mod(a, b), (s0, s1), POSITIVE),
    ("ModularIndexing", lambda a, b: T.ModularIndexing(a, b, 3), (s0, s1), POSITIVE),
    ("torch CeilDiv", lambda a, b: torch.utils._sympy.functions.CeilDiv(a, b), (s0, s1), POSITIVE),
    ("FloorToInt(IntTrueDiv)", lambda a, b: T.FloorToInt(T.IntTrueDiv(a, b)), (x, s1), SIGNED),
    ("CeilToInt(IntTrueDiv)", lambda a, b: T.CeilToInt(T.IntTrueDiv(a, b)), (x, s1), SIGNED),
    ("TruncToInt(FloatTrueDiv)", lambda a, b: T.TruncToInt(T.FloatTrueDiv(T.ToFloat(a), T.ToFloat(b))),
     (x, s1), SIGNED),
    ("Max/Min", lambda a, b: T.Max(a, b) - T.Min(a, 2 * b), (x, s1), SIGNED),
    ("PowByNatural", lambda a, b: T.PowByNatural(a, 2) + b, (x, s1), SIGNED),
    ("LShift/RShift", lambda a, b: T.LShift(a, 2) + T.RShift(a, 1), (s0, s1), POSITIVE),
    ("Identity", lambda a, b: T.Identity(a + b), (x, s1), SIGNED),
    ("nested", lambda a, b: T.FloorDiv(T.PythonMod(3 * a + 1, b) + a, b + 1), (x, s1), SIGNED),
    # ``math.floor(n ** 0.5)``, ``int(n ** 0.5)``, ``math.floor(torch.sym_sqrt(n))`` as torch records them
    ("FloorToInt(FloatPow)", lambda a, b: T.FloorToInt(T.FloatPow(T.ToFloat(a * b), 0.5)), (s0, s1),
     POSITIVE),
    ("TruncToInt(FloatPow)", lambda a, b: T.TruncToInt(T.FloatPow(T.ToFloat(a + b), sympy.Float(-0.5)) * 100),
     (s0, s1), POSITIVE),
    ("FloorToInt(OpaqueUnaryFn_sqrt)", lambda a, b: T.FloorToInt(T.OpaqueUnaryFn_sqrt(T.ToFloat(a * b + 7))),
     (s0, s1), POSITIVE),
]


def _value(e):
    return int(e)


@pytest.mark.parametrize("name,build,syms,grid", TERMS, ids=[t[0] for t in TERMS])
def test_terms_have_the_same_values(name, build, syms, grid):
    expr = build(*syms)
    term = to_term(expr)
    for a, b in grid:
        expected = _value(expr.xreplace({syms[0]: sympy.Integer(a), syms[1]: sympy.Integer(b)}))
        assert evaluate_term(term, {syms[0].name: a, syms[1].name: b}) == expected, (name, a, b)


CONDITIONS = [
    sympy.Eq(T.Mod(s0, 4), 0), sympy.Ne(T.FloorDiv(s0, 2), s1), sympy.Lt(s0, 2 * s1), sympy.Le(s0, s1 + 3),
    sympy.Gt(T.FloorDiv(s0 * s1, s1), 5), sympy.Ge(s0, T.Max(s1, 4)),
    sympy.And(sympy.Ne(s0, 1), sympy.Eq(T.Mod(s0, 2), 0)), sympy.Or(sympy.Eq(s0, s1), sympy.Gt(s0, 9)),
    sympy.Not(sympy.Eq(s0, 3)), sympy.Lt(T.IntTrueDiv(s0, 3), 2),
    sympy.Eq(T.FloorToInt(T.FloatPow(T.ToFloat(s0 * s1), 0.5)) ** 2, s0 * s1),
    sympy.Lt(T.OpaqueUnaryFn_sqrt(T.ToFloat(s0)), 2.5),
    sympy.Ge(T.FloatPow(T.ToFloat(s0), T.ToFloat(s1)), 100),
]


@pytest.mark.parametrize("cond", CONDITIONS, ids=[str(c) for c in CONDITIONS])
def test_conditions_have_the_same_truth(cond):
    converted = to_condition(cond)
    for a, b in POSITIVE:
        assert holds(converted, {"s0": a, "s1": b}) == bool(cond.xreplace({s0: a, s1: b})), (a, b)


def test_renaming_maps_torch_symbols():
    term = to_term(T.FloorDiv(s0, 2), rename={s0: "T"})
    assert {s.name for s in term.free_symbols} == {"T"}


def test_ranges_map_infinity_to_none():
    assert bounds_of(ValueRanges(2, int_oo)) == (2, None)
    assert bounds_of(ValueRanges(-int_oo, 5)) == (None, 5)


@pytest.mark.parametrize("expr", [T.FloorDiv(s0, 2) + sympy.Symbol("zf", real=True),
                                  torch.utils._sympy.functions.RoundDecimal(T.IntTrueDiv(s0, 3), 2),
                                  torch.utils._sympy.functions.Where(sympy.Eq(s0, 1), s0, s1)])
def test_unsupported_expressions_say_what_they_are(expr):
    with pytest.raises(UnsupportedExpression):
        to_term(expr)


def test_round_to_int_is_pythons_round_half_to_even():
    """``round(x.size(0) / 2)`` (ExportDB's dynamic_shape_round) is read, with Python's ties-to-even."""
    term = to_term(torch.utils._sympy.functions.RoundToInt(T.IntTrueDiv(s0, 2)))
    assert [evaluate_term(term, {"s0": n}) for n in range(1, 8)] == [round(n / 2) for n in range(1, 8)]


def test_real_guards_from_a_trace_hold_at_the_example():
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x):
        y = torch.nn.functional.pad(x, (0, (-x.shape[1]) % 4))
        return y.view(x.shape[0] // 2, 2, -1, 4)

    gm = make_fx(fn, tracing_mode="symbolic")(torch.randn(10, 13))
    env = gm.shape_env
    hints = {str(s): int(v) for s, v in env.backed_var_to_val.items()}
    assert env.guards, "the trace should record guards"
    for guard in env.guards:
        assert holds(to_condition(guard.expr), hints), guard.expr


def test_each_relation_carries_only_the_divisors_of_its_own_sides():
    """A fact ``s0 > 5`` converted after ``s0 / x`` must not need ``x != 0`` (it did: every divisor seen so
    far)."""
    from shapeproof.solver.language.formula import relations

    shared = T.IntTrueDiv(s0, x)
    f = to_condition(sympy.And(sympy.Lt(shared, 2), sympy.Gt(s0, 5), sympy.Ne(shared + 1, 0)))
    by_text = {str(r): {str(d) for d in r.divisors} for r in relations(f)}
    assert by_text == {"s0 > 5": set(), "(s0 / x) < 2": {"x"}, "not ((float(1) + (s0 / x)) == 0)": {"x"}}
    from shapeproof.tracer.sympy_bridge import _Converter
    converter = _Converter(None)                 # one conversion, relations met in this order
    converter.condition(sympy.Lt(shared, 2))
    fact = converter.condition(sympy.Gt(s0, 5))
    assert fact.divisors == frozenset() and holds(fact, {"s0": 6, "x": 0})


def test_remembered_conversions_equal_fresh_ones_divisors_included():
    """A trace converts its questions through one ``Conversions``: each answer must equal a fresh
    ``to_condition``, divisors included, whatever was converted before it (a relation after one with
    ``s0 // x`` must not need ``x != 0``; one after it over the same subterm must)."""
    shared = T.FloorDiv(s0, x)
    questions = [sympy.Lt(shared, 2), sympy.Gt(s0, 5), sympy.Ne(shared + s1, 0),
                 sympy.And(sympy.Eq(T.Mod(s0, 4), 0), sympy.Ge(shared, s1)), sympy.Le(s1, 3)]
    conversions = Conversions({s0: "H"})
    for q in questions + questions:
        remembered, fresh = conversions.condition(q), to_condition(q, rename={s0: "H"})
        assert remembered == fresh, q
        assert conversions.condition_or_none(q) == fresh, q
    unsupported = sympy.Gt(torch.utils._sympy.functions.Where(sympy.Eq(s0, 1), s0, s1), 2)
    assert conversions.condition_or_none(unsupported) is None
    assert conversions.condition_or_none(unsupported) is None       # remembered, still None
    assert conversions.condition(sympy.Le(s1, 3)).divisors == frozenset()
    assert conversions.term(shared + 1) == to_term(shared + 1, rename={s0: "H"})


DIVIDING = [T.CeilToInt, T.CleanDiv, T.FloatTrueDiv, T.FloorDiv, T.FloorToInt, T.IntTrueDiv, T.Mod,
            T.ModularIndexing, T.PythonMod, T.RoundToInt, T.TruncToInt]
NOT_DIVIDING = [sympy.Add, sympy.Mul, sympy.Symbol, sympy.Integer, T.Min, T.Max, T.PowByNatural, T.ToFloat,
                T.Identity]


@pytest.mark.parametrize("cls", DIVIDING + NOT_DIVIDING, ids=lambda c: c.__name__)
def test_divides_names_torch_classes_that_divide_or_round(cls):
    assert divides(cls) == (cls in DIVIDING)
