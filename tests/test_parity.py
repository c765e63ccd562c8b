"""Parity with torch.export on every case of ``parity_cases.py`` (issue 13): shapeproof.export is a drop-in.

Per case, in-process (``bench.parity.run_case`` with the quick probe set):
when torch exports, shapeproof exports; shapeproof's range for every input
dim contains torch's; every probe shape torch's program accepts, shapeproof's
accepts; wherever shapeproof's program runs its outputs match eager's; when
both raise, shapeproof's message has every checklist item torch's has, its
error is of torch's class and torch's ``refine_dynamic_shapes_from_suggested_fixes``
reads it where it reads torch's; a
program only shapeproof exports does not reject valid inputs inside its own
ranges without a warning (docs/pages/guide/bench.md: every kept guard is decided or reported).

Cases that fail today are ``xfail(strict=True)`` with the reason measured on
them, so a case that starts to pass turns the run red until it leaves
``XFAIL``.  The last tests check that each of those checks can fail.
"""
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # bench/ is a folder of scripts, not installed

from parity_cases import CASES, ParityCase, module  # noqa: E402  (after the path and importorskip)
from torch.export import Dim  # noqa: E402

from bench import parity  # noqa: E402

# Cases that fail today, each with the shapeproof behaviour that breaks parity (none at the moment).
XFAIL: dict[str, str] = {}


def _param(name):
    marks = [pytest.mark.xfail(strict=True, reason=XFAIL[name])] if name in XFAIL else []
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_param(n) for n in CASES])
def test_shapeproof_is_a_drop_in(name):
    row = parity.run_case(CASES[name], level="quick")
    failures = [f"{kind}: {detail}" for kind, detail in row["problems"] if kind in parity.MUST_BE_ZERO]
    assert not failures, "\n".join(failures)


def test_xfail_list_names_only_existing_cases():
    assert set(XFAIL) <= set(CASES)


def test_registry_has_every_exportdb_example_three_ways_and_cites_its_source():
    from torch._export.db.examples import all_examples

    examples = set(all_examples())
    for group in ("exportdb", "exportdb-auto", "exportdb-dynamic"):
        assert {n.split(":", 1)[1] for n, c in CASES.items() if c.group == group} == examples
    assert len(CASES) >= 200
    assert all(c.source for c in CASES.values())


def test_cases_build_fresh_and_identical_objects():
    case = CASES["derived_dim_plus_one"]
    (m1, a1, _, _), (m2, a2, _, _) = case.build(), case.build()
    assert m1 is not m2 and a1[0] is not a2[0] and torch.equal(a1[0], a2[0])


# ---------------------------------------------------------------------------------------------- the checks
# can fail

def _doubling(factor=2.0):
    def forward(self, x):
        return x * factor
    return module(forward)


def _case(spec, build=None):
    return ParityCase("synthetic", "synthetic", "this file",
                      build or (lambda: (_doubling(), (torch.randn(6, 3),), {}, spec)))


def _pretend_shapeproof(monkeypatch, make):
    """Make ``run_case`` take shapeproof's outcome from ``make(case)``; torch's stays real."""
    real = parity.export_with

    def export_with(exporter, case):
        return real(exporter, case) if exporter == "torch" else make(case)

    monkeypatch.setattr(parity, "export_with", export_with)


def _torch_program(model, args, spec):
    return parity.Outcome("shapeproof", torch.export.export(model, args, dynamic_shapes=spec, strict=False))


def test_a_program_narrower_than_torchs_is_reported(monkeypatch):
    _pretend_shapeproof(monkeypatch, lambda case: _torch_program(
        _doubling(), (torch.randn(6, 3),), {"x": {0: Dim("n", min=2, max=8)}}))
    row = parity.run_case(_case({"x": {0: Dim("n", min=2, max=32)}}), level="quick")
    kinds = {k for k, _ in row["problems"]}
    assert {"narrower_range", "narrower_acceptance"} <= kinds


