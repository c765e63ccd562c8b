"""Issue 39's idiom 3, a square grid recovered from a token count, exported as one program from one trace.

``g = int(math.sqrt(n))`` and ``g = int(n ** 0.5)`` made torch guard ``g`` to its example value (Python's
``int`` must return an int), so the program served one grid.  Under an engine trace the user's ``int``
of a SymFloat is ``torch.sym_int`` and ``math.sqrt`` of a size is ``torch.sym_sqrt`` (``symbolic_casts``),
and the engine reads the rounded root as ``isqrt`` (``exact_floats``).  Each case runs beside
torch.export on the same model and spec: shapeproof exports wherever torch does, at least as wide.
"""
import math
import sys
import warnings

import pytest
import torch
from torch.export import Dim

import shapeproof
from shapeproof.export import ExportError
from shapeproof.tracer.patching import engine_thread
from shapeproof.tracer.sizes.symbolic_casts import SymbolicInt
from shapeproof.tracer.sizes.user_globals import only_called, symbolic_user_names


def _root(n, spelling):
    return int(math.sqrt(n)) if spelling == "sqrt" else int(n ** 0.5)


class TokensToGrid(torch.nn.Module):
    """Tokens (B, N, D) back to a (B, D, g, g) grid, as ViT decoders and segmentation heads do."""

    def __init__(self, spelling):
        super().__init__()
        self.spelling = spelling

    def forward(self, tokens):
        b, n, d = tokens.shape
        g = _root(n, self.spelling)
        return tokens.transpose(1, 2).reshape(b, d, g, g)


class PatchesToGrid(torch.nn.Module):
    """An image (B, 3, 8g, 8g) to 8x8 patch tokens and back to their square grid: N = g*g by construction."""

    def __init__(self, spelling):
        super().__init__()
        self.spelling = spelling
        self.embed = torch.nn.Conv2d(3, 8, 8, stride=8)
        self.head = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, image):
        tokens = self.embed(image).flatten(2).transpose(1, 2)
        b, n, d = tokens.shape
        g = _root(n, self.spelling)
        return self.head(tokens.transpose(1, 2).reshape(b, d, g, g))


def _export(exporter, model, args, spec):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            program = exporter(model, args, dynamic_shapes=spec)
        except Exception as exc:      # noqa: BLE001 - torch's failures are what the comparison is about
            return None, exc, []
    return program, None, [str(w.message) for w in caught if "shapeproof" in str(w.message)]


def _runs(program, x) -> bool:
    try:
        program.module()(x)
    except Exception:                 # noqa: BLE001 - an input check rejecting x
        return False
    return True


