"""shapeproof's own benchmark set of real models, as a registry of export cases.

Each case: ``name``, ``group`` ("speech", "vision" or "llm"), ``pattern`` (the
shape pattern the model exercises), ``note`` (model, config and the outcome of
``torch.export.export(..., strict=False)`` under torch 2.13) and a constructor
``build() -> (module.eval(), args_tuple, dynamic_shapes)``.  Every dynamic dim
is a ``torch.export.Dim`` with an explicit ``min``/``max`` chosen the way a
user of that model would write them; example inputs lie strictly inside the
ranges (no size 0 or 1 on a dynamic dim).

Optional per-case ``alt_dims``: list of ``{dim_name: value}`` for extra inputs
(checking an exported program against eager); if absent the runner picks them.

The models are ``transformers`` models built from tiny configs with random
weights (``torch.manual_seed(0)`` first, nothing downloaded), wrapped in a
small ``nn.Module`` that returns one tensor (the last hidden state).

The file is self-contained (it imports only torch and transformers), so
``python -m bench.case_runner --registry bench/models.py`` loads it by path.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import transformers as tf
from torch import nn
from torch.export import Dim


@dataclass
class Case:
    name: str
    group: str
    pattern: str
    note: str
    build: Callable[[], tuple]
    alt_dims: list | None = None


CASES: dict[str, Case] = {}


def register(name, group, pattern, note, alt_dims=None):
    def deco(fn):
        assert name not in CASES, name
        CASES[name] = Case(name, group, pattern, note, fn, alt_dims)
        return fn
    return deco


# ============================================================================ helpers

def _prepare(model: nn.Module) -> nn.Module:
    """eval mode, no KV cache."""
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "use_cache", None):
        cfg.use_cache = False
    return model.eval()


def _hidden(out) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if getattr(out, "last_hidden_state", None) is not None:
        return out.last_hidden_state
    return out[0]


class OneInput(nn.Module):
    """``model(**{key: x}, **kw)`` -> last hidden state."""

    def __init__(self, model, key, **kw):
        super().__init__()
        self.model, self.key, self.kw = model, key, kw

    def forward(self, x):
        return _hidden(self.model(**{self.key: x}, **self.kw))


class WithMask(nn.Module):
    """``model(**{key: x}, attention_mask=mask, **kw)`` -> last hidden state."""

    def __init__(self, model, key, **kw):
        super().__init__()
        self.model, self.key, self.kw = model, key, kw

    def forward(self, x, attention_mask):
        return _hidden(self.model(**{self.key: x}, attention_mask=attention_mask, **self.kw))


def _padded_mask(b: int, n: int) -> torch.Tensor:
    """All ones except the tail of the last row (a right-padded batch)."""
    mask = torch.ones(b, n, dtype=torch.long)
    mask[-1, n - n // 3:] = 0
    return mask


def _token_ids(b: int, s: int, vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(4, vocab, (b, s), generator=g)


# ============================================================================ speech
# Raw 16 kHz audio (B, L) for the wav2vec2 family and Moonshine; log-mel
# features (B, T, F) for Speech2Text.  Ranges: 0.1 s .. 10-20 s of audio.

_W2V_SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
              "conv_dim": (16,) * 7, "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4}


def _audio(b=2, n=24000):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, n, generator=g)


@register("wav2vec2_ln_mask", "speech",
          "conv feature encoder (k 10,3,3,3,3,2,2 / s 5,2,2,2,2,2,2) + attention_mask -> frame lengths",
          "Wav2Vec2Model large-lv60 style (feat_extract_norm=layer, stable layer norm), raw audio + "
          "attention_mask; B in [1,8], L in [1600,160000] samples. torch.export 2.13: exports")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.Wav2Vec2Model(tf.Wav2Vec2Config(
        **_W2V_SMALL, conv_kernel=(10, 3, 3, 3, 3, 2, 2), feat_extract_norm="layer",
        do_stable_layer_norm=True)))
    x = _audio()
    B, L = Dim("B", min=1, max=8), Dim("L", min=1600, max=160000)
    return WithMask(model, "input_values").eval(), (x, _padded_mask(*x.shape)), ({0: B, 1: L}, {0: B, 1: L})


@register("hubert", "speech", "conv feature encoder (group norm) + conv positional embedding (even kernel)",
          "HubertModel base style, raw audio; B in [1,8], L in [1600,160000]. torch.export 2.13: exports")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.HubertModel(tf.HubertConfig(**_W2V_SMALL)))
    return (OneInput(model, "input_values").eval(), (_audio(),),
            ({0: Dim("B", min=1, max=8), 1: Dim("L", min=1600, max=160000)},))


@register("wavlm", "speech", "conv feature encoder + gated relative position bias (log buckets over T x T)",
          "WavLMModel, raw audio; B in [1,8], L in [1600,160000]. torch.export 2.13: exports")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.WavLMModel(tf.WavLMConfig(**_W2V_SMALL, num_buckets=64, max_bucket_distance=200)))
    return (OneInput(model, "input_values").eval(), (_audio(),),
            ({0: Dim("B", min=1, max=8), 1: Dim("L", min=1600, max=160000)},))


@register("w2v2_conformer_rotary", "speech", "conv feature encoder + conformer blocks with rotary embeddings",
          "Wav2Vec2ConformerModel position_embeddings_type=rotary, depthwise conv k15; B in [1,8], "
          "L in [1600,160000]. torch.export 2.13: fails (constraint violation on L: guard (32 % (32 + "
          "32*((-1 + ((-3 + (L // 80)) // 2)) // 2))) != 0)")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.Wav2Vec2ConformerModel(tf.Wav2Vec2ConformerConfig(
        **_W2V_SMALL, position_embeddings_type="rotary", conv_depthwise_kernel_size=15)))
    return (OneInput(model, "input_values").eval(), (_audio(),),
            ({0: Dim("B", min=1, max=8), 1: Dim("L", min=1600, max=160000)},))


@register("moonshine_encoder_mask", "speech",
          "conv1d k127 s64 / k7 s3 / k3 s2 + mask[..., ::384][..., :frames] + rotary",
          "MoonshineEncoder, raw audio + attention_mask (strided slice of the mask to the frame count); "
          "B in [1,8], L in [1600,320000]. torch.export 2.13: fails (constraint violations on L and "
          "specialization L = 24000: float math int((L - 127) / 64 + 1) for the mask's frame count)")
def _b():
    torch.manual_seed(0)
    cfg = tf.MoonshineConfig(vocab_size=256, hidden_size=32, intermediate_size=64,
                             encoder_num_hidden_layers=2, decoder_num_hidden_layers=1,
                             encoder_num_attention_heads=2, decoder_num_attention_heads=2,
                             max_position_embeddings=1024)
    model = _prepare(tf.MoonshineModel(cfg).get_encoder())
    x = _audio()
    B, L = Dim("B", min=1, max=8), Dim("L", min=1600, max=320000)
    return WithMask(model, "input_values").eval(), (x, _padded_mask(*x.shape)), ({0: B, 1: L}, {0: B, 1: L})


@register("speech2text_encoder", "speech", "Conv1dSubsampler (2 x conv1d k3 s2 + GLU) + sinusoidal positions",
          "Speech2TextEncoder on 40-dim fbank features (B, T, 40), no mask; B in [1,8], "
          "T in [20,6000] frames (0.2 s .. 60 s at 10 ms). torch.export 2.13: exports")
def _b():
    torch.manual_seed(0)
    cfg = tf.Speech2TextConfig(vocab_size=256, d_model=48, encoder_layers=2, encoder_attention_heads=4,
                               encoder_ffn_dim=96, decoder_layers=1, decoder_attention_heads=4,
                               decoder_ffn_dim=96, input_feat_per_channel=40, num_conv_layers=2,
                               conv_channels=32, conv_kernel_sizes=(3, 3), max_source_positions=3000)
    model = _prepare(tf.Speech2TextModel(cfg).get_encoder())
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 300, 40, generator=g)
    return (OneInput(model, "input_features").eval(), (x,),
            ({0: Dim("B", min=1, max=8), 1: Dim("T", min=20, max=6000)},))


class Latents(nn.Module):
    """``model(x).latents``: an audio codec's encoder output before quantization (a float tensor)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).latents


