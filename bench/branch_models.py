"""Real library models whose code branches on sizes where both sides agree up to size arithmetic (issue 39).

Each ``IdiomModel`` is a transformers (or timm) class built from a small config with random
weights (nothing is downloaded), its declared range per dynamic dim, a sweep of sizes on both
sides of every branch (both ends of every range included), and the branches themselves as
(function, text of the ``if``): ``branch_sites`` finds their file and line in the installed
library, so the report names the source the engine must read, not a copy that may drift.

The roots of the dims are named; a size is ``mult * root`` (a derived dim when ``mult > 1``).
Batch is fixed at 2 everywhere: the idioms are about spatial and sequence sizes, and a
dynamic batch adds torch's 0/1 specialization of B, a different question.
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

BATCH = 2


@dataclass(frozen=True)
class Size:
    """Input ``arg``'s dim ``dim`` is ``mult * root``."""

    arg: int
    dim: int
    root: str
    mult: int = 1


@dataclass
class IdiomModel:
    name: str
    idiom: str                           # "1 pad", "2 resize", "3 square grid", "4 reaches 1", "corner"
    model_class: str
    build: Callable[[], nn.Module]                # eval(), random weights
    inputs: Callable[[dict], tuple]               # the arguments at a point {root: value}
    sizes: list[Size]
    ranges: dict[str, tuple[int, int]]            # root -> (min, max), declared
    example: dict[str, int]
    sweep: list[dict[str, int]]
    branches: list[tuple[Callable, str]]          # (function, start of the `if` line) in the library
    warm: list[dict[str, int]] = field(default_factory=list)   # eager calls before export (state caches)
    note: str = ""
    heavy: bool = False        # minutes per export: run only when named (or with --all)

    def spec(self, style: str):
        """``dynamic_shapes``: named ``Dim``s over the declared ranges, or ``Dim.AUTO`` on every dim."""
        from torch.export import Dim

        roots = {r: Dim(r, min=lo, max=hi) for r, (lo, hi) in self.ranges.items()}
        per_arg: dict[int, dict[int, object]] = {}
        for s in self.sizes:
            per_arg.setdefault(s.arg, {})[s.dim] = (
                Dim.AUTO if style == "auto" else roots[s.root] * s.mult if s.mult > 1 else roots[s.root])
        return tuple(per_arg.get(i) for i in range(len(self.inputs(self.example))))


def branch_sites(model: IdiomModel) -> list[tuple[str, int, list[str]]]:
    """(file relative to site-packages, line of the ``if``, the ``if`` and its body) for every branch."""
    sites = []
    for fn, start in model.branches:
        fn = inspect.unwrap(fn)               # transformers decorates forward()
        lines, first = inspect.getsourcelines(fn)
        path = inspect.getsourcefile(fn) or "?"
        path = path.split("site-packages/")[-1]
        for k, line in enumerate(lines):
            if line.strip().startswith(start):
                indent = len(line) - len(line.lstrip())
                body = [line.rstrip()]
                for more in lines[k + 1:]:
                    dedented = len(more) - len(more.lstrip()) <= indent
                    if more.strip() and dedented and not more.lstrip().startswith(("else", "elif", ")")):
                        break
                    body.append(more.rstrip())
                sites.append((path, first + k, [b for b in body if b.strip()]))
                break
        else:
            raise LookupError(f"{start!r} not found in {fn.__qualname__}: the installed library changed")
    return sites


# ----------------------------------------------------------------------------------------- helpers

def _seeded(build):
    def wrapped():
        torch.manual_seed(0)
        model = build()
        config = getattr(model, "config", None)
        if config is not None and hasattr(config, "use_cache"):
            config.use_cache = False
        return model.eval()
    return wrapped


