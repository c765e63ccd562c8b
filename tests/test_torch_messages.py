"""Reading torch.export's own error text back into guards, and explaining them."""
from shapeproof.shapes.apps.torch_messages import explain_messages, explain_torch_error, find_guards, readable

CONSTRAINTS = """Constraints violated (H, W)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of W = L['pixel_values'].size()[3] in the specified range 32 <= W <= 256 satisfy the generated guard (L['pixel_values'].size()[3] % 4) == 0.
  - Not all values of T = L['x'].size()[1] in the specified range T <= 1024 satisfy the generated guard math.ceil(L['x'].size()[1] / 16) != 1.
  - Not all values of S = L['ids'].size()[1] in the specified range S <= 512 satisfy the generated guard 2 <= L['ids'].size()[1] and L['ids'].size()[1] <= 511
Suggested fixes:
  S = Dim('S', max=511)
"""


def test_constraint_violations_become_guards_in_dim_names_with_their_ranges():
    found = find_guards(CONSTRAINTS)
    assert [g.guard for g in found] == ["(W % 4) == 0", "math.ceil(T / 16) != 1", "2 <= S and S <= 511"]
    assert found[0].ranges == {"W": (32, 256)} and found[0].sources == {"W": "pixel_values.size(3)"}
    assert found[1].ranges == {"T": (2, 1024)}          # torch omits the implicit lower bound 2
    assert found[2].ranges == {"S": (2, 512)}