@register("mimi_encoder", "speech",
          "causal SEANet convs (k7; strides 4,5,6,8 then 2) whose padding is tensor arithmetic on the length "
          "(_get_extra_padding_for_conv1d: ceil on a float32 tensor), + transformer",
          "MimiModel(...).encoder (MimiEncoderModel, 24 kHz, 12.5 Hz frames), raw audio (B, 1, L), returns "
          "latents; B in [1,8], L in [3840,96000] (2..50 frames; a single frame makes conv1d branch on "
          "size 1). torch.export 2.13: fails (data-dependent: the padding passes through a tensor, so each "
          "pad amount is a fresh unbacked symbol)")
def _b():
    torch.manual_seed(0)
    cfg = tf.MimiConfig(hidden_size=32, num_filters=8, num_residual_layers=1, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        codebook_size=64, codebook_dim=32, num_quantizers=2, num_semantic_quantizers=1,
                        max_position_embeddings=1024, sliding_window=64, upsample_groups=32)
    model = _prepare(tf.MimiModel(cfg).encoder)
    x = _audio(2, 24000).unsqueeze(1)
    return Latents(model).eval(), (x,), ({0: Dim("B", min=1, max=8), 2: Dim("L", min=3840, max=96000)},)


# ============================================================================ vision
# Pixel values (B, 3, H, W) with independent dynamic H and W.

