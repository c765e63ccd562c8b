"""An engine trace's fake mode dispatches view ops around torch's fake-tensor cache, other ops through it."""
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from shapeproof.tracer.fake_mode import EngineFakeTensorMode
from shapeproof.tracer.torch_internals import FakeTensorMode


def _symbolic(mode_class, shape):
    mode = mode_class(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    return mode, mode.from_tensor(torch.randn(*shape))


def _views(x):
    return [x.view(-1), x.t(), x.unsqueeze(0).expand(3, *x.shape), x[:, 1:], x.reshape(x.shape[1], -1)]


def test_views_skip_the_cache_and_other_ops_use_it():
    mode, x = _symbolic(EngineFakeTensorMode, (4, 6))
    FakeTensorMode.cache_clear()
    with mode:
        _views(x)
        _views(x)
    assert FakeTensorMode.cache_info().hits == 0 and FakeTensorMode.cache_info().misses == 0
    with mode:
        x + 1
        x + 1
    assert FakeTensorMode.cache_info().hits == 1 and FakeTensorMode.cache_info().misses == 1


def test_views_keep_torch_fake_metadata():
    engine_mode, ex = _symbolic(EngineFakeTensorMode, (4, 6))
    torch_mode, tx = _symbolic(FakeTensorMode, (4, 6))
    with engine_mode:
        ours = _views(ex)
    with torch_mode:
        theirs = _views(tx)
    for a, b in zip(ours, theirs):
        assert str(a.shape) == str(b.shape) and str(a.stride()) == str(b.stride())
        assert str(a.storage_offset()) == str(b.storage_offset())