def _image(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


class _Main(nn.Module):
    """Calls the library model with keyword arguments and returns its main output tensor."""

    def __init__(self, model: nn.Module, key: str = "pixel_values", **kw):
        super().__init__()
        self.model, self.key, self.kw = model, key, kw

    def forward(self, x):
        out = self.model(**{self.key: x}, **self.kw)
        if isinstance(out, torch.Tensor):
            return out
        for name in ("last_hidden_state", "reconstruction"):
            if getattr(out, name, None) is not None:
                return getattr(out, name)
        return out[0]


def _hw_points(*pairs):
    return [{"H": h, "W": w} for h, w in pairs]


def _image_model(name, idiom, cls, build, ranges, example, sweep, branches, note="", heavy=False, **kw):
    return IdiomModel(name, idiom, cls, _seeded(lambda: _Main(build(), **kw)),
                      lambda p: (_image(BATCH, 3, p["H"], p["W"]),),
                      [Size(0, 2, "H"), Size(0, 3, "W")], ranges, example, sweep, branches, note=note,
                      heavy=heavy)


# ------------------------------------------------------------------------------------ the models

def transformers_models() -> list[IdiomModel]:
    import transformers as tf
    from transformers.models.deit import modeling_deit as deit
    from transformers.models.dinov2_with_registers import modeling_dinov2_with_registers as dinov2_registers
    from transformers.models.focalnet import modeling_focalnet as focalnet
    from transformers.models.mobilevit import modeling_mobilevit as mobilevit
    from transformers.models.pegasus_x import modeling_pegasus_x as pegasus_x
    from transformers.models.pvt_v2 import modeling_pvt_v2 as pvt_v2
    from transformers.models.segformer import modeling_segformer as segformer
    from transformers.models.swin import modeling_swin as swin
    from transformers.models.swinv2 import modeling_swinv2 as swinv2
    from transformers.models.timesformer import modeling_timesformer as timesformer
    from transformers.models.vit import modeling_vit as vit
    from transformers.models.wav2vec2_bert import modeling_wav2vec2_bert as w2v_bert_code

    models = []

    # idiom 1, four padding stages: the stem pads H and W to a multiple of 4, each of the three
    # downsamplings (FocalNetPatchEmbeddings again, patch 2) to a multiple of 2: 2^8 cells of pad outcomes.
    models.append(_image_model(
        "focalnet", "1 pad (4 stages)", "FocalNetModel",
        lambda: tf.FocalNetModel(tf.FocalNetConfig(
            image_size=64, patch_size=4, embed_dim=8, depths=[1, 1, 1, 1], focal_levels=[1, 1, 1, 1],
            focal_windows=[3, 3, 3, 3], drop_path_rate=0.0), add_pooling_layer=False),
        {"H": (33, 160), "W": (33, 160)}, {"H": 64, "W": 96},
        # 64/96/128/160: no pad at any stage; 33: pads at all four; 60: stem no, stages 2-4 yes; 100, 62 mixed
        _hw_points((64, 96), (33, 33), (160, 160), (33, 160), (160, 33), (60, 100), (62, 128), (44, 96),
                   (128, 70), (97, 64)),
        [(focalnet.FocalNetPatchEmbeddings.maybe_pad, "if width % self.patch_size[1] != 0"),
         (focalnet.FocalNetPatchEmbeddings.maybe_pad, "if height % self.patch_size[0] != 0")]))

    # idiom 1, three padding stages plus a window pad and its conditional unpad (the corpus's hf_swin).
    # min(stage 3) must exceed window_size=2, else set_shift_and_window_size rewrites the module: H, W >= 33.
    swin_sweep = _hw_points((64, 96), (33, 33), (128, 128), (33, 128), (128, 33), (60, 100), (62, 64),
                            (44, 96), (96, 70), (97, 64))
    models.append(_image_model(
        "swin", "1 pad (3 stages)", "SwinModel",
        lambda: tf.SwinModel(tf.SwinConfig(
            image_size=32, patch_size=4, embed_dim=8, depths=[1, 1, 1], num_heads=[1, 2, 2], window_size=2,
            drop_path_rate=0.0, mlp_ratio=2.0), add_pooling_layer=False),
        {"H": (33, 128), "W": (33, 128)}, {"H": 64, "W": 96}, swin_sweep,
        [(swin.SwinPatchEmbeddings.maybe_pad, "if width % self.patch_size[1] != 0"),
         (swin.SwinPatchEmbeddings.maybe_pad, "if height % self.patch_size[0] != 0"),
         (swin.SwinPatchMerging.maybe_pad, "if (height % 2 == 1) or (width % 2 == 1)"),
         (swin.SwinLayer.forward, "if pad_values[3] > 0 or pad_values[5] > 0"),
         (swin.SwinLayer.set_shift_and_window_size, "if min(input_resolution) <= self.window_size")],
        note="window_size=2 keeps set_shift_and_window_size's branch off over the range", heavy=True))
    models.append(_image_model(
        "swinv2", "1 pad (3 stages)", "Swinv2Model",
        lambda: tf.Swinv2Model(tf.Swinv2Config(
            image_size=32, patch_size=4, embed_dim=8, depths=[1, 1, 1], num_heads=[1, 2, 2], window_size=2,
            drop_path_rate=0.0, mlp_ratio=2.0), add_pooling_layer=False),
        {"H": (33, 128), "W": (33, 128)}, {"H": 64, "W": 96}, swin_sweep,
        [(swinv2.Swinv2PatchEmbeddings.maybe_pad, "if width % self.patch_size[1] != 0"),
         (swinv2.Swinv2PatchMerging.maybe_pad, "should_pad = "),
         (swinv2.Swinv2PatchMerging.maybe_pad, "if should_pad"),
         (swinv2.Swinv2Layer.forward, "if was_padded")], heavy=True))

    # idiom 1 on a sequence: pad to a multiple of block_size only when needed, unpad at the end.
    def pegasus():
        config = tf.PegasusXConfig(vocab_size=100, d_model=16, encoder_layers=2, decoder_layers=1,
                                   encoder_ffn_dim=32, decoder_ffn_dim=32, encoder_attention_heads=2,
                                   decoder_attention_heads=2, num_global_tokens=4, block_size=8,
                                   max_position_embeddings=512, dropout=0.0)
        return _Main(tf.PegasusXModel(config).get_encoder(), key="input_ids")

    models.append(IdiomModel(
        "pegasus_x", "1 pad (sequence)", "PegasusXEncoder", _seeded(pegasus),
        lambda p: (torch.randint(3, 100, (BATCH, p["S"]), generator=torch.Generator().manual_seed(1)),),
        [Size(0, 1, "S")], {"S": (2, 256)}, {"S": 64},
        [{"S": s} for s in (64, 2, 256, 7, 8, 9, 15, 16, 100, 129)],
        [(pegasus_x.PegasusXEncoder.forward, "if seq_len % self.config.block_size != 0")]))

    # idiom 1 by resizing: MobileViT interpolates a feature map up to a multiple of the patch only when
    # it is not one, records that in a flag, and interpolates back in folding() when the flag is set.
    models.append(_image_model(
        "mobilevit", "1 resize-to-multiple (3 blocks)", "MobileViTModel",
        lambda: tf.MobileViTModel(tf.MobileViTConfig(
            image_size=64, patch_size=2, hidden_sizes=[16, 16, 16],
            neck_hidden_sizes=[8, 8, 8, 16, 16, 16, 32],
            num_attention_heads=2, expand_ratio=2.0, mlp_ratio=2.0, hidden_dropout_prob=0.0),
            expand_output=False),
        {"H": (32, 160), "W": (32, 160)}, {"H": 64, "W": 128},
        # blocks see ceil(H/8), ceil(H/16), ceil(H/32): 64, 128 even at all three; 32: last one odd (1)
        _hw_points((64, 128), (32, 32), (160, 160), (32, 160), (160, 32), (96, 64), (80, 128), (72, 100),
                   (128, 128), (33, 65)),
        [(mobilevit.MobileViTLayer.unfolding, "new_height = ("),
         (mobilevit.MobileViTLayer.unfolding, "if new_width != orig_width or new_height != orig_height"),
         (mobilevit.MobileViTLayer.folding, 'if info_dict["interpolate"]')],
        note="shapeproof's Dim.AUTO export took 311 s on a loaded 2-core machine", heavy=True))

    # idiom 2: resize the position table only when the grid differs (early return of the cached table).
    models.append(_image_model(
        "vit", "2 resize", "ViTModel",
        lambda: tf.ViTModel(tf.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=64),
                            add_pooling_layer=False),
        {"H": (16, 128), "W": (16, 128)}, {"H": 64, "W": 96},
        # the table's side: 4x4 patches and H == W (32..39); (16, 64) has 16 patches but H != W
        _hw_points((64, 96), (16, 16), (128, 128), (16, 128), (128, 16), (32, 32), (39, 39), (16, 64),
                   (32, 40), (40, 40)),
        [(vit.ViTEmbeddings.interpolate_pos_encoding, "if not torch.jit.is_tracing() and num_patches")],
        interpolate_pos_encoding=True))

    # idiom 2 again, in a mode exact at the same size (bicubic with antialias): ViT's early return, DINOv2's
    # table with register tokens; its sizes go through transformers' torch_int (int of a size)
    models.append(_image_model(
        "dinov2_registers", "2 resize (exact)", "Dinov2WithRegistersModel",
        lambda: tf.Dinov2WithRegistersModel(tf.Dinov2WithRegistersConfig(
            image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=64, num_register_tokens=2)),
        {"H": (16, 128), "W": (16, 128)}, {"H": 64, "W": 96},
        _hw_points((64, 96), (16, 16), (128, 128), (16, 128), (128, 16), (32, 32), (39, 39), (16, 64),
                   (32, 40), (40, 40)),
        [(dinov2_registers.Dinov2WithRegistersEmbeddings.interpolate_pos_encoding,
          "if not torch.jit.is_tracing() and num_patches")]))

    # idiom 2, twice: a space table and a time table, each resized (nearest) only when it differs.
    def timesformer_model():
        return _Main(tf.TimesformerModel(tf.TimesformerConfig(
            image_size=16, patch_size=8, num_frames=2, hidden_size=16, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=32)))

    # The layers take the patch grid's width from the config (image_size // patch_size), so W stays 16, and
    # divide the tokens by the frames: an odd T with an odd grid height fails in eager, so T = 2f.  The time
    # table's branch is then the drop-in corner's form too: the root f of T = 2f against a configured size.
    models.append(IdiomModel(
        "timesformer", "2 resize (space, time)", "TimesformerModel", _seeded(timesformer_model),
        lambda p: (_image(BATCH, 2 * p["f"], 3, p["H"], 16),),
        [Size(0, 1, "f", 2), Size(0, 3, "H")], {"f": (1, 4), "H": (16, 64)}, {"f": 2, "H": 32},
        # the tables' sides: T = 2 (f = 1) and 16 <= H < 24 (a 2x2 grid)
        [{"f": f, "H": h} for f, h in ((2, 32), (1, 16), (4, 64), (1, 64), (4, 16), (1, 23), (2, 16), (3, 40),
                                       (1, 24), (3, 17))],
        [(timesformer.TimesformerEmbeddings.forward, "if embeddings.size(1) != self.position_embeddings"),
         (timesformer.TimesformerEmbeddings.forward, "if num_frames != self.time_embeddings.size(1)")],
        note="W fixed at 16 (the layers read the grid width from the config); T = 2f"))

    # idiom 3: a square grid recovered from the token count, on square inputs 8g x 8g: ViT's as
    # math.floor(n ** 0.5), DeiT's as int(n ** 0.5) (Python's int must return an int, so torch fixes the
    # grid to the example's; shapeproof's traces keep it symbolic: tracer/sizes/symbolic_casts.py)
    def square_grid(name, idiom, model_class, config_class, module, grid_line):
        masked_model = getattr(module, model_class)
        embeddings = getattr(module, model_class.replace("ForMaskedImageModeling", "Embeddings"))

        def build():
            return _Main(masked_model(config_class(
                image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                intermediate_size=64, encoder_stride=8)), interpolate_pos_encoding=True)

        return IdiomModel(
            name, idiom, model_class, _seeded(build),
            lambda p: (_image(BATCH, 3, 8 * p["g"], 8 * p["g"]),),
            [Size(0, 2, "g", 8), Size(0, 3, "g", 8)], {"g": (2, 16)}, {"g": 6},
            [{"g": g} for g in (6, 2, 16, 3, 4, 5, 7, 9, 12, 15)],
            [(masked_model.forward, grid_line),
             (embeddings.interpolate_pos_encoding, "if not torch.jit.is_tracing() and num_patches")],
            note="H = W = 8g; g = 4 is the table's own grid")

    models.append(square_grid("vit_mim", "3 square grid", "ViTForMaskedImageModeling", tf.ViTConfig, vit,
                              "height = width = math.floor(sequence_length**0.5)"))
    models.append(square_grid("deit_mim", "3 square grid (int)", "DeiTForMaskedImageModeling", tf.DeiTConfig,
                              deit, "height = width = int(sequence_length**0.5)"))

    # idiom 3 without a position table: Swin's masked-image decoder recovers its grid the same way, after
    # two padding stages; from g = 3 (stage 2 wider than its window of 2: below, Swin clamps the window)
    def swin_mim():
        return _Main(tf.SwinForMaskedImageModeling(tf.SwinConfig(
            image_size=32, patch_size=4, embed_dim=8, depths=[1, 1], num_heads=[1, 2], window_size=2,
            encoder_stride=8, drop_path_rate=0.0)))

    models.append(IdiomModel(
        "swin_mim", "3 square grid (no table)", "SwinForMaskedImageModeling", _seeded(swin_mim),
        lambda p: (_image(BATCH, 3, 8 * p["g"], 8 * p["g"]),),
        [Size(0, 2, "g", 8), Size(0, 3, "g", 8)], {"g": (3, 16)}, {"g": 8},
        [{"g": g} for g in (8, 3, 16, 4, 5, 6, 7, 9, 12, 15)],
        [(swin.SwinForMaskedImageModeling.forward, "height = width = math.floor(sequence_length**0.5)"),
         (swin.SwinPatchEmbeddings.maybe_pad, "if width % self.patch_size[1] != 0")],
        note="H = W = 8g"))

    # idiom 4: spatial-reduction attention; the reduced grid is 1x1 over the bottom of the range.
    models.append(_image_model(
        "segformer", "4 reaches 1", "SegformerModel",
        lambda: tf.SegformerModel(tf.SegformerConfig(
            depths=[1, 1, 1, 1], sr_ratios=[8, 4, 2, 1], hidden_sizes=[8, 16, 16, 32],
            num_attention_heads=[1, 1, 2, 2], mlp_ratios=[2, 2, 2, 2], drop_path_rate=0.0)),
        {"H": (32, 128), "W": (32, 128)}, {"H": 64, "W": 96},
        # stage sizes (H-1)//4+1, then //2 ceil: at 32 every reduced grid is 1x1 and stage 4 is 1x1
        _hw_points((64, 96), (32, 32), (128, 128), (32, 128), (128, 32), (33, 40), (61, 61), (65, 70),
                   (100, 47), (96, 96)),
        [(segformer.SegformerSequenceReduction.forward, "hidden_states = self.sequence_reduction(")]))
    models.append(_image_model(
        "pvt_v2", "4 reaches 1", "PvtV2Model",
        lambda: tf.PvtV2Model(tf.PvtV2Config(
            depths=[1, 1, 1, 1], sr_ratios=[8, 4, 2, 1], hidden_sizes=[8, 16, 16, 32],
            num_attention_heads=[1, 1, 2, 2], mlp_ratios=[2, 2, 2, 2], drop_path_rate=0.0)),
        {"H": (32, 128), "W": (32, 128)}, {"H": 64, "W": 96},
        _hw_points((64, 96), (32, 32), (128, 128), (32, 128), (128, 32), (33, 40), (61, 61), (65, 70),
                   (100, 47), (96, 96)),
        [(pvt_v2.PvtV2SelfAttention.forward, "elif self.spatial_reduction_ratio > 1")],
        note="segformer's idiom again; shapeproof's named export searched 24 traces, 120 s", heavy=True))

    # the drop-in corner: a branch on the root t of a derived dim (T = 2t) against a cached value.  The
    # rotary table is cached at the length of the last call; the model ran once at T = 16 before export.
    def w2v_bert():
        return _Main(tf.Wav2Vec2BertModel(tf.Wav2Vec2BertConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            feature_projection_input_dim=8, position_embeddings_type="rotary", conv_depthwise_kernel_size=3,
            hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0, feat_proj_dropout=0.0,
            layerdrop=0.0, add_adapter=False)), key="input_features")

    models.append(IdiomModel(
        "w2v_bert_rotary", "corner (cached size)", "Wav2Vec2BertModel", _seeded(w2v_bert),
        lambda p: (_image(BATCH, 2 * p["t"], 8),),
        [Size(0, 1, "t", 2)], {"t": (2, 64)}, {"t": 16},
        [{"t": t} for t in (16, 2, 64, 7, 8, 9, 12, 33, 50, 63)],
        [(w2v_bert_code.Wav2Vec2BertRotaryPositionalEmbedding.forward,
          "if sequence_length == self.cached_sequence_length")],
        warm=[{"t": 8}], note="one eager call at T = 16 before export fills the cache"))
    return models


