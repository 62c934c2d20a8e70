"""``UNetSpatioTemporalConditionModel`` (diffusers ``models/unets/unet_spatio_temporal_condition.py``),
Stable Video Diffusion's denoiser, on one video of ``latent_frames`` frames (batched as frames inside).

``forward`` (unet_spatio_temporal_condition.py): ``time_embedding`` and ``add_embedding`` (the
``added_time_ids`` fps / motion bucket / noise augmentation, sinusoidally embedded) run once per video,
their sum is repeated per frame; ``conv_in`` and every spatial module run on each frame; the down blocks
(``CrossAttnDownBlockSpatioTemporal`` / ``DownBlockSpatioTemporal``: ``SpatioTemporalResBlock`` s, a
``TransformerSpatioTemporalModel`` after each in the cross-attention blocks, a stride-2 convolution),
``UNetMidBlockSpatioTemporal`` and the mirrored up blocks (skip concatenation, nearest ×2 and a
convolution, to the skip's size) as in the 2D UNet; ``text_len`` context vectors per frame (the CLIP
image embedding: 1)."""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, LAYER_COUNTS, NAMES, SIZE, SIZES, Config, ListOf, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.architectures.unet_2d_condition import _per_block as per_block, block_types
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.spatio_temporal import per_frames, spatio_temporal_res_block, transformer_spatio_temporal
from flopcalc.formulas.unet_blocks import downsample, upsample
from flopcalc.engine.registry import RunShape, register

SOURCE = "diffusers/models/unets/unet_spatio_temporal_condition.py"

#: ``UNetSpatioTemporalConditionModel.__init__`` keyword defaults.
DEFAULTS = {
    "in_channels": 8,
    "out_channels": 4,
    "down_block_types": ["CrossAttnDownBlockSpatioTemporal", "CrossAttnDownBlockSpatioTemporal",
                         "CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"],
    "up_block_types": ["UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal",
                       "CrossAttnUpBlockSpatioTemporal"],
    "block_out_channels": [320, 640, 1280, 1280],
    "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 768,
    "layers_per_block": 2,
    "cross_attention_dim": 1024,
    "transformer_layers_per_block": 1,
    "num_attention_heads": [5, 10, 20, 20],
    "num_frames": 25,
}
DOWN = ("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal")
UP = ("CrossAttnUpBlockSpatioTemporal", "UpBlockSpatioTemporal")
#: ``get_add_time_ids``: fps, motion_bucket_id, noise_aug_strength.
ADDED_TIME_IDS = 3

declare_keys("UNetSpatioTemporalConditionModel", {
    "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES, "up_block_types": NAMES,
    "block_out_channels": SIZES, "addition_time_embed_dim": SIZE, "projection_class_embeddings_input_dim": SIZE,
    "layers_per_block": LAYERS | LAYER_COUNTS, "cross_attention_dim": SIZE | SIZES,
    "transformer_layers_per_block": LAYERS | LAYER_COUNTS, "num_attention_heads": SIZE | SIZES,
    "num_frames": SIZE, "sample_size": SIZE | ListOf(SIZE, lo=2, hi=2),
})


def _per_block(config: Config, key: str, n: int) -> list:
    return per_block(config[key], n, key, config.component)


@register("UNetSpatioTemporalConditionModel", role="denoiser", defaults=DEFAULTS, source=SOURCE,
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=2, text_len=1))
def unet_spatio_temporal(config: Config, shape: RunShape) -> Node:
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    down_types, up_types = block_types(config, nb, DOWN + UP)
    heads = _per_block(config, "num_attention_heads", nb)
    cross = _per_block(config, "cross_attention_dim", nb)
    lpb = _per_block(config, "layers_per_block", nb)
    tlpb = _per_block(config, "transformer_layers_per_block", nb)
    f, t = shape.latent_frames, shape.text_len
    h, w = shape.latent_height, shape.latent_width
    c0 = channels[0]
    temb = 4 * c0
    proj = positive_int(config, "projection_class_embeddings_input_dim")
    if proj != ADDED_TIME_IDS * positive_int(config, "addition_time_embed_dim"):
        raise ConfigError(f"{comp}/config.json: projection_class_embeddings_input_dim {proj} must be "
                          f"{ADDED_TIME_IDS} × addition_time_embed_dim (the pipeline's three added time ids)")

    def res(ci: int, co: int, hh, ww) -> Node:
        return spatio_temporal_res_block(ci, co, f, hh, ww, temb_channels=temb)

    def attn(c: int, i: int, hh, ww, up: bool = False) -> Node:
        j = nb - 1 - i if up else i
        return transformer_spatio_temporal(c, heads[j], f, hh, ww, layers=tlpb[j], context_tokens=t,
                                           context_dim=cross[j])

    sizes = [(h, w)]
    downs, c_out = [], c0
    for i, kind in enumerate(down_types):
        c_in, c_out = c_out, channels[i]
        hh, ww = sizes[-1]
        parts = [module_list("resnets", [res(c_in if j == 0 else c_out, c_out, hh, ww) for j in range(lpb[i])])]
        if kind == "CrossAttnDownBlockSpatioTemporal":
            parts.append(module_list("attentions", [attn(c_out, i, hh, ww)] * lpb[i]))
        if i < nb - 1:
            sampler, h2, w2 = downsample(c_out, hh, ww, 1)
            parts.append(module_list("downsamplers", [per_frames(sampler, f)]))
            sizes.append((h2, w2))
        downs.append(Node("block", children=tuple(parts), formula=kind))

    top = channels[-1]
    hm, wm = sizes[-1]
    mid = Node("mid_block", children=(
        module_list("resnets", [res(top, top, hm, wm)] * 2),
        module_list("attentions", [attn(top, nb - 1, hm, wm)]),
    ), formula="UNetMidBlockSpatioTemporal")

    rev = channels[::-1]
    ups, out_c = [], rev[0]
    for i, kind in enumerate(up_types):
        prev, out_c = out_c, rev[i]
        skip_in = rev[min(i + 1, nb - 1)]
        layers = lpb[nb - 1 - i] + 1
        hh, ww = sizes[nb - 1 - i]
        parts = [module_list("resnets", [
            res((prev if j == 0 else out_c) + (skip_in if j == layers - 1 else out_c), out_c, hh, ww)
            for j in range(layers)])]
        if kind == "CrossAttnUpBlockSpatioTemporal":
            parts.append(module_list("attentions", [attn(out_c, i, hh, ww, up=True)] * layers))
        if i < nb - 1:
            parts.append(module_list("upsamplers", [per_frames(upsample(out_c, *sizes[nb - 2 - i]), f)]))
        ups.append(Node("block", children=tuple(parts), formula=kind))

    hw = h * w
    return Node("unet", children=(
        per_frames(Node("conv_in", ops.conv2d(positive_int(config, "in_channels"), c0, 3, h, w)), f),
        mlp_embedder("time_embedding", c0, temb),
        mlp_embedder("add_embedding", proj, temb),
        module_list("down_blocks", downs),
        mid,
        module_list("up_blocks", ups),
        Node("conv_norm_out", ops.group_norm(c0, f * hw) + ops.activation(f * c0 * hw)),
        per_frames(Node("conv_out", ops.conv2d(c0, positive_int(config, "out_channels"), 3, h, w)), f),
    ), formula="unet_spatio_temporal")