def _image(b=2, h=160, w=192):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, 3, h, w, generator=g)


def _vision_spec(lo, hi):
    return ({0: Dim("B", min=1, max=8), 2: Dim("H", min=lo, max=hi), 3: Dim("W", min=lo, max=hi)},)


@register("vit_interp_pos", "vision",
          "patch16 embed (stride=kernel) + bicubic pos-embed interpolation to (H/16, W/16)",
          "ViTModel(interpolate_pos_encoding=True), image_size 224, patch 16; B in [1,8], H,W in [32,448]. "
          "torch.export 2.13: exports (keeps the input check (H // 16)*(W // 16) != 196 from the "
          "num_patches == num_positions and height == width branch)")
def _b():
    torch.manual_seed(0)
    cfg = tf.ViTConfig(image_size=224, patch_size=16, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64)
    model = _prepare(tf.ViTModel(cfg, add_pooling_layer=False))
    wrapped = OneInput(model, "pixel_values", interpolate_pos_encoding=True).eval()
    return wrapped, (_image(),), _vision_spec(32, 448)


@register("convnextv2", "vision", "stem conv k4 s4, downsample conv k2 s2 x3, GRN (norm over H,W)",
          "ConvNextV2Model, hidden 16/24/32/48; B in [1,8], H,W in [32,512]. torch.export 2.13: fails "
          "(constraint violation: suggests H, W min=64; at 32 px the last stage is 1x1)")
def _b():
    torch.manual_seed(0)
    cfg = tf.ConvNextV2Config(hidden_sizes=[16, 24, 32, 48], depths=[1, 1, 1, 1])
    model = _prepare(tf.ConvNextV2Model(cfg))
    return OneInput(model, "pixel_values").eval(), (_image(),), _vision_spec(32, 512)


@register("resnet_bottleneck", "vision",
          "conv7 s2 + maxpool s2 + strided bottleneck blocks with projection shortcuts",
          "ResNetModel layer_type=bottleneck, downsample_in_bottleneck; B in [1,8], H,W in [32,512]. "
          "torch.export 2.13: fails (constraint violation on H and W: (1 + (H - 1) // 32) != 1, the last "
          "map must not be 1x1)")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.ResNetModel(tf.ResNetConfig(embedding_size=16, hidden_sizes=[32, 48, 64, 64],
                                                    depths=[1, 1, 1, 1], layer_type="bottleneck",
                                                    downsample_in_bottleneck=True)))
    return OneInput(model, "pixel_values").eval(), (_image(),), _vision_spec(32, 512)


@register("swin_window7", "vision", "patch4 embed (pad if H%4), window 7 partition (pad to multiple of 7), "
          "shifted windows, patch merging (pad if odd)",
          "SwinModel image_size 224, patch 4, window 7, depths [2,2]; B in [1,8], H,W in [64,448] (at 56 px "
          "or less the last stage is no larger than the window and Swin shrinks its window, which breaks "
          "eager too). "
          "torch.export 2.13: fails (constraint violations: H % 4 == 0, W % 4 == 0 and the window-padding "
          "branches on H, W)")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.SwinModel(tf.SwinConfig(image_size=224, patch_size=4, embed_dim=16, depths=[2, 2],
                                                num_heads=[2, 4], window_size=7), add_pooling_layer=False))
    return OneInput(model, "pixel_values").eval(), (_image(),), _vision_spec(64, 448)