def timm_models() -> list[IdiomModel]:
    """timm's models, when timm imports (it needs torchvision; see ``import_timm``)."""
    timm = import_timm()
    if timm is None:
        return []
    from timm.layers import pos_embed
    from timm.models.vision_transformer import VisionTransformer

    class Features(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):
            return self.model.forward_features(pixel_values)

    def vit_model():
        return _Main(Features(VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2,
                                                mlp_ratio=2.0, num_classes=0, dynamic_img_size=True)))

    # timm's own patch embedding asserts H and W are multiples of the patch: H = 8h, W = 8w
    return [IdiomModel(
        "timm_vit", "2 resize", "timm VisionTransformer(dynamic_img_size=True)", _seeded(vit_model),
        lambda p: (_image(BATCH, 3, 8 * p["h"], 8 * p["w"]),),
        [Size(0, 2, "h", 8), Size(0, 3, "w", 8)], {"h": (2, 16), "w": (2, 16)}, {"h": 8, "w": 12},
        [{"h": h, "w": w} for h, w in ((8, 12), (2, 2), (16, 16), (2, 16), (16, 2), (4, 4), (4, 5), (2, 8),
                                       (5, 5), (3, 7))],
        [(pos_embed.resample_abs_pos_embed, "if not is_exporting() and num_new_tokens == num_pos_tokens")],
        note="H = 8h, W = 8w; the table's grid is 4x4")]


def import_timm():
    """timm, or None where it (or torchvision, which it needs) is not installed."""
    try:
        import timm
        return timm
    except ImportError:
        return None


def torchvision_schemas() -> None:
    """Let torchvision import beside torch 2.13.0+cpu.

    PyPI's torchvision 0.28.0 is a CUDA build: its ``_C.so`` does not load here, so its ops are never
    registered and ``import torchvision`` fails registering a fake kernel for ``torchvision::nms`` (the
    other ops it registers only when ``_C.so`` loaded).  transformers imports torchvision whenever it is
    installed, so this runs before transformers: it defines the two schemas (no op ever runs).
    """
    global _TORCHVISION_SCHEMAS
    found = importlib.util.find_spec("torchvision")
    if found is None or found.origin is None or "torchvision" in sys.modules or _TORCHVISION_SCHEMAS:
        return
    try:
        torch.ops.load_library(str(Path(found.origin).parent / "_C.so"))
        return                                  # a build for this torch: its ops are registered
    except OSError:
        pass
    _TORCHVISION_SCHEMAS = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        _TORCHVISION_SCHEMAS.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


_TORCHVISION_SCHEMAS = None
torchvision_schemas()


def all_models() -> list[IdiomModel]:
    return transformers_models() + timm_models()
