"""Models whose forward loops in Python over the sequence (issue 42): the issue's idiom and real ones.

Each ``LoopModel`` is built from a small config with random weights (nothing is downloaded) and
takes its input at a length ``S``; ``loop`` names the loop as (function, start of the ``for`` line)
so that ``loop_site`` finds its file and line in the installed library: the report names the
source the engine reads, not a copy that may drift.  Batch is fixed at 2: the question is the
length.
"""
from __future__ import annotations

import importlib.util
import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

BATCH = 2


@dataclass
class LoopModel:
    name: str
    idiom: str
    model_class: str
    build: Callable[[], nn.Module]                # eval(), random weights
    inputs: Callable[[int], tuple]                # the arguments at length S
    loop: tuple[Callable, str]                    # (function, start of the ``for`` line) in its source
    dim: tuple[int, int] = (0, 1)                 # (argument, dim) that is the length

    def spec(self, lo: int, hi: int):
        from torch.export import Dim

        spec: list = [None] * len(self.inputs(2))
        spec[self.dim[0]] = {self.dim[1]: Dim("S", min=lo, max=hi)}
        return tuple(spec)


def loop_line(m: LoopModel) -> tuple[str, int]:
    """The file and line of the model's loop in the installed source."""
    function, start = m.loop
    function = inspect.unwrap(function)             # a library's decorator (a kernel from the hub, if any)
    if isinstance(function, nn.Module):     # a function the ``kernels`` library holds as a module
        forward = type(function).forward    # (transformers 5.2x): its forward calls the function it holds
        cells = dict(zip(forward.__code__.co_freevars, forward.__closure__ or ()))
        function = inspect.unwrap(cells["func"].cell_contents) if "func" in cells else forward
    lines, first = inspect.getsourcelines(function)
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(start))
    return inspect.getsourcefile(function) or "", first + at


# ---------------------------------------------------------------------------- the idiom

class Scan(nn.Module):
    """The issue's example: a state carried, each step's state appended and stacked."""

    def __init__(self, d: int = 8, hidden: int = 16):
        super().__init__()
        self.d = hidden
        self.a, self.b = nn.Linear(d, hidden), nn.Linear(hidden, hidden)

    def forward(self, x):                      # x: (B, S, D)
        h = x.new_zeros(x.size(0), self.d)
        outs = []
        for t in range(x.size(1)):
            h = torch.tanh(self.a(x[:, t]) + self.b(h))
            outs.append(h)
        return torch.stack(outs, dim=1)


class CharLSTM(nn.Module):
    """A character model on ``nn.LSTMCell``: embedding, a cell stepped over the sequence carrying (h, c),
    a head on every step's state."""

    def __init__(self, vocab: int = 64, hidden: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.LSTMCell(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):                    # ids: (B, S)
        x = self.embed(ids)
        h = c = x.new_zeros(x.size(0), self.cell.hidden_size)
        logits = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c))
            logits.append(self.head(h))
        return torch.stack(logits, 1)


def _features(s: int) -> tuple:
    return (torch.randn(BATCH, s, 8),)


def _ids(s: int) -> tuple:
    return (torch.randint(0, 64, (BATCH, s)),)


# ---------------------------------------------------------------------------- transformers

class LastHidden(nn.Module):
    """A transformers model called on ids without a cache, its last hidden state returned."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).last_hidden_state


def _mamba() -> nn.Module:
    from transformers import MambaConfig, MambaModel

    torch.manual_seed(0)
    config = MambaConfig(vocab_size=64, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
                         conv_kernel=4, use_cache=False)
    return LastHidden(MambaModel(config)).eval()


def _rwkv() -> nn.Module:
    from transformers import RwkvConfig, RwkvModel

    torch.manual_seed(0)
    config = RwkvConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                        intermediate_size=64, context_length=1024, use_cache=False)
    return LastHidden(RwkvModel(config)).eval()


def all_models() -> list[LoopModel]:
    def seeded(cls):
        def build():
            torch.manual_seed(0)
            return cls().eval()
        return build

    models = [
        LoopModel("scan", "state carried, appended, stacked", "Scan (the issue's)", seeded(Scan), _features,
                  (Scan.forward, "for t in range(x.size(1))")),
        LoopModel("char-lstm", "two carried (h, c), appended, stacked", "nn.LSTMCell", seeded(CharLSTM),
                  _ids, (CharLSTM.forward, "for t in range(x.size(1))")),
    ]
    if importlib.util.find_spec("transformers") is not None:
        from transformers.models.mamba import modeling_mamba
        from transformers.models.rwkv import modeling_rwkv

        models += [
            LoopModel("mamba", "selective scan, CPU path: reads at t, appended, stacked", "MambaModel",
                      _mamba, _ids, (modeling_mamba.mamba_selective_scan, "for index in range(seq_len)")),
            LoopModel("rwkv", "WKV, CPU path: three carried, writes output[:, t]", "RwkvModel", _rwkv, _ids,
                      (modeling_rwkv.rwkv_linear_attention_cpu, "for current_index in range(seq_length)")),
        ]
    return models
