"""Who answers a static question first changes the time a trace takes, never what it records.

The tracer asks the engine before torch's own value-range reasoning when the
expression is large (nested ``//`` and ``%``, where torch is slow and seldom
decides).  Both are sound, so the exported program, its guards and its
input checks must be those of the torch-first order; and a proof the engine
made before torch was asked must not be counted as one torch could not make.
"""
from __future__ import annotations

import shapeproof
import torch
from shapeproof.tracer import engine_env
from test_pad_merge import TwoStages          # pad branches at three stages: large nested // and % terms
from torch.export import Dim

__shapeproof_user_code__ = True


def _export(monkeypatch, torch_first_nodes: int):
    monkeypatch.setattr(engine_env, "_TORCH_FIRST_NODES", torch_first_nodes)
    torch.manual_seed(0)
    model = TwoStages().eval()
    result = shapeproof.export_with_report(model, (torch.randn(2, 8, 12, 4),),
                                           dynamic_shapes=({1: Dim("H", min=4, max=40)},))
    return model, result


def test_engine_first_on_large_terms_records_what_torch_first_records(monkeypatch):
    model, default = _export(monkeypatch, engine_env._TORCH_FIRST_NODES)
    _, torch_first = _export(monkeypatch, 10 ** 9)
    assert any(q.asked_before_torch for q in default.engine.queries), "the model has no large term"
    assert not any(q.asked_before_torch for q in torch_first.engine.queries)
    assert default.program.graph_module.code == torch_first.program.graph_module.code
    assert str(default.program.range_constraints) == str(torch_first.program.range_constraints)
    def guards(result):
        return [str(g.condition) for g in result.engine.guards]

    def regions(result):        # None: the first trace served the whole range
        return None if result.regions is None else [str(r.predicate) for r in result.regions.regions]

    assert guards(default) == guards(torch_first) and regions(default) == regions(torch_first)
    for h in (4, 7, 21, 40):
        x = torch.randn(2, h, 12, 4)
        torch.testing.assert_close(default.program.module()(x), model(x))


def test_proofs_made_before_torch_was_asked_are_not_counted_as_discharged(monkeypatch):
    _, result = _export(monkeypatch, engine_env._TORCH_FIRST_NODES)
    early = [q for q in result.engine.queries if q.asked_before_torch and q.status == "proven"]
    assert early, "the model has no large term the engine proved first"
    assert not any(q.asked_before_torch for q in result.discharged)
    assert len(result.discharged) == sum(q.status == "proven" for q in result.engine.queries) - len(early)
