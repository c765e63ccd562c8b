"""The shape environment, rule by rule, against documented torch.export behaviour.

Each test quotes the documentation sentence it follows (torch 2.13 docstrings
in the installed wheel, or the dynamic-shapes pages of docs.pytorch.org).
"""
import pytest
from shapeproof.shapes import CheckFailed, DataDependentError, InputOutOfRange, ShapeEnv, Source
from shapeproof.solver import parse_condition


def dim(env, hint, path="x.size(1)", declared=None, name=None):
    return env.create_backed_symbol(hint, Source(path, path.split(".")[0], 1), declared=declared,
                                    dim_name=name)


# --- symbols and ranges ---------------------------------------------------------

def test_example_sizes_0_and_1_become_constants():
    """docs.pytorch.org, "The Zero-One Specialization Problem": "we specialize automatically on
    inputs with sizes 0 or 1 and assume that any remaining inputs cannot be 0 or 1"."""
    env = ShapeEnv()
    assert dim(env, 1) == 1 and dim(env, 0, "y.size(0)") == 0
    assert any("specialized to the constant 1" in note for note in env.notes)
    # a dim the user declared dynamic but gave as 1 in the example is reported, not silently static
    named = dim(env, 1, "z.size(0)", declared=(1, 64), name="B")
    assert named == 1
    assert env.produce_guards().specialized and not env.produce_guards().ok


def test_dynamic_dims_get_2_to_infinity():
    """Same sentence: the remaining inputs are assumed not to be 0 or 1, i.e. range [2, inf)."""
    env = ShapeEnv()
    s = dim(env, 7)
    assert env.ranges[s] == (2, None)
    assert env.evaluate(f"{s} != 1") and env.evaluate(f"{s} >= 2")
    assert env.guards == []   # decided by the range, no guard


def test_declared_min_0_or_1_is_kept_as_written():
    """torch.export.Dim docstring: "By marking a dimension with a Dim, the compiler associates the
    dimension with a symbolic integer containing a dynamic range." The declared range is kept for
    the program's input checks; tracing assumes sizes 0/1 behave like 2 and says so."""
    env = ShapeEnv()
    b = dim(env, 4, "x.size(0)", declared=(1, 8), name="B")
    info = env.symbols[b]
    assert info.declared == (1, 8) and info.range == (2, 8)
    assert any("assumed to behave like size 2" in n for n in info.notes)
    assert env.evaluate(f"{b} != 1")          # the 0/1 assumption decides this without a guard...
    env.evaluate(f"{b} % 2 == 0")              # ...but a real guard that also fails at 1 is reported
    report = env.produce_guards()
    assert [v.counterexample for v in report.violations] == [{"B": 3}]


def test_example_outside_declared_range_is_an_error():
    """Dim docstring: "Named Dims provide a stricter way of specifying dynamism, where exceptions are
    raised if the compiler infers constraints that do not match the user specification.\""""
    with pytest.raises(InputOutOfRange, match="outside the declared range"):
        dim(ShapeEnv(), 9000, declared=(2, 4096), name="T")


def test_guard_narrower_than_the_dim_is_a_violation_with_a_verified_fix():
    """Same sentence: a guard the declared range does not satisfy raises, here with the counterexample."""
    env = ShapeEnv()
    t = dim(env, 100, declared=(2, 1024), name="T")
    assert env.evaluate(f"{t} >= 5")
    (violation,) = env.produce_guards().violations
    assert violation.counterexample == {"T": 2}
    (fix,) = [f for f in violation.fixes if f.kind == "range"]
    assert (fix.min, fix.max) == (5, 1024)


def test_a_guard_on_a_rounded_float_gets_the_sizes_where_it_holds():
    """``int(math.ceil(T / 3))`` specializes to 13 at T = 37: the guard holds at 37..39, and the fix says
    so (it was the empty ``Dim('T', min=37, max=36)``, which ``Dim`` itself refuses)."""
    env = ShapeEnv()
    t = dim(env, 37, declared=(1, 3000), name="T")
    assert env.evaluate(f"math.ceil({t} / 3) == 13")
    (violation,) = env.produce_guards().violations
    assert [(f.kind, f.min, f.max) for f in violation.fixes if f.kind == "range"] == [("range", 37, 39)]


