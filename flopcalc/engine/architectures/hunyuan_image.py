"""HunyuanImage 2.1 transformer: ``HunyuanImageTransformer2DModel`` (diffusers
``models/transformers/transformer_hunyuanimage.py``). Its blocks are HunyuanVideo's
(``formulas/hunyuan_video.py``: the dual-stream, single-stream and token-refiner blocks are the same
modules under new names, lines 267, 461, 537), and so is its ``context_embedder`` (line 365).

``HunyuanImagePipeline`` feeds the ``C × H/32 × W/32`` latent, ``T₁`` Qwen2.5-VL tokens and ``T₂``
byT5 glyph tokens. The model (``forward``, line 744):

* ``x_embedder.proj``: an ``nn.Conv2d`` with kernel = stride = ``patch_size`` (p_h, p_w):
  ``N = ⌊h/p_h⌋ · ⌊w/p_w⌋`` image tokens;
* ``context_embedder`` (``HunyuanImageTokenRefiner``) on the ``T₁`` tokens;
* ``context_embedder_2`` (``HunyuanImageByT5TextProjection``, when ``text_embed_2_dim`` is set and the
  pipeline passes glyph states): LayerNorm, text_embed_2_dim → 2048 → 2048 → d on the ``T₂`` tokens,
  which are then joined to the ``T₁`` ones (line 818): the blocks see ``T = T₁ + T₂`` text tokens;
* ``time_guidance_embed``: timestep 256 → d → d, a second timestep embedder for ``timestep_r`` when
  ``use_meanflow`` (the pipeline then always passes it), the guidance embedder when ``guidance_embeds``;
* ``num_layers`` dual-stream and ``num_single_layers`` single-stream blocks over N + T tokens;
* ``norm_out`` (``AdaLayerNormContinuous``, d → 2d) and ``proj_out`` (d → p_h·p_w·out_channels) on N.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.hunyuan_video import (
    QK_NORMS, TIMESTEP_CHANNELS, _choice, _mlp_ratio, patched, token_refiner,
)
from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, TEXT, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.hunyuan_video import dual_stream_block, single_block
from flopcalc.engine.registry import RunShape, register

#: ``HunyuanImageTransformer2DModel.__init__`` keyword defaults (transformer_hunyuanimage.py:673).
DEFAULTS = {
    "in_channels": 64,
    "out_channels": 64,
    "num_attention_heads": 28,
    "attention_head_dim": 128,
    "num_layers": 20,
    "num_single_layers": 40,
    "num_refiner_layers": 2,
    "mlp_ratio": 4.0,
    "patch_size": (1, 1),
    "qk_norm": "rms_norm",
    "guidance_embeds": False,
    "text_embed_dim": 3584,
    "text_embed_2_dim": None,
    "rope_theta": 256.0,
    "rope_axes_dim": (64, 64),
    "use_meanflow": False,
}
#: ``HunyuanImageByT5TextProjection(text_embed_2_dim, 2048, inner_dim)`` (line 707): its hidden width.
BYT5_PROJECTION_WIDTH = 2048

declare_keys("HunyuanImageTransformer2DModel", {
    "in_channels": SIZE, "out_channels": SIZE,  # None fails in forward's unpatchify (line 900)
    "num_attention_heads": SIZE, "attention_head_dim": SIZE,
    "num_layers": LAYERS, "num_single_layers": LAYERS, "num_refiner_layers": LAYERS, "mlp_ratio": RATIO,
    "patch_size": ListOf(SIZE, lo=2, hi=3), "qk_norm": TEXT | NULL,
    "guidance_embeds": FLAG, "text_embed_dim": SIZE, "text_embed_2_dim": SIZE | NULL, "use_meanflow": FLAG,
})


def byt5_projection(in_features: int, dim: int, tokens: Any) -> Node:
    """``HunyuanImageByT5TextProjection`` (line 181) on ``tokens`` glyph tokens: LayerNorm, three linears
    with GELUs between: :math:`T_2 (c\\,w + w^2 + w\\,d)` MACs, :math:`w` = 2048."""
    w = BYT5_PROJECTION_WIDTH
    return Node("context_embedder_2", children=(
        Node("norm", ops.layer_norm(tokens, in_features)),
        Node("linear_1", ops.linear(tokens, in_features, w) + ops.activation(tokens * w)),
        Node("linear_2", ops.linear(tokens, w, w) + ops.activation(tokens * w)),
        Node("linear_3", ops.linear(tokens, w, dim)),
    ), formula="hunyuan_image_byt5_projection")


@register("HunyuanImageTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_hunyuanimage.py",
          nominal=RunShape(latent_height=8, latent_width=8, text_len=8, text_len_2=8))
def hunyuan_image_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = positive_int(config, "out_channels")
    patch = [int(p) for p in config["patch_size"]]
    if len(patch) != 2:
        raise ConfigError(f"{config.component}/config.json: patch_size {patch} has {len(patch)} entries; "
                          "HunyuanImagePipeline feeds a 2-D latent, which needs two (p_h, p_w)")
    ph, pw = patch
    qk_norm = _choice(config, "qk_norm", QK_NORMS)
    mlp_ratio = _mlp_ratio(config)
    n = patched(shape.latent_height, ph) * patched(shape.latent_width, pw)
    t1 = shape.text_len
    glyph_dim = config["text_embed_2_dim"]
    glyphs = glyph_dim is not None and shape.text_len_2 is not None
    t = t1 + shape.text_len_2 if glyphs else t1

    embed = [mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim)]
    if config["use_meanflow"]:
        embed.append(mlp_embedder("timestep_embedder_r", TIMESTEP_CHANNELS, dim))
    if config["guidance_embeds"]:
        embed.append(mlp_embedder("guidance_embedder", TIMESTEP_CHANNELS, dim))
    children = [
        Node("x_embedder", children=(Node("proj", ops.conv(in_channels, dim, ph * pw, n)),)),
        token_refiner(dim=dim, heads=heads, head_dim=head_dim, text_dim=positive_int(config, "text_embed_dim"),
                      tokens=t1, layers=count_int(config, "num_refiner_layers")),
    ]
    if glyphs:
        children.append(byt5_projection(int(glyph_dim), dim, shape.text_len_2))
    dual = dual_stream_block(dim=dim, heads=heads, head_dim=head_dim, video_tokens=n, text_tokens=t,
                             mlp_ratio=mlp_ratio, qk_norm=qk_norm)
    single = single_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t, mlp_ratio=mlp_ratio,
                          qk_norm=qk_norm)
    children += [
        Node("time_guidance_embed", children=tuple(embed)),
        module_list("transformer_blocks", [dual] * count_int(config, "num_layers")),
        module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, ph * pw * out_channels)),
    ]
    return Node("transformer", children=tuple(children), formula="hunyuan_image_transformer")
