"""A bundled model with difficult dynamic shapes: the main job exports it.

``AudioEncoder`` is a speech front-end in the style of Conformer/FastConformer
encoders: a 4x strided-conv subsampler (T' = ((T - 1)//2 - 1)//2) with a
reshape(b, t, -1), frame stacking after padding to a multiple of 2
(pad = (-T') % 2, then reshape(b, t//2, 2*d)), and relative-position attention
with the Transformer-XL/NeMo ``rel_shift`` (pad + view(b, h, -1, T'') + slice).
torch.export 2.13 cannot prove the ``//`` and ``%`` guards these produce (it
fails inside its own fix suggester); shapeproof proves all of them.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Frames in this file are the user's model code: explanations point at them.
__shapeproof_user_code__ = True

__all__ = ["AudioEncoder", "example"]


class ConvSubsampling(nn.Module):
    def __init__(self, n_mels: int, d: int, channels: int = 16):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, channels, 3, stride=2), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, stride=2), nn.ReLU())
        freq = ((n_mels - 1) // 2 - 1) // 2
        self.out = nn.Linear(channels * freq, d)

    def forward(self, x):                      # (B, T, n_mels)
        x = self.conv(x.unsqueeze(1))          # (B, C, T', F')
        b, c, t, f = x.shape
        return self.out(x.transpose(1, 2).reshape(b, t, -1))


class FrameStacking(nn.Module):
    """Stack ``n`` consecutive frames (frame-rate reduction); the sequence is padded to a multiple of
    ``n``."""

    def __init__(self, d: int, n: int):
        super().__init__()
        self.n = n
        self.proj = nn.Linear(n * d, d)

    def forward(self, x):                      # (B, T, D) -> (B, ceil(T / n), D)
        pad = (-x.shape[1]) % self.n
        x = F.pad(x, (0, 0, 0, pad))
        b, t, d = x.shape
        return self.proj(x.reshape(b, t // self.n, self.n * d))


class RelPositionAttention(nn.Module):
    """Multi-head attention with relative positions and the NeMo ``rel_shift`` (positions 2T-1)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.dk, self.d = heads, d // heads, d
        self.qkv = nn.Linear(d, 3 * d)
        self.pos = nn.Linear(d, d, bias=False)
        self.bias_u = nn.Parameter(torch.zeros(heads, self.dk))
        self.bias_v = nn.Parameter(torch.zeros(heads, self.dk))
        self.out = nn.Linear(d, d)

    def positions(self, t: int, device) -> torch.Tensor:
        rel = torch.arange(t - 1, -t, -1, device=device, dtype=torch.float32)      # T-1 ... -(T-1)
        inv = torch.exp(torch.arange(0, self.d, 2, device=device, dtype=torch.float32)
                        * (-math.log(1e4) / self.d))
        ang = rel[:, None] * inv[None]
        return torch.cat([ang.sin(), ang.cos()], dim=-1)                           # (2T-1, D)

    @staticmethod
    def rel_shift(x):
        b, h, t, p = x.shape
        x = F.pad(x, (1, 0)).view(b, h, -1, t)
        return x[:, :, 1:].view(b, h, t, p)

    def forward(self, x):                      # (B, T, D)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, self.dk).unbind(2)
        # (h, 2T-1, dk)
        p = self.pos(self.positions(t, x.device)).view(-1, self.heads, self.dk).transpose(0, 1)
        ac = (q + self.bias_u).transpose(1, 2) @ k.permute(0, 2, 3, 1)                        # (B, h, T, T)
        bd = self.rel_shift((q + self.bias_v).transpose(1, 2) @ p.transpose(-1, -2))[..., :t]
        att = torch.softmax((ac + bd) / math.sqrt(self.dk), dim=-1)
        return self.out((att @ v.transpose(1, 2)).transpose(1, 2).reshape(b, t, d))


class AudioEncoder(nn.Module):
    def __init__(self, n_mels: int = 80, d: int = 64, heads: int = 4, stack: int = 2):
        super().__init__()
        self.subsample = ConvSubsampling(n_mels, d)
        self.stack = FrameStacking(d, stack)
        self.relpos = RelPositionAttention(d, heads)
        self.norm = nn.LayerNorm(d)

    def forward(self, features):              # (B, T, n_mels) log-mel frames
        x = self.stack(self.subsample(features))
        x = x + self.relpos(x)
        return self.norm(x)


def example(seed: int = 0):
    """(model, args, dynamic_shapes) for the main job: B in [1, 8], T in [16, 3000] frames."""
    from torch.export import Dim

    torch.manual_seed(seed)
    model = AudioEncoder().eval()
    features = torch.randn(2, 201, 80)
    return model, (features,), ({0: Dim("B", min=1, max=8), 1: Dim("T", min=16, max=3000)},)