def test_a_relation_of_named_dims_that_teaches_a_divisibility_and_fails_for_a_size_alone_is_a_violation():
    """``x.view(-1, T // 2, 2)`` needs ``(B*T) % (2*(T // 2)) == 0`` and ``(B*T) // (2*(T // 2)) == B``,
    which together make T even (torch, which has no such reasoning, asks ``T % (T // 2) == 0`` next, a
    guard on T, and raises): with B <= 8, no B makes them hold at an odd T from 11 on (at T = 3, 5, 7, 9
    some B does), so the view narrows T by itself: a violation with a fix, not an input check; and so does
    the first relation, which taught nothing but narrows T as well."""
    env = ShapeEnv()
    b = dim(env, 2, "x.size(0)", declared=(1, 8), name="B")
    t = dim(env, 38, "x.size(1)", declared=(2, 1000), name="T")
    env.evaluate(f"(({b}*{t}) % (2*({t} // 2))) == 0")
    env.evaluate(f"(({b}*{t}) // (2*({t} // 2))) == {b}")
    report = env.produce_guards()
    assert [g.taught for g in report.guards] == [frozenset(), frozenset({t})]
    assert len(report.violations) == 2 and report.restrictions == []
    fixes = [(f.dim, f.kind, f.modulus, f.remainder) for f in report.combined_fixes]
    assert fixes == [("T", "multiple", 2, 0)]


def test_derived_dims_are_substituted():
    """Dim docstring: "Named Dims also allow specification of relationships between dimensions, up to
    univariate linear relations.\""""
    env = ShapeEnv()
    h = env.create_backed_symbol(32, Source("h"), declared=(2, 256), dim_name="h")
    H = dim(env, 64, "x.size(2)", declared=(4, 512))
    env.relate(H, f"2*{h}")
    assert env.evaluate(f"{H} % 2 == 0") and env.evaluate(f"{H} // 2 == {h}")
    assert env.guards == []


def test_same_dim_name_is_the_same_symbol():
    """Dim docstring example: the same ``s0`` for ``x`` dim 1 and ``y`` dim 0 declares them equal."""
    env = ShapeEnv()
    a = dim(env, 8, "x.size(1)", declared=(2, 64), name="s0")
    b = dim(env, 8, "y.size(0)", declared=(2, 64), name="s0")
    assert a == b
    assert env.evaluate(f"{a} == {b}") and env.guards == []
    assert sorted(src.path for src in env.symbols[a].sources) == ["x.size(1)", "y.size(0)"]


# --- decisions ------------------------------------------------------------------------

def test_backed_undecidable_follows_the_example_and_records_a_guard():
    env = ShapeEnv()
    t = dim(env, 50, declared=(2, 1024), name="T")
    assert env.evaluate(f"{t} % 4 != 0") is True
    assert env.evaluate(f"{t} % 4 == 0") is False        # now implied by the guard: no second guard
    assert len(env.guards) == 1
    assert env.guards[0].where.frame.filename == __file__   # provenance: this test's line
    assert "t} % 4 != 0" in env.guards[0].where.frame.code


def test_unbacked_undecidable_is_a_data_dependent_error():
    """torch 2.13 raises GuardOnDataDependentSymNode: "Could not guard on data-dependent expression";
    the error here names the symbol, where it came from, and the torch._check calls that unblock it."""
    env = ShapeEnv()
    u = env.create_unbacked_symbol(Source("nonzero(x).size(0)", op="aten.nonzero.default"))
    with pytest.raises(DataDependentError) as err:
        env.evaluate(f"{u} > 5")
    text = str(err.value)
    assert "nonzero(x).size(0)" in text and "u0 > 5" in text
    assert "torch._check(u0 > 5)" in err.value.suggestions
    assert "torch._check(u0 <= 5)" in err.value.suggestions


def test_guard_or_false_returns_the_fallback_without_a_guard():
    """symbolic_shapes.guard_or_false docstring: "Try to guard a, if data dependent error encountered
    just return false.\""""
    env = ShapeEnv()
    u = env.create_unbacked_symbol("u")
    assert env.evaluate(f"{u} == 1", fallback=False) is False
    assert env.guards == [] and env.runtime_asserts == []


def test_check_adds_a_fact_refines_the_range_and_records_a_runtime_assert():
    """torch._check docstring: "Throws error containing an optional message if the specified condition
    is False." For data-dependent sizes it becomes a runtime assert and a fact for later questions."""
    env = ShapeEnv()
    u = env.create_unbacked_symbol("item()")
    env.check(f"{u} >= 4")
    assert env.ranges[u] == (4, None)
    assert env.evaluate(f"{u} >= 2") is True       # now decidable, no error
    assert [str(a.condition) for a in env.runtime_asserts] == ["u0 >= 4"]
    with pytest.raises(CheckFailed):
        env.check(f"{u} < 3")                        # contradicts what is known


