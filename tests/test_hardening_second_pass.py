"""Issue 40's reproducers (the second hardening pass): sympy's meaning for Or/And, facts with floats,
budgets that hold in every strategy, and the last unchecked inputs.  Each test failed on the code before
its fix."""
import itertools
import warnings

import pytest

from shapeproof.solver import Status, prove

STRATEGIES = ("interval", "rewrite", "enumerate", "z3", "cascade")
BOX = {"T": (1, 10)}

# operands as sympy text and as the Python it stands for (1 // (T - 3) raises at T = 3)
OPERANDS = {
    "Eq(1 // (T - 3), 0)": "1 // (T - 3) == 0",
    "Ne(T // (T - 5), 2)": "T // (T - 5) != 2",
    "True": "True",
    "False": "False",
    "T > 6": "T > 6",
}
SPELLINGS = {"Or({}, {})": "or", "({}) | ({})": "or", "And({}, {})": "and", "({}) & ({})": "and"}


def _python(text: str, t: int):
    """Python's value of ``text`` at ``T = t``, None where it raises."""
    try:
        return bool(eval(text, {}, {"T": t}))
    except ZeroDivisionError:
        return None


def _sympy_meaning(word: str, values) -> bool | None:
    """sympy's Or/And on three values: any operand that decides does; else undefined if one is."""
    decides = word == "or"
    if decides in values:
        return decides
    return None if None in values else not decides


def _holds_everywhere(word: str, operands) -> bool:
    return all(_sympy_meaning(word, [_python(OPERANDS[o], t) for o in operands]) is True
               for t in range(BOX["T"][0], BOX["T"][1] + 1))


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("pair", list(itertools.combinations(OPERANDS, 2)))
def test_sympy_connectives_mean_the_same_in_either_order_in_every_strategy(spelling, pair):
    word = SPELLINGS[spelling]
    expected = _holds_everywhere(word, pair)
    for strategy in STRATEGIES:
        verdicts = []
        for a, b in (pair, pair[::-1]):
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)      # a strategy's wrong claim warns
                verdicts.append(prove(spelling.format(a, b), ranges=BOX, strategy=strategy))
        assert verdicts[0].status is verdicts[1].status, (strategy, verdicts)
        if strategy in ("enumerate", "cascade") or verdicts[0].decided:
            assert verdicts[0].proven is expected, (strategy, verdicts[0])


@pytest.mark.parametrize("fact", ["Or(Eq(1 // (T - 3), 0), True)", "Or(True, Eq(1 // (T - 3), 0))",
                                  "(1 // (T - 3) == 0) | True", "True | (1 // (T - 3) == 0)"])
def test_a_sympy_or_with_true_is_true_as_a_goal_and_restricts_nothing_as_a_fact(fact):
    assert prove(fact, ranges=BOX).proven
    for strategy in STRATEGIES:
        v = prove("T != 3", ranges=BOX, facts=[fact], strategy=strategy)
        assert not v.proven, (strategy, v)              # T = 3 satisfies the fact and violates the goal
        assert v.status is Status.UNKNOWN or v.counterexample == {"T": 3}, (strategy, v)


def test_pythons_or_and_and_keep_their_left_to_right_meaning():
    v = prove("(1 // (T - 3) == 0) or True", ranges=BOX)
    assert v.refuted and v.counterexample == {"T": 3}
    assert prove("True or (1 // (T - 3) == 0)", ranges=BOX).proven
    v = prove("not ((1 // (T - 3) == 0) and False)", ranges=BOX)
    assert v.refuted and v.counterexample == {"T": 3}
    assert prove("not (False and (1 // (T - 3) == 0))", ranges=BOX).proven


@pytest.mark.parametrize("text", ["Not(And(Eq(1 // (T - 3), 0), False))", "~(False & (1 // (T - 3) == 0))",
                                  "Not(And(False, Eq(1 // (T - 3), 0)))"])
def test_negation_keeps_sympys_absorption(text):
    assert prove(text, ranges=BOX).proven