SPELLINGS = ["sqrt", "pow"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_grid_of_patches_exports_as_one_program_where_torch_serves_one_size(spelling):
    """H = W = 8*G: the token count is G**2, so the root is G and nothing is left to check."""
    model = PatchesToGrid(spelling).eval()
    G = Dim("G", min=2, max=64)
    spec = ({0: Dim("B", min=1, max=8), 2: 8 * G, 3: 8 * G},)
    example = (torch.randn(2, 3, 48, 48),)
    ours, failure, notes = _export(shapeproof.export, model, example, spec)
    assert failure is None and not notes, (failure, notes)
    theirs, _, _ = _export(torch.export.export, model, example, spec)
    for g in (2, 33, 64):            # both ends of the range and its middle
        x = torch.randn(1, 3, 8 * g, 8 * g)
        torch.testing.assert_close(ours.module()(x), model(x), rtol=0, atol=0)
    # torch exports too, checking the grid it traced (g = 6) on its inputs: it rejects the other sizes
    assert theirs is not None and not _runs(theirs, torch.randn(1, 3, 16, 16))


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_token_count_declared_plainly_exports_with_its_square_check_and_share(spelling):
    """A plain Dim N: only squares reshape into a square grid.  The program checks that N is one and the
    warning says what share of the declared sizes that accepts, and that the model fails at the others;
    torch.export fails (it makes the root, or N, a constant)."""
    model = TokensToGrid(spelling)
    spec = ({0: Dim("B", min=1, max=8), 1: Dim("N", min=4, max=4096)},)
    example = (torch.randn(2, 64, 8),)
    ours, failure, notes = _export(shapeproof.export, model, example, spec)
    assert failure is None, failure
    _, theirs_failed, _ = _export(torch.export.export, model, example, spec)
    assert theirs_failed is not None
    for g in (2, 33, 64):
        x = torch.randn(3, g * g, 8)
        torch.testing.assert_close(ours.module()(x), model(x), rtol=0, atol=0)
    for n in (5, 63, 4095):
        assert not _runs(ours, torch.randn(1, n, 8))
    # 63 squares from 2**2 to 64**2, for every one of the 8 batch sizes
    share = "it accepts 504 of 32744 (B, N), 2%"
    assert any("they narrow N by itself" in n and n.endswith(share) for n in notes), notes
    assert any("the model fails at too (run at N = 63: RuntimeError" in n for n in notes), notes


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_under_dim_auto_the_program_serves_every_square_where_torchs_serves_one(spelling):
    model = TokensToGrid(spelling)
    spec = ({0: Dim.AUTO, 1: Dim.AUTO},)
    example = (torch.randn(2, 64, 8),)
    ours, failure, _ = _export(shapeproof.export, model, example, spec)
    theirs, _, _ = _export(torch.export.export, model, example, spec)
    assert failure is None and theirs is not None
    for g in (2, 8, 100):
        x = torch.randn(2, g * g, 8)
        torch.testing.assert_close(ours.module()(x), model(x), rtol=0, atol=0)
        assert _runs(theirs, x) == (g == 8)
    assert not _runs(ours, torch.randn(2, 65, 8))


class SquareOrNot(torch.nn.Module):
    """A branch on whether the token count is a square: the other side runs too."""

    def forward(self, x):
        b, n = x.shape
        g = int(math.sqrt(n))
        if b * g * g == b * n:
            return x.view(b, g, g).transpose(1, 2).reshape(b, n)
        return x * 2


def test_checks_that_refuse_most_sizes_the_model_runs_at_are_an_error_as_in_torch():
    spec = ({0: Dim("B", min=1, max=4), 1: Dim("N", min=4, max=400)},)
    example = (torch.randn(2, 64),)
    _, theirs_failed, _ = _export(torch.export.export, SquareOrNot(), example, spec)
    assert theirs_failed is not None
    with pytest.raises(ExportError) as caught:
        shapeproof.export(SquareOrNot(), example, dynamic_shapes=spec, cond_branches=False)
    message = str(caught.value)
    assert "would accept, of the declared sizes, 76 of 1588 (B, N);" in message
    assert "the model runs at N = 63, which they reject" in message
    assert "split=True" in message


def test_the_square_branch_is_one_cond_by_default():
    """The branch returns early: run as a cond, one program serves every size, square or not."""
    spec = ({0: Dim("B", min=1, max=4), 1: Dim("N", min=4, max=400)},)
    program = shapeproof.export(SquareOrNot(), (torch.randn(2, 64),), dynamic_shapes=spec)
    assert any(n.target is torch.ops.higher_order.cond for n in program.graph.nodes)
    for b, n in [(1, 4), (3, 63), (2, 64), (4, 400), (1, 399), (2, 100)]:
        x = torch.randn(b, n)
        torch.testing.assert_close(program.module()(x), SquareOrNot()(x), rtol=0, atol=0)


def test_split_exports_both_sides_of_the_square_branch():
    spec = ({0: Dim("B", min=1, max=4), 1: Dim("N", min=4, max=400)},)
    program = shapeproof.export(SquareOrNot(), (torch.randn(2, 64),), dynamic_shapes=spec, split=True)
    for n in (4, 63, 64, 400, 399):
        x = torch.randn(3, n)
        torch.testing.assert_close(program.module()(x), SquareOrNot()(x), rtol=0, atol=0)


# -- the casts themselves -----------------------------------------------------------------------------

def test_the_int_users_see_is_pythons_on_everything_but_a_symfloat():
    with engine_thread():
        test_the_int_users_see_is_pythons_on_other_threads()


def test_the_int_users_see_is_pythons_on_other_threads():
    assert SymbolicInt(3.7) == 3 and SymbolicInt("12") == 12 and SymbolicInt("ff", 16) == 255
    assert SymbolicInt() == 0 and type(SymbolicInt(2.5)).__name__ == "int"
    assert isinstance(5, SymbolicInt) and isinstance(True, SymbolicInt) and not isinstance(5.0, SymbolicInt)
    assert issubclass(bool, SymbolicInt) and not issubclass(float, SymbolicInt)


@pytest.mark.parametrize("source, takes", [
    ("g = int(n ** 0.5)", True),
    ("ok = isinstance(x, (int, float)) and issubclass(t, int)", True),
    ("def f(x: int) -> int:\n    y: list[int] = [int(x)]\n    return y[0]", True),
    ("same = type(x) is int", False),                         # identity: the stand-in is not int
    ("t = torch.ones(3, dtype=int)", False),                  # a dtype: torch wants int itself
    ("n = int.from_bytes(b'a', 'big')", False),
    ("xs = list(map(int, ys))", True),                        # called by map
])
def test_a_module_gets_the_symbolic_int_only_where_it_calls_int(source, takes):
    assert only_called(source, "int") is takes


def test_the_casts_reach_user_modules_that_call_int_only_and_are_undone(tmp_path, monkeypatch):
    (tmp_path / "calls_int.py").write_text("def grid(n):\n    return int(n ** 0.5)\n")
    (tmp_path / "compares_int.py").write_text("def plain(x):\n    return type(x) is int\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import calls_int
    import compares_int
    with symbolic_user_names():
        assert vars(calls_int)["int"] is SymbolicInt and "int" not in vars(compares_int)
        assert vars(sys.modules[__name__])["int"] is SymbolicInt        # this module calls int only
    assert "int" not in vars(calls_int) and "int" not in globals()