def test_check_on_backed_sizes_must_hold_for_the_example():
    env = ShapeEnv()
    t = dim(env, 10, declared=(2, 100), name="T")
    with pytest.raises(CheckFailed, match="false for the example"):
        env.check(f"{t} % 4 == 0")
    env.check(f"{t} % 2 == 0")                     # holds for 10: becomes an input assumption
    assert env.guards[-1].from_check
    assert env.produce_guards().violations[0].counterexample == {"T": 3}


def test_size_oblivious_treats_size_like_symbols_as_at_least_2():
    """torch._check_is_size docstring: it opts "into alternate semantics for guard_size_oblivious tests
    that treat values 0 and 1 equivalently to all other values.\""""
    env = ShapeEnv()
    u = env.create_unbacked_symbol("nonzero(x).size(0)")
    env.mark_size_like(u)
    assert env.ranges[u] == (0, None)
    with pytest.raises(DataDependentError):
        env.evaluate(f"{u} == 1")
    with env.size_oblivious():
        assert env.evaluate(f"{u} == 1") is False
        assert env.evaluate(f"{u} * 3 >= 6") is True
    assert env.guards == []                         # no guard that would exclude sizes 0 and 1


def test_equalities_substitute_symbols():
    env = ShapeEnv()
    a = dim(env, 6, "x.size(0)", declared=(2, 64), name="A")
    b = dim(env, 6, "y.size(0)", declared=(2, 64), name="B")
    assert env.evaluate(f"{a} == {b}") is True        # broadcasting-style guard
    assert env.evaluate(f"{a} + {b} == 2*{a}") is True
    assert len(env.guards) == 1 and b in env.knowledge.replacements
    (violation,) = env.produce_guards().violations
    assert any(f.kind == "equal" and {f.dim, f.other} == {"A", "B"} for f in violation.fixes)
    assert env.graph.inputs_of({a}) == ["x.size(0)", "y.size(0)"]


@pytest.mark.parametrize("fact", ["{x} % 8 == 0", "{x} == 8*({x} // 8)"])
def test_divisibility_introduces_a_multiple(fact):
    """``view``/``reshape`` emit ``x == 8*(x // 8)``; both forms must teach ``x = 8*k``."""
    env = ShapeEnv()
    x = dim(env, 64, declared=(8, 4096), name="T")
    assert env.evaluate(fact.format(x=x)) is True
    (k,) = env.derived
    assert env.ranges[k] == (1, 512)
    assert env.evaluate(f"({x} // 8) * 8 == {x}") and env.evaluate(f"{x} % 4 == 0")
    assert len(env.guards) == 1
    assert parse_condition(env.render(env.guards[0].condition)) == parse_condition(fact.format(x="T"))


def test_a_fact_that_implies_a_divisibility_teaches_it():
    """``pixel_unshuffle(2)``'s numel check ``H*W == 4*(H // 2)*(W // 2)`` holds only for even ``H`` and
    ``W``: refuted over odd sizes, it becomes a guard that teaches both divisibilities, so the questions
    after it in the trace are algebra on the halves (no ``//`` left in any fact)."""
    env = ShapeEnv()
    h = dim(env, 64, "x.size(2)", declared=(4, 512), name="H")
    w = dim(env, 48, "x.size(3)", declared=(4, 512), name="W")
    assert env.evaluate(f"{h}*{w} == 4*({h} // 2)*({w} // 2)") is True
    assert len(env.guards) == 1 and set(env.knowledge.replacements) == {h, w}
    assert env.knowledge.facts == []              # the guard says nothing beyond the two divisibilities
    assert sorted(env.ranges[k] for k in env.derived) == [(2, 256), (2, 256)]
    learned = [q for q in env.queries if q.purpose == "learn"]
    assert [q.status for q in learned] == ["proven", "proven"]
    before = len(env.queries)
    assert env.statically_known(f"2*({h} // 2) == {h}") is True
    assert env.statically_known(f"({w} % 2) == 0") is True
    asked = env.queries[before:]                  # questions on H = 2*k and W = 2*j: no division left
    assert asked and all("//" not in str(q.goal) and "%" not in str(q.goal) and not q.facts for q in asked)
    report = env.produce_guards()
    assert len(report.violations) == 1
    assert sorted(f.description for f in report.combined_fixes) == [
        "H = 2*Dim('H_2', min=2, max=256)", "W = 2*Dim('W_2', min=2, max=256)"]


