"""``SanaVideoTransformer3DModel`` (diffusers ``models/transformers/transformer_sana_video.py``): SANA-Video's
linear video DiT. The ``z × T × h × w`` latent is patchified by ``patch_embedding`` (``nn.Conv3d``, kernel =
stride = ``patch_size``) into ``N = (T/p_t)(h/p_h)(w/p_w)`` tokens (each side floored); ``rope`` (Wan's
``WanRotaryPosEmbed``: float32 cos/sin tables built at init, sliced per call) is applied elementwise inside
the linear attention; the timestep goes through adaLN-single (``AdaLayerNormSingle``: ``emb.timestep_embedder``
256 → D → D and ``linear`` D → 6D, once per timestep: one per sample, or one per token when
``SanaImageToVideoPipeline`` passes a per-token timestep, ``RunShape.timestep_tokens``); the Gemma-2 caption is
projected (``PixArtAlphaTextProjection``) and RMS-normed; the blocks are
:func:`flopcalc.formulas.sana_video.sana_video_transformer_block`; the output is ``norm_out``
(``SanaModulatedNorm``: a LayerNorm without affine, modulated by the ``scale_shift_table`` (2D) and the
embedded timestep) and ``proj_out`` (D → ``p_t p_h p_w · out_channels``).
"""

from __future__ import annotations

from math import prod
from typing import Any

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, ListOf, Real, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.architectures.wan import latent_tokens, patch_size, floor_div
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.sana_video import sana_video_transformer_block

#: ``SanaVideoTransformer3DModel.__init__`` keyword defaults (transformer_sana_video.py:505-528).
DEFAULTS = {
    "in_channels": 16, "out_channels": 16, "num_attention_heads": 20, "attention_head_dim": 112, "num_layers": 20,
    "num_cross_attention_heads": 20, "cross_attention_head_dim": 112, "cross_attention_dim": 2240,
    "caption_channels": 2304, "mlp_ratio": 2.5, "dropout": 0.0, "attention_bias": False, "sample_size": 30,
    "patch_size": [1, 2, 2], "norm_elementwise_affine": False, "norm_eps": 1e-6, "interpolation_scale": None,
    "guidance_embeds": False, "guidance_embeds_scale": 0.1, "qk_norm": "rms_norm_across_heads",
    "rope_max_seq_len": 1024,
}
SOURCE = "diffusers/models/transformers/transformer_sana_video.py"
#: The ``qk_norm`` values the SANA-Video processors can run (``norm_q`` applied to the whole projection).
QK_NORMS = (None, "rms_norm_across_heads", "layer_norm_across_heads")

declare_keys("SanaVideoTransformer3DModel", {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "num_cross_attention_heads": SIZE | NULL, "cross_attention_head_dim": SIZE | NULL,
    "cross_attention_dim": SIZE | NULL, "caption_channels": SIZE, "mlp_ratio": RATIO,
    "dropout": Real(0.0, 1.0, closed=True), "attention_bias": FLAG, "sample_size": SIZE,
    "patch_size": ListOf(SIZE, lo=3, hi=3), "norm_elementwise_affine": FLAG, "guidance_embeds": FLAG,
    "qk_norm": TEXT | NULL, "rope_max_seq_len": SIZE,
})


def _time_embed(dim: int, timesteps: Any) -> Node:
    """``time_embed`` (``AdaLayerNormSingle``, normalization.py): ``emb.timestep_embedder`` (256 → D → D) and
    ``linear`` (D → 6D on silu), on each of the ``timesteps`` timesteps (``timestep.flatten()``, :655-659)."""
    return Node("time_embed", children=(
        Node("emb", children=(mlp_embedder("timestep_embedder", 256, dim, tokens=timesteps),)),
        Node("linear", ops.activation(timesteps * dim) + ops.linear(timesteps, dim, 6 * dim)),
    ))


def _check(config: Config) -> None:
    if config["guidance_embeds"]:
        raise ConfigError(f"{config.component}/config.json: guidance_embeds is set, but the SANA-Video pipelines pass "
                          "no guidance and call time_embed with batch_size, which SanaCombinedTimestepGuidanceEmbeddings "
                          "does not take (the real call fails); leave guidance_embeds false")
    if config["qk_norm"] not in QK_NORMS:
        raise ConfigError(f"{config.component}/config.json: qk_norm {config['qk_norm']!r} cannot run in SANA-Video's "
                          f"attention processors (they normalise all heads at once); use one of {QK_NORMS}")
    if config["cross_attention_dim"] is None:
        raise ConfigError(f"{config.component}/config.json: cross_attention_dim null builds blocks without attn2, "
                          "which SanaVideoTransformerBlock.forward reads (the real call fails)")
    inner = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    if positive_int(config, "cross_attention_dim") != inner:
        raise ConfigError(f"{config.component}/config.json: cross_attention_dim {config['cross_attention_dim']} is not "
                          f"the model width num_attention_heads × attention_head_dim = {inner}: attn2 reads the "
                          "caption projected to that width (the real call fails)")


@register("SanaVideoTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def sana_video_transformer(config: Config, shape: RunShape) -> Node:
    _check(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    pt, ph, pw = patch_size(config)
    n = latent_tokens(config, shape)  # refuses a latent smaller than one patch
    frames = floor_div(1 if shape.latent_frames is None else shape.latent_frames, pt)
    gh, gw = floor_div(shape.latent_height, ph), floor_div(shape.latent_width, pw)
    t = shape.text_len
    block = sana_video_transformer_block(
        dim=dim, heads=heads, head_dim=head_dim, cross_heads=positive_int(config, "num_cross_attention_heads"),
        cross_head_dim=positive_int(config, "cross_attention_head_dim"),
        cross_attention_dim=positive_int(config, "cross_attention_dim"), frames=frames, height=gh, width=gw,
        text_tokens=t, attention_bias=bool(config["attention_bias"]),
        norm_affine=bool(config["norm_elementwise_affine"]), mlp_ratio=float(config["mlp_ratio"]),
        qk_norm=config["qk_norm"])
    children = (
        Node("patch_embedding", ops.conv(in_channels, dim, pt * ph * pw, n)),
        _time_embed(dim, 1 if shape.timestep_tokens is None else shape.timestep_tokens),
        mlp_embedder("caption_projection", positive_int(config, "caption_channels"), dim, tokens=t),
        Node("caption_norm", ops.rms_norm(t, dim)),
        module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
        Node("scale_shift_table", ops.parameters(2 * dim)),
        Node("norm_out", children=(Node("norm", ops.layer_norm(n, dim, affine=False)),)),
        Node("proj_out", ops.linear(n, dim, prod((pt, ph, pw)) * out_channels)),
    )
    return Node("transformer", children=children, formula="sana_video_transformer")


def rotary_buffers(config: Config) -> tuple[Buffer, ...]:
    """transformer_sana_video.py:213-214: ``WanRotaryPosEmbed``'s non-persistent float32 cos/sin tables,
    ``rope_max_seq_len × attention_head_dim`` each."""
    numel = positive_int(config, "rope_max_seq_len") * positive_int(config, "attention_head_dim")
    return Buffer("rope.freqs_cos", numel, "float32"), Buffer("rope.freqs_sin", numel, "float32")


loading_rules("SanaVideoTransformer3DModel", buffers=rotary_buffers,
              source="diffusers/models/transformers/transformer_sana_video.py:213-214 (no _keep_in_fp32_modules)")
