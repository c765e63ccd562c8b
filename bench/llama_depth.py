"""Llama at 1, 4, 16 and 32 layers: does an export's cost grow with depth like torch.export's?

A registry in the format of ``bench/models.py`` (``CASES[name].build()``),
for ``python -m bench.speed --registry bench/llama_depth.py``.  Tiny layers
(hidden 64, GQA 4/2, RoPE), random weights, nothing downloaded; token ids
and a right-padded attention mask with ``B in [1, 8]``, ``S in [2, 2048]``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import transformers as tf
from torch import nn
from torch.export import Dim

DEPTHS = (1, 4, 16, 32)


@dataclass
class Case:
    name: str
    group: str
    pattern: str
    note: str
    build: Callable[[], tuple]
    alt_dims: list | None = None


class _WithMask(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _build(layers: int) -> tuple:
    torch.manual_seed(0)
    config = tf.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                            use_cache=False)
    model = _WithMask(tf.LlamaModel(config)).eval()
    ids = torch.randint(0, 512, (2, 24))
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, 18:] = 0
    b, s = Dim("B", min=1, max=8), Dim("S", min=2, max=2048)
    return model, (ids, mask), ({0: b, 1: s}, {0: b, 1: s})


CASES: dict[str, Case] = {
    f"llama_{n}_layers": Case(f"llama_{n}_layers", "llm", "causal + padding mask, GQA, RoPE",
                              f"LlamaModel {n} layer(s), hidden 64", lambda n=n: _build(n))
    for n in DEPTHS
}
