"""Reading torch.export's own error text back into guards, and explaining them."""
from shapeproof.shapes.torch_messages import explain_torch_error, find_guards, readable

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
    assert by_guard["(W % 4) == 0"].status == "refuted" and by_guard["(W % 4) == 0"].counterexample["W"] % 4 != 0
    ceil = by_guard["math.ceil(T / 16) != 1"]
    assert ceil.status == "refuted" and -(-ceil.counterexample["T"] // 16) == 1
    assert by_guard["2 <= S and S <= 511"].counterexample == {"S": 512}


def test_equality_specialization_and_data_dependent_messages():
    text = """  - The values of W = L['x'].size()[3] and H = L['x'].size()[2] must always be equal.
  - You marked L as dynamic but your code specialized it to be a constant (3000). If you're using mark_dynamic...
Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1)).  (Size-like symbols: u0)
"""
    found = {g.kind: g for g in find_guards(text)}
    assert found["equality"].guard == "W == H" and found["equality"].sources == {"W": "x.size(3)", "H": "x.size(2)"}
    assert found["specialization"].guard == "L == 3000" and found["specialization"].ranges == {"L": (2, None)}
    assert found["data-dependent"].ranges == {"u0": (0, None)}
    verdicts = {g.kind: ex for g, ex in explain_torch_error(text)}
    assert verdicts["equality"].status == "refuted"
    assert verdicts["specialization"].counterexample["L"] != 3000
    assert verdicts["data-dependent"].counterexample["u0"] != 1


def test_a_true_guard_is_proven_and_a_log_without_guards_yields_none():
    text = ("Not all values of T = L['x'].size()[1] in the specified range 2 <= T <= 512 satisfy the generated "
            "guard (((-1) + ((2*L['x'].size()[1]*L['x'].size()[1]) // L['x'].size()[1])) % L['x'].size()[1]) != 0.")
    [(found, ex)] = explain_torch_error(text)
    assert ex.status == "proven"
    assert find_guards("Data-dependent branching\n  Explanation: Detected data-dependent branching") == []


def test_readable_paths():
    assert readable("L['x'].size()[1]") == "x.size(1)"
    assert readable("L['kwargs']['mask'].size()[0]") == "kwargs['mask'].size(0)"