@register("segformer", "vision", "overlapping patch embed (k7 s4 p3, k3 s2 p1) + spatial-reduction attention "
          "(conv k=s=sr on the (H', W') map) + reshape back to (B, C, H', W')",
          "SegformerModel, 2 stages hidden 16/32, sr_ratios 4/2; B in [1,8], H,W in [32,512]. "
          "torch.export 2.13: exports")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.SegformerModel(tf.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32], patch_sizes=[7, 3],
        strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2])))
    return OneInput(model, "pixel_values").eval(), (_image(),), _vision_spec(32, 512)


@register("mobilevit", "vision", "MobileViT unfolding: new_h = ceil(h / 2) * 2 via math.ceil on a float, "
          "interpolate if not a multiple of the patch, reshape into (B*4, N, C) patches",
          "MobileViTModel xx-small style (output stride 32); B in [1,8], H,W in [64,512]. "
          "torch.export 2.13: fails (constraint violations that pin H, W to the example: int(math.ceil(h / "
          "2) * 2) and `if new_width != orig_width or new_height != orig_height` in unfolding)")
def _b():
    torch.manual_seed(0)
    model = _prepare(tf.MobileViTModel(tf.MobileViTConfig(
        hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32, 40, 48, 96], num_attention_heads=2,
        expand_ratio=2.0), expand_output=True))
    return OneInput(model, "pixel_values").eval(), (_image(),), _vision_spec(64, 512)


# ============================================================================ llm
# Token ids (B, S), with a right-padded attention_mask where the model takes one.

def _text(name, pattern, note, build_model, vocab, smax, with_mask):
    def b():
        torch.manual_seed(0)
        model = _prepare(build_model())
        ids = _token_ids(2, 24, vocab)
        B, S = Dim("B", min=1, max=8), Dim("S", min=2, max=smax)
        if with_mask:
            mask = _padded_mask(2, 24)
            return WithMask(model, "input_ids").eval(), (ids, mask), ({0: B, 1: S}, {0: B, 1: S})
        return OneInput(model, "input_ids").eval(), (ids,), ({0: B, 1: S},)
    register(name, "llm", pattern, note)(b)


_text("llama_mask", "causal + padding mask, GQA, RoPE",
      "LlamaModel 2 layers, hidden 64, 4 heads / 2 kv heads, input_ids + attention_mask; B in [1,8], "
      "S in [2,2048] (= max_position_embeddings). torch.export 2.13: exports",
      lambda: tf.LlamaModel(tf.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                           max_position_embeddings=2048)),
      vocab=512, smax=2048, with_mask=True)

_text("gpt2_ids", "causal, learned absolute positions wpe[:S]",
      "GPT2Model 2 layers, n_embd 48, n_positions 1024, input_ids only; B in [1,8], S in [2,1024]. "
      "torch.export 2.13: exports",
      lambda: tf.GPT2Model(tf.GPT2Config(vocab_size=512, n_embd=48, n_layer=2, n_head=4, n_positions=1024)),
      vocab=512, smax=1024, with_mask=False)

_text("qwen2_mask", "causal + padding mask, GQA (4 q / 1 kv), RoPE, qkv bias",
      "Qwen2Model 2 layers, hidden 64, input_ids + attention_mask; B in [1,8], S in [2,1024]. "
      "torch.export 2.13: exports",
      lambda: tf.Qwen2Model(tf.Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128,
                                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                           max_position_embeddings=1024)),
      vocab=512, smax=1024, with_mask=True)

_text("bert_mask", "bidirectional + padding mask, absolute positions and token_type buffer sliced [:S]",
      "BertModel 2 layers, hidden 32, input_ids + attention_mask; B in [1,8], S in [2,512] "
      "(= max_position_embeddings). torch.export 2.13: exports",
      lambda: tf.BertModel(tf.BertConfig(vocab_size=512, hidden_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=64,
                                         max_position_embeddings=512), add_pooling_layer=False),
      vocab=512, smax=512, with_mask=True)

_text("t5_encoder_mask", "relative position buckets (log-spaced, bidirectional) over S x S + padding mask",
      "T5EncoderModel 2 layers, d_model 32, 32 buckets / max distance 128, input_ids + attention_mask; "
      "B in [1,8], S in [2,1024]. torch.export 2.13: exports",
      lambda: tf.T5EncoderModel(tf.T5Config(vocab_size=512, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                            num_heads=4, relative_attention_num_buckets=32,
                                            relative_attention_max_distance=128)),
      vocab=512, smax=1024, with_mask=True)