def test_a_program_that_disagrees_with_eager_is_reported(monkeypatch):
    _pretend_shapeproof(monkeypatch, lambda case: _torch_program(
        _doubling(3.0), (torch.randn(6, 3),), {"x": {0: Dim("n")}}))
    row = parity.run_case(_case({"x": {0: Dim("n")}}), level="quick")
    assert "eager_mismatch" in {k for k, _ in row["problems"]}


class _InstanceNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.InstanceNorm1d(1)

    def forward(self, x):
        return self.norm(x)


def test_a_difference_from_eager_that_torchs_program_shares_is_not_shapeprofs():
    """Eager InstanceNorm1d raises at one element per channel; the exported graph has no such check, in
    torch's program as in shapeproof's."""
    spec = {"x": (Dim.AUTO, Dim.AUTO)}
    case = ParityCase("norm", "synthetic", "this file",
                      lambda: (_InstanceNorm(), (torch.randn(1, 2),), {}, spec),
                      probes_factory=lambda: [((torch.randn(1, 1),), {})])
    kinds = [k for k, _ in parity.run_case(case, level="quick")["problems"]]
    assert "torch_eager_mismatch" in kinds and "shared_eager_mismatch" in kinds
    assert not set(kinds) & set(parity.MUST_BE_ZERO)


def test_a_failed_export_where_torch_exports_is_reported(monkeypatch):
    _pretend_shapeproof(monkeypatch, lambda case: parity.Outcome("shapeproof", None, RuntimeError("no")))
    row = parity.run_case(_case({"x": {0: Dim("n")}}), level="quick")
    assert ("torch_only", "RuntimeError: no") in [tuple(p) for p in row["problems"]]


def test_a_less_informative_error_is_reported(monkeypatch):
    _pretend_shapeproof(monkeypatch, lambda case: parity.Outcome("shapeproof", None, ValueError("bad spec")))
    row = parity.run_case(CASES["derived_twice_mismatch"], level="quick")
    assert row["torch"]["status"] == "failed"
    assert "less_informative" in {k for k, _ in row["problems"]}


def test_an_error_torchs_callers_cannot_handle_is_reported():
    """A caller written for torch.export catches torch's class and refines its spec from the message."""
    from torch._dynamo.exc import UserError, UserErrorType

    spec = ({0: Dim("B", min=2, max=100)},)
    torchs = UserError(UserErrorType.CONSTRAINT_VIOLATION,
                       "Constraints violated (B)!\nSuggested fixes:\n  B = 4")
    unreadable = UserError(UserErrorType.CONSTRAINT_VIOLATION, "B only works as 4")
    assert [k for k, _ in parity.error_drop_in(torchs, unreadable, spec)] == ["unrefinable"]
    assert [k for k, _ in parity.error_drop_in(torchs, RuntimeError("B only works as 4"), spec)] == [
        "other_error_class", "unrefinable"]
    assert parity.error_drop_in(torchs, torchs, spec) == []
    assert parity.error_drop_in(unreadable, unreadable, spec) == []     # nothing of torch's to read


def test_range_containment_and_output_comparison():
    assert parity.contains((2, None), (3, 10)) and parity.contains((2, 10), (2, 10))
    assert not parity.contains((3, None), (2, 10)) and not parity.contains((2, 10), (2, None))
    t = torch.arange(4.0)
    assert parity.differs((t, 3), (t.clone(), 3)) is None
    assert parity.differs(t, t + 1) is not None and parity.differs((t, 3), (t, 4)) is not None
    assert parity.differs([t], [t, t]) is not None


def test_error_checklist_reads_torch_messages():
    torch_message = ("Constraints violated (dimy)! The values of dimy = L['y'].size()[0] in the specified "
                     "range 4 <= dimy <= 7 must always be related to the values of dimx = L['x'].size()[0] "
                     "by dimy = dimx + 1.\nSuggested fixes:\n  dimy = dimx + 1")
    assert parity.error_checklist(torch_message) == {"input_dim": True, "source_line": False, "value": True,
                                                     "fix": True}
    assert not any(parity.error_checklist("something went wrong").values())
    assert parity.error_checklist('File "model.py", line 12, in forward')["source_line"]
    assert parity.error_checklist("needs dimx", names={"dimx"})["input_dim"]