@pytest.mark.parametrize("hint", [64, 63])
def test_a_fact_that_does_not_imply_a_divisibility_stays_a_fact(hint):
    """``H // 2 + W >= 40`` holds at odd and even ``H``: nothing is learned; at an odd example no
    divisibility is even asked (the example satisfies every fact)."""
    env = ShapeEnv()
    h = dim(env, hint, "x.size(2)", declared=(4, 512), name="H")
    w = dim(env, 48, "x.size(3)", declared=(4, 512), name="W")
    assert env.evaluate(f"({h} // 2) + {w} >= 40") is True
    assert env.knowledge.replacements == {} and len(env.knowledge.facts) == 1
    learned = [q.status for q in env.queries if q.purpose == "learn"]
    assert learned == (["refuted"] if hint % 2 == 0 else [])


def test_large_equalities_stay_facts():
    """Learning expands a fact; one of hundreds of nodes (Swin's reshapes) is kept as a plain fact instead."""
    env = ShapeEnv()
    big = " + ".join(f"(({{b}}*{{b}} + {i}) // {i + 2})" for i in range(40))
    hint = sum((36 + i) // (i + 2) for i in range(40))
    a = dim(env, hint, "x.size(0)", declared=(2, 10 ** 6), name="A")
    b = dim(env, 6, "y.size(0)", declared=(2, 64), name="B")
    assert env.evaluate(f"{a} == {big.format(b=b)}") is True
    assert env.knowledge.replacements == {} and not env.derived
    c = dim(env, 6, "z.size(0)", declared=(2, 64), name="C")
    assert env.evaluate(f"{c} == {b}") is True       # a small equality still substitutes
    assert env.knowledge.replacements


def test_explanation_leads_with_what_the_user_controls():
    env = ShapeEnv()
    t = dim(env, 50, declared=(2, 1024), name="T")
    env.evaluate(f"({t} % 4) != 0")
    report = env.produce_guards()
    ex = env.explain(report.violations[0])
    assert ex.status == "refuted" and ex.counterexample == {"T": 4}
    assert ex.condition == "(T % 4) != 0" and ex.dims[0].path == "x.size(1)"
    assert ("(T % 4)", "0") in ex.steps and ("(T % 4) != 0", "False") in ex.steps
    assert {f.kind for f in ex.fixes} >= {"multiple"}
    text = ex.text
    assert "(T % 4) != 0 is False" in text
    assert (text.index("test_shape_env.py") < text.index("fails at") < text.index("fixes")
            < text.index("engine form"))
    assert ex.to_dict()["counterexample"] == {"T": 4}


def test_joint_fix_covers_guards_that_need_several_dims():
    env = ShapeEnv()
    h = dim(env, 8, "x.size(2)", declared=(4, 64), name="H")
    w = dim(env, 6, "x.size(3)", declared=(4, 64), name="W")
    env.evaluate(f"3*{h}*{w} == 12*({h} // 2)*({w} // 2)")      # pixel_unshuffle's check
    report = env.produce_guards()
    (violation,) = report.violations
    assert violation.fixes == []                                 # no single-dim fix can work
    assert sorted((f.dim, f.modulus, f.remainder)
                  for f in report.combined_fixes) == [("H", 2, 0), ("W", 2, 0)]


def test_joint_fix_raises_minimums_where_no_congruence_helps():
    # Swin's `if min(input_resolution) <= self.window_size` over two dims: only larger images avoid it
    env = ShapeEnv()
    h = dim(env, 64, "x.size(2)", declared=(32, 256), name="H")
    w = dim(env, 96, "x.size(3)", declared=(32, 256), name="W")
    env.evaluate(f"(({h} // 4 + 1) // 2) > 4")       # Python's min() compares the two, then asks each
    env.evaluate(f"(({w} // 4 + 1) // 2) > 4")
    report = env.produce_guards()
    assert len(report.violations) == 2
    for violation, name in zip(report.violations, ("H", "W")):
        assert (violation.counterexample[name] // 4 + 1) // 2 <= 4
    # the smallest common minimum: (36 // 4 + 1) // 2 == 5 > 4, while (35 // 4 + 1) // 2 == 4
    assert sorted((f.dim, f.kind, f.min, f.max) for f in report.combined_fixes) == [
        ("H", "range", 36, 256), ("W", "range", 36, 256)]


def test_a_congruence_fix_uses_the_guards_own_large_divisor():
    # EnCodec pads audio to whole frames of 320 samples: `L >= 320 * ceil(L / 320)` holds only on multiples
    # of 320, a modulus no small one replaces; with `ceil(L / 320) > 6` the two make one derived dim
    env = ShapeEnv()
    length = dim(env, 4800, "x.size(2)", declared=(1, 48000), name="L")
    env.evaluate(f"{length} >= -320*((-{length}) // 320)")
    env.evaluate(f"6 < -((-{length}) // 320)")
    report = env.produce_guards()
    frames, enough = report.violations
    assert [(f.kind, f.modulus, f.remainder, f.min, f.max) for f in frames.fixes if f.kind == "multiple"] == [
        ("multiple", 320, 0, 1, 150)]
    shown = "L = 320*Dim('L_320', min=1, max=150)  (keeps under 1% of the declared range)"
    assert shown in env.explain(frames).text
    assert [(f.dim, f.kind, f.modulus, f.remainder, f.min, f.max) for f in report.combined_fixes] == [
        ("L", "multiple", 320, 0, 7, 150)]
    # a multiple that leaves one size in range is no multiple: a 3-wide range gets no modulus-4 fix
    env = ShapeEnv()
    n = dim(env, 8, "x.size(0)", declared=(6, 9), name="N")
    env.evaluate(f"({n} % 4) == 0")
    (violation,) = env.produce_guards().violations
    assert [f.kind for f in violation.fixes] == ["static"]


def test_joint_fix_combines_congruences_of_one_dim():
    # Swin's pads at each stage: patches of 4, windows of 4 patches, windows of 4 after merging 2x2
    env = ShapeEnv()
    w = dim(env, 96, "x.size(3)", declared=(32, 256), name="W")
    guards = [f"({w} % 4) == 0", f"(({w} // 4) % 4) == 0", f"(({w} // 8) % 4) == 0"]
    clamp = f"(({w} // 4 + 1) // 2) > 4"         # `if min(input_resolution) <= window_size`: a range, 36 <= W
    for guard in guards + [clamp]:
        env.evaluate(guard)
    report = env.produce_guards()
    assert len(report.violations) == 4
    assert [(f.dim, f.kind, f.modulus, f.remainder, f.min, f.max) for f in report.combined_fixes] == [
        ("W", "multiple", 32, 0, 2, 8)]


def test_knowledge_substitutes_each_shared_subterm_once_and_keeps_the_value():
    """A pad amount nested stage after stage is one DAG of a few nodes but a tree of millions: the
    substitution walks the DAG (``sympy.expand(t.xreplace(...))`` walked the tree)."""
    from shapeproof.shapes.knowledge import Knowledge
    from shapeproof.solver import FloorDiv, Mod, evaluate_term, symbol

    x, k = symbol("x"), symbol("k")
    term = x
    for _ in range(40):                    # each stage halves the size padded to a multiple of 4
        term = FloorDiv(term + Mod(4 - Mod(term, 4), 4), 2)
    knowledge = Knowledge()
    knowledge.eliminate(x, 4 * k, {x: (4, 400), k: (1, 100)})
    substituted = knowledge.term(term)
    assert len(knowledge._terms) <= 8 * 40              # each distinct subterm once (a tree: 2**40)
    for value in (1, 2, 7, 50, 100):                    # (no ``x`` left: evaluating needs only ``k``)
        assert evaluate_term(substituted, {k: value}) == evaluate_term(term, {x: 4 * value})


@pytest.mark.parametrize("library_file, theirs", [
    ("torchvision/models/swin_transformer.py", True), ("timm/models/vision_transformer.py", True),
    ("transformers/models/bert/modeling_bert.py", True), ("transformers/utils/generic.py", False),
    ("torch/nn/modules/conv.py", False), ("torch/models/anything.py", False), ("six.py", False),
    ("numpy/core/fromnumeric.py", False),
])
def test_model_definitions_in_libraries_count_as_the_users_code(library_file, theirs):
    """A guard asked in torchvision's or timm's model code names that line, not the caller's export call."""
    import os
    import sysconfig
    from shapeproof.shapes.provenance import _is_user_file
    assert _is_user_file(os.path.join(sysconfig.get_paths()["purelib"], library_file)) is theirs