def test_each_guard_is_explained_with_a_counterexample_that_violates_it():
    results = explain_torch_error(CONSTRAINTS)
    by_guard = {found.guard: ex for found, ex in results}
    assert by_guard["(W % 4) == 0"].status == "refuted"
    assert by_guard["(W % 4) == 0"].counterexample["W"] % 4 != 0
    ceil = by_guard["math.ceil(T / 16) != 1"]
    assert ceil.status == "refuted" and -(-ceil.counterexample["T"] // 16) == 1
    assert by_guard["2 <= S and S <= 511"].counterexample == {"S": 512}


def test_equality_specialization_and_data_dependent_messages():
    text = """  - The values of W = L['x'].size()[3] and H = L['x'].size()[2] must always be equal.
  - You marked L as dynamic but your code specialized it to be a constant (3000). If you're using mark_dynamic...
Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: u0)
"""
    found = {g.kind: g for g in find_guards(text)}
    assert found["equality"].guard == "W == H"
    assert found["equality"].sources == {"W": "x.size(3)", "H": "x.size(2)"}
    assert found["specialization"].guard == "L == 3000" and found["specialization"].ranges == {"L": (2, None)}
    assert found["data-dependent"].ranges == {"u0": (0, None)}
    verdicts = {g.kind: ex for g, ex in explain_torch_error(text)}
    assert verdicts["equality"].status == "refuted"
    assert verdicts["specialization"].counterexample["L"] != 3000
    assert verdicts["data-dependent"].counterexample["u0"] != 1


def test_a_true_guard_is_proven_and_a_log_without_guards_yields_none():
    text = ("Not all values of T = L['x'].size()[1] in the specified range 2 <= T <= 512 satisfy the "
            "generated guard (((-1) + ((2*L['x'].size()[1]*L['x'].size()[1]) // L['x'].size()[1])) % "
            "L['x'].size()[1]) != 0.")
    [(_, ex)] = explain_torch_error(text)
    assert ex.status == "proven"
    assert find_guards("Data-dependent branching\n  Explanation: Detected data-dependent branching") == []


def test_readable_paths():
    assert readable("L['x'].size()[1]") == "x.size(1)"
    assert readable("L['kwargs']['mask'].size()[0]") == "kwargs['mask'].size(0)"


def test_relaxed_and_inferred_dims_unbounded_ranges_and_paths_named_later():
    text = """Constraints violated (B, L['y'].size()[0])! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of RelaxedUnspecConstraint(L['y'].size()[0]) are valid because L['y'].size()[0] was inferred to be equal to 2*L['x'].size()[10].
  - Not all values of N = L['n'] in the specified range 4 <= N are valid because N was inferred to be a constant (7).
  - Not all values of B = L['x'].size()[1] in the specified range 2 <= B <= int_oo satisfy the generated guard Eq(L['x'].size()[1], L['x'].size()[10]).
  - Not all values of C = L['x'].size()[10] in the specified range 3 <= C <= 9 satisfy the generated guard (L['x'].size()[10] % 3) == 0.
"""
    found = find_guards(text)
    assert [g.guard for g in found] == ["y_size_0 == (2*C)", "N == 7", "Eq(B, C)", "(C % 3) == 0"]
    relaxed, const, both, _ = found
    assert relaxed.ranges == {"y_size_0": (2, None), "C": (3, 9)}
    assert relaxed.sources["y_size_0"] == "y.size(0)"
    assert const.ranges == {"N": (4, None)}
    assert both.ranges == {"B": (2, None), "C": (3, 9)}
    assert both.sources == {"B": "x.size(1)", "C": "x.size(10)"}
    explained = {g.guard: ex for g, ex in explain_torch_error(text)}
    assert explained["N == 7"].counterexample["N"] != 7
    point = explained["Eq(B, C)"].counterexample
    assert point["B"] != point["C"] and 3 <= point["C"] <= 9
    assert explained["(C % 3) == 0"].counterexample["C"] in (4, 5, 7, 8)


def test_data_dependent_errors_keep_the_user_frame_and_drop_dim_fixes():
    text = """Could not guard on data-dependent expression Eq(Mod(u0, 4), 0) (unhinted: Eq(Mod(u0, 4), 0)).  (Size-like symbols: u0)

Caused by: (_export/non_strict_utils.py:1205 in __torch_function__)
The following call raised this error:
  File "models/pad.py", line 12, in forward
    if n % 4 == 0:

Could not extract specialized integer from data-dependent expression u1 (unhinted: u1).  (Size-like symbols: none)
"""
    [(found, ex), (value, not_checked)] = explain_torch_error(text)
    assert found.ranges == {"u0": (0, None)} and "size-like" in " ".join(found.notes)
    assert ex.status == "refuted" and ex.counterexample["u0"] % 4 != 0 and ex.fixes == []
    assert ex.where["file"] == "models/pad.py" and ex.where["line"] == 12
    assert ex.where["code"] == "if n % 4 == 0:"
    assert value.kind == "data-dependent value"
    assert not_checked.status == "not checked" and not_checked.index == 1


def test_dynamo_data_dependent_branch_becomes_its_traced_comparison():
    text = """Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).

      The branch condition involves a tensor computed as follows:
        # File "m.py", line 7, in pad, code: max_pad = max(a, b)
        max_pad = maximum(a, extra)
        # File "m.py", line 9, in pad, code: if length <= max_pad:
        ge = ge(max_pad, 4800)

  Hint: Use `torch.cond` to express dynamic control flow.

from user code:
   File "m.py", line 20, in forward
    out = self.pad(x)
"""
    [found] = find_guards(text)
    assert found.guard == "max_pad >= 4800" and found.ranges == {"max_pad": (None, None)}
    assert (found.where.lineno, found.where.code) == (9, "if length <= max_pad:")


def test_explain_messages_numbers_guards_and_honours_the_time_budget():
    text = "\n".join("  - Not all values of T = L['x'].size()[1] in the specified range 2 <= T <= 64 "
                     f"satisfy the generated guard (L['x'].size()[1] % {k}) != 0." for k in (2, 3, 5))
    explanations = explain_messages(text)
    assert [ex.index for ex in explanations] == [0, 1, 2]
    assert [ex.counterexample for ex in explanations] == [{"T": 2}, {"T": 3}, {"T": 5}]
    assert all(ex.status == "not checked" for ex in explain_messages(text, budget=0))
    truncated = explain_messages("Not all values of T = L['x'].size()[1] in the specified range T <= 8 "
                                 "satisfy the generated guard ((L['x'].size()[1] // 4")
    assert truncated[0].status == "not checked" and "not explained" in truncated[0].notes[0]


def test_a_long_line_of_unfinished_statements_is_read_in_linear_time():
    """A regular expression with two lazy parts took 100 s on this 16 KB line (cubic backtracking)."""
    import time

    text = "Constraints violated (T)!\n" + "Not all values of x in the specified range" * 400
    start = time.perf_counter()
    assert find_guards(text) == []
    text += " satisfy the generated guard x > 3"
    [found] = find_guards(text)
    assert found.guard.endswith("> 3") and time.perf_counter() - start < 2


def test_long_lines_of_data_dependent_and_specialization_phrases_are_read_in_linear_time():
    """Lazy parts over one long line backtracked quadratically: 112 KB took 20 s."""
    import time

    data = "Could not guard on data-dependent expression " + " (unhinted: x)" * 8000
    solved = "solving the guards generated for " * 4000
    start = time.perf_counter()
    for text in (data, solved):
        find_guards(text)
    assert time.perf_counter() - start < 2
    [found] = find_guards("Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  "
                          "(Size-like symbols: u0)\n")
    assert found.guard == "Eq(u0, 1)" and found.kind == "data-dependent"
    [solved_one] = find_guards("solving the guards generated for L['x'].size()[0] resulted in a specialized "
                               "value of 4.")
    assert solved_one.kind == "specialization" and solved_one.guard.endswith("== 4")


def test_an_empty_range_in_a_message_proves_nothing():
    """``10 <= T <= 2`` made every guard hold vacuously."""
    [found] = find_guards("Not all values of T = L['x'].size()[1] in the specified range 10 <= T <= 2 satisfy "
                          "the generated guard (L['x'].size()[1] % 4) != 0.")
    assert found.ranges == {"T": (10, None)} and any("empty range" in note for note in found.notes)
