"""The guard parser: what it accepts (as torch prints guards and people write them) and what it rejects."""
import pytest
from hypothesis import given, settings, strategies as st

from shapeproof.solver import ParseError, holds, parse, parse_condition, parse_term
from shapeproof.solver.language.formula import formula_str

# text, a point, whether the guard holds there (checked with the reference evaluator)
ACCEPTED = [
    ("((1 + (seq_len // S)) % N) != 0", {"seq_len": 7, "S": 4, "N": 2}, False),
    ("Eq(Mod(s0, 4), 0)", {"s0": 12}, True),
    ("Ne(FloorDiv(s0, 2), 3)", {"s0": 7}, False),
    ("math.ceil(T / 16) != 1", {"T": 17}, True),
    ("math.ceil(T / 16) != 1", {"T": 16}, False),
    ("math.trunc(0.5*torch.sym_float(W)) == (W // 2)", {"W": 9}, True),
    ("L['x'].size()[1] % 4 == 0", {"L['x'].size()[1]": 8}, True),
    ('L["x"].size()[1] % 4 == 0', {"L['x'].size()[1]": 9}, False),
    ("x.size(1) >= x.shape[0]", {"x.size(1)": 3, "x.shape[0]": 3}, True),
    ("a or b and c", {"a": 0, "b": 1, "c": 0}, False),   # Python precedence: a or (b and c)
    ("(a or b) and c", {"a": 0, "b": 1, "c": 0}, False),
    ("a or b and c", {"a": 1, "b": 0, "c": 0}, True),
    ("u0 >= 0 and u0 <= 10", {"u0": 11}, False),
    ("2 <= S <= 511", {"S": 511}, True),
    ("2 <= S <= 511", {"S": 512}, False),
    ("not T > 3", {"T": 3}, True),
    ("Eq(Mod(u0, 4), 0) & Ne(u0, 0)", {"u0": 8}, True),
    ("(T % 4 != 0) | (T == 4)", {"T": 4}, True),
    ("~(T > 3)", {"T": 2}, True),
    ("CeilToInt(IntTrueDiv(s0, 3)) == 2", {"s0": 4}, True),
    ("FloorToInt(IntTrueDiv(s0, 3)) == 1", {"s0": 5}, True),
    ("ModularIndexing(x, 2, 3) == ((x // 2) % 3)", {"x": 17}, True),
    ("PythonMod(-7, 2) == 1 and Mod(7, -2) == -1", {}, True),
    ("Max(a, b, 3) >= Min(a, b)", {"a": -5, "b": -9}, True),
    ("sym_max(a, b) == max(b, a)", {"a": 2, "b": 4}, True),
    ("abs(x - 5) <= 2", {"x": 3}, True),
    ("T / 16 > 2", {"T": 33}, True),
    ("T / 16 > 2", {"T": 32}, False),
    ("T ** 2 - 2*T*T + T**2 == 0", {"T": 123}, True),
    ("(2*T*T) // T == 2*T", {"T": 5}, True),
    ("x // y == 0", {"x": 1, "y": 0}, False),    # undefined is not true
    ("x // y != 0", {"x": 1, "y": 0}, False),    # ... nor is its negation
    ("y == 0 or x // y == 1", {"x": 1, "y": 0}, True),   # Kleene: a defined true side suffices
    ("x // y - x // y == 0", {"x": 1, "y": 0}, False),   # cancelled division still undefined
    ("Eq(s0, 2*s1) == (s0 == 2*s1)", {"s0": 4, "s1": 2}, True),
    ("True", {}, True),
    ("False or 1 < 2", {}, True),
    ("1.5e1 == 15", {}, True),
    ("int(7 / 2) == 3 and int(-7 / 2) == -3", {}, True),
    ("T / 3 % 2 == 0", {"T": 6}, True),                  # float % in Python's meaning: 2.0 % 2 == 0.0
    ("int(0.29*float(T)) == 29", {"T": 100}, False),     # doubles, not rationals: 0.29*100.0 is 28.999...
    ("T*0.1*3 == T*0.3", {"T": 1}, False),
    ("T*0.1*3 == T*0.3", {"T": 5}, True),
    ("T < 0.5 + 2**60 * 0", {"T": 0}, True),
]


