"""The cached ``SymNode.expr`` read while the engine traces gives what torch's own getter gives."""
import inspect

import sympy
import torch
from torch._dynamo.source import ConstantSource

from shapeproof.tracer.patching import engine_thread
from shapeproof.tracer.sym_expr_cache import cached_sym_exprs
from shapeproof.tracer.torch_internals import SymNode, TorchShapeEnv


def _sizes(env, *hints):
    symbols = [env.create_symbol(h, ConstantSource(f"size{i}")) for i, h in enumerate(hints)]
    return [env.create_symintnode(s, hint=h) for s, h in zip(symbols, hints)], symbols


def _exprs(nodes):
    return [n.node.expr for n in nodes]


def test_cached_reads_match_torch_before_and_after_replacements():
    env = TorchShapeEnv()
    (a, b), (sa, sb) = _sizes(env, 6, 3)
    nodes = [a, b, a * b + 3, a // 2, (a + b) * 4, a - a + 5]
    torch_reads = _exprs(nodes)
    with engine_thread(), cached_sym_exprs():
        assert _exprs(nodes) == torch_reads                   # version 0: the unreplaced expressions
    env._set_replacement(sa, 2 * sb, "test")
    assert env._replacements_version_counter > 0
    with engine_thread(), cached_sym_exprs():
        cached = _exprs(nodes)                                # first read: torch's getter fills the caches
        assert _exprs(nodes) == cached                        # second read: straight from the caches
    torch_reads = _exprs(nodes)
    assert cached == torch_reads
    assert torch_reads[2] == 2 * sb ** 2 + 3                  # the replacement is really applied


def test_a_stale_cache_is_not_served_after_a_new_replacement():
    env = TorchShapeEnv()
    (a, b, c), (sa, sb, sc) = _sizes(env, 6, 3, 5)
    node = a * b
    env._set_replacement(sa, 2 * sb, "test")
    with engine_thread(), cached_sym_exprs():
        assert node.node.expr == 2 * sb ** 2
        env._set_replacement(sb, sc - 2, "test")
        assert sympy.expand(node.node.expr - 2 * (sc - 2) ** 2) == 0


def test_numbers_and_plain_symbols_read_as_torch_reads_them():
    env = TorchShapeEnv()
    (a,), (sa,) = _sizes(env, 4)
    constant = SymNode(sympy.Integer(7), env, int, 7)
    with engine_thread(), cached_sym_exprs():
        assert constant.expr == 7 and a.node.expr == sa


def test_the_patch_is_reentrant_and_restores_torch_getter():
    original = SymNode.__dict__["expr"]
    with engine_thread(), cached_sym_exprs():
        with engine_thread(), cached_sym_exprs():
            assert SymNode.__dict__["expr"] is not original
        assert SymNode.__dict__["expr"] is not original
    assert SymNode.__dict__["expr"] is original


def test_torch_getter_still_fills_the_cache_only_past_its_number_test():
    """The fast path is exact only while torch's getter caches nothing for numbers and keys by version."""
    source = inspect.getsource(SymNode.__dict__["expr"].fget)
    assert source.index("is_number") < source.index("_expr_cache = result")
    for line in ("if ver == 0:", "ver == self._expr_ver", "self._expr_ver = ver"):
        assert line in source, line


def test_exports_agree_with_and_without_the_fast_path():
    class Halves(torch.nn.Module):
        def forward(self, x):
            return x.reshape(2, -1, x.shape[1] // 2).sum(-1)

    x = torch.randn(4, 6)
    dims = {"x": {0: torch.export.Dim("b", min=2, max=64) * 2, 1: torch.export.Dim("c", min=1, max=32) * 2}}
    plain = torch.export.export(Halves(), (x,), dynamic_shapes=dims)
    with engine_thread(), cached_sym_exprs():
        fast = torch.export.export(Halves(), (x,), dynamic_shapes=dims)
    assert str(fast.graph) == str(plain.graph)
    assert fast.range_constraints == plain.range_constraints
