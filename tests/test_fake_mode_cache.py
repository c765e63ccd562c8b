"""An engine trace's fake mode dispatches views around torch's fake-tensor cache until they recur (always
over divided sizes), other ops through it."""
import torch
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

from shapeproof.tracer.fake_mode import EngineFakeTensorMode
from shapeproof.tracer.torch_internals import FakeTensorMode


def _symbolic(mode_class, shape):
    mode = mode_class(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    return mode, mode.from_tensor(torch.randn(*shape))


def _views(x):
    return [x.view(-1), x.t(), x.unsqueeze(0).expand(3, *x.shape), x[:, 1:], x.reshape(x.shape[1], -1)]


def _dynamic(shape):
    mode = EngineFakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * len(shape))
    return mode, mode.from_tensor(torch.randn(*shape), symbolic_context=context)


def test_views_use_the_cache_once_they_recur_never_over_divided_sizes_and_other_ops_always():
    mode, x = _dynamic((8, 6))
    with mode:
        half = x[: x.shape[0] // 2]                  # a view (slice) to a size with //
        FakeTensorMode.cache_clear()
        for _ in range(4):                           # recurring, and still not cached
            half.view(-1)
            half.t()
    assert FakeTensorMode.cache_info().hits == 0 and FakeTensorMode.cache_info().misses == 0
    with mode:
        x.view(-1)                                   # plain sizes: once it recurs, the cache pays
        x.view(-1)
        assert FakeTensorMode.cache_info().hits == 0 and FakeTensorMode.cache_info().misses == 0
        x.view(-1)                                   # the third sighting fills the entry...
        before = FakeTensorMode.cache_info()
        assert before.misses > 0
        x.view(-1)                                   # ...that the later ones hit
        assert FakeTensorMode.cache_info().hits == before.hits + 1
        assert FakeTensorMode.cache_info().misses == before.misses
        x + 1                                        # other ops: from the first call
        x + 1
    assert FakeTensorMode.cache_info().hits == before.hits + 2


def test_views_keep_torch_fake_metadata():
    engine_mode, ex = _symbolic(EngineFakeTensorMode, (4, 6))
    torch_mode, tx = _symbolic(FakeTensorMode, (4, 6))
    with engine_mode:
        ours = [_views(ex) for _ in range(4)]        # around the cache, then through it
    with torch_mode:
        theirs = _views(tx)
    for a, b in zip([v for views in ours for v in views], theirs * 4):
        assert str(a.shape) == str(b.shape) and str(a.stride()) == str(b.stride())
        assert str(a.storage_offset()) == str(b.storage_offset())


def test_views_over_divided_sizes_keep_torch_fake_metadata():
    engine_mode, ex = _dynamic((8, 6))
    torch_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    tx = torch_mode.from_tensor(torch.randn(8, 6), symbolic_context=StatelessSymbolicContext(
        dynamic_sizes=[DimDynamic.DYNAMIC] * 2))
    with engine_mode:
        ours = _views(ex[: ex.shape[0] // 2])
    with torch_mode:
        theirs = _views(tx[: tx.shape[0] // 2])
    for a, b in zip(ours, theirs):
        assert str(a.shape) == str(b.shape) and str(a.stride()) == str(b.stride())
        assert str(a.storage_offset()) == str(b.storage_offset())


def test_a_nested_int_size_has_no_division_to_look_for():
    """Jagged tensors' ragged sizes are SymInts without a sympy expression: a view of one goes through
    the cache as torch would send it, rather than failing on the missing expression."""
    ragged = torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)], layout=torch.jagged)
    mode, x = _dynamic((8, 6))
    assert not mode._divides((ragged.shape[1], [ragged.shape[1], 4]))
    assert mode._divides(([x.shape[0] // 2],))