@pytest.mark.parametrize("text,point,expected", ACCEPTED, ids=[t for t, _, _ in ACCEPTED])
def test_accepted_guards_mean_what_python_means(text, point, expected):
    f = parse_condition(text)
    assert holds(f, point) is expected
    again = parse_condition(formula_str(f))  # printed form reads back to the same condition
    assert again == f


REJECTED = [
    ("(T % 4", "expected ')'"),
    ("T +* 3", "expected a number, a name or '('"),
    ("__import__('os').system('x')", "not allowed"),
    ("foo(3)", "unknown function 'foo'"),
    ("(lambda: 1)()", "unexpected character ':'"),
    ("lambda + 1", "expected a number, a name or '('"),
    ("T ** T", "exponent must be an integer literal"),
    ("T ** 100000", "exponent must be an integer literal"),
    ("9" * 200, "number literal is too large"),
    ("x if y else z", "expected an operator or the end"),
    ("T $ 3", "unexpected character '$'"),
    ("Eq(1)", "takes 2 argument(s), got 1"),
    ("abs(T / 3) == 0", "expected an integer"),
    ("(x < 3) + 1", "expected a number, found a condition"),
    ("(" * 500 + "T" + ")" * 500, "nested deeper than"),
    ("Mod + 1", "is a function and must be called"),
    ("x[y]", "expected an integer or a string index"),
    ("", "expected a number, a name or '('"),
    ("x = 3", "unexpected character '='"),
]


@pytest.mark.parametrize("text,message", REJECTED, ids=[t[:30] for t, _ in REJECTED])
def test_rejected_text_names_position_and_expectation(text, message):
    with pytest.raises(ParseError) as err:
        parse(text)
    assert message in str(err.value)
    assert 0 <= err.value.position <= len(text)


def test_huge_input_is_refused_before_tokenizing():
    with pytest.raises(ParseError, match="characters; the limit is"):
        parse("x + " * 3_000_000 + "1")


def test_condition_and_term_entry_points_check_kinds():
    with pytest.raises(ParseError, match="expected a condition"):
        parse_condition("T // 2")
    with pytest.raises(ParseError, match="expected an integer expression"):
        parse_term("T > 2")
    assert parse_term("T // 2 + 1").free_symbols == parse_term("T").free_symbols


_names = st.sampled_from(["a", "b", "T", "L['x'].size()[1]"])
_atoms = st.one_of(_names, st.integers(-20, 20).map(str))


def _combine(children):
    binary = st.tuples(children, st.sampled_from(["+", "-", "*", "//", "%"]), children).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})")
    calls = st.tuples(st.sampled_from(["max", "min", "CeilDiv", "TruncDiv"]), children, children).map(
        lambda t: f"{t[0]}({t[1]}, {t[2]})")
    return st.one_of(binary, calls)


_term_texts = st.recursive(_atoms, _combine, max_leaves=8)
_condition_texts = st.recursive(
    st.tuples(_term_texts, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _term_texts).map(" ".join),
    lambda c: st.one_of(st.tuples(c, st.sampled_from(["and", "or"]), c).map(lambda t: f"({t[0]}) {t[1]} "
                                                                            f"({t[2]})"),
                        c.map(lambda t: f"not ({t})")),
    max_leaves=4)


@settings(max_examples=200, deadline=None)
@given(_condition_texts, st.lists(st.integers(-6, 6), min_size=4, max_size=4))
def test_round_trip_preserves_meaning(text, values):
    f = parse_condition(text)
    again = parse_condition(formula_str(f))
    assert again == f
    point = dict(zip(["a", "b", "T", "L['x'].size()[1]"], values))
    point = {s.name: point[s.name] for s in f.free_symbols}
    assert holds(again, point) == holds(f, point)


def test_absorbed_connective_stays_flat_through_a_round_trip():
    # ``(p or q) and False`` keeps ``p or q`` (it may raise) beside its negation, an ``and``
    # of its own: spliced flat, so printing and parsing again gives the same formula.
    f = parse_condition("((a == a) or (a == (a // a))) and (0 == 1)")
    assert parse_condition(formula_str(f)) == f
    assert len(f.args) == 3
    assert not holds(f, {"a": 3})
