"""HunyuanVideo 1.5 transformer: ``HunyuanVideo15Transformer3DModel`` (diffusers
``models/transformers/transformer_hunyuan_video15.py``). Its dual-stream and token-refiner blocks are
HunyuanVideo's (``formulas/hunyuan_video.py``: ``HunyuanVideo15TransformerBlock`` line 327,
``HunyuanVideo15IndividualTokenRefinerBlock``), its ``context_embedder`` is HunyuanVideo's token refiner
and its ``context_embedder_2`` HunyuanImage's byT5 projection; there are no single-stream blocks.

``HunyuanVideo15Pipeline`` feeds the ``(2C + 1) × F_lat × H/16 × W/16`` input (latents, condition latents,
mask), ``T₁`` Qwen2.5-VL tokens, ``T₂`` byT5 tokens and ``T₃`` image tokens (SigLIP states; zeros for
text-to-video). The model (``forward``, line 646):

* ``x_embedder.proj``: ``nn.Conv3d`` with kernel = stride = (p_t, p, p): ``N = ⌊F/p_t⌋ ⌊h/p⌋ ⌊w/p⌋`` tokens;
* ``time_embed``: timestep 256 → d → d (``timestep_embedder_r`` exists with ``use_meanflow`` but runs only
  on a ``timestep_r``, which the pipelines never pass: parameters only);
* ``context_embedder`` (T₁ tokens), ``context_embedder_2`` (byT5 projection, T₂ tokens), ``image_embedder``
  (``HunyuanVideo15ImageProjection``: LayerNorm, image_embed_dim → image_embed_dim → d, LayerNorm, T₃ tokens),
  ``cond_type_embed`` (``nn.Embedding(3, d)``: lookups); the three streams are joined (line 742): the blocks
  see ``T = T₁ + T₂ + T₃`` text tokens whatever the masks hold;
* ``num_layers`` dual-stream blocks over N + T tokens; ``norm_out`` and ``proj_out`` on N.
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.architectures.hunyuan_image import byt5_projection
from flopcalc.engine.architectures.hunyuan_video import (
    QK_NORMS, TIMESTEP_CHANNELS, _choice, _mlp_ratio, patched, token_refiner,
)
from flopcalc.engine.config import FLAG, LAYERS, NULL, RATIO, SIZE, SIZES, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Cost, Node, module_list
from flopcalc.engine.errors import FlopcalcError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.hunyuan_video import dual_stream_block
from flopcalc.engine.registry import RunShape, register

#: ``HunyuanVideo15Transformer3DModel.__init__`` keyword defaults (transformer_hunyuan_video15.py:563).
DEFAULTS = {
    "in_channels": 65,
    "out_channels": 32,
    "num_attention_heads": 16,
    "attention_head_dim": 128,
    "num_layers": 54,
    "num_refiner_layers": 2,
    "mlp_ratio": 4.0,
    "patch_size": 1,
    "patch_size_t": 1,
    "qk_norm": "rms_norm",
    "text_embed_dim": 3584,
    "text_embed_2_dim": 1472,
    "image_embed_dim": 1152,
    "rope_theta": 256.0,
    "rope_axes_dim": (16, 56, 56),
    "target_size": 640,
    "task_type": "i2v",
    "use_meanflow": False,
}
#: ``cond_type_embed = nn.Embedding(3, inner_dim)``: one row per stream (Qwen, byT5, image).
CONDITION_TYPES = 3

declare_keys("HunyuanVideo15Transformer3DModel", {
    "in_channels": SIZE, "out_channels": SIZE,  # None fails in forward's reshape (out_channels from config)
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "num_layers": LAYERS, "num_refiner_layers": LAYERS,
    "mlp_ratio": RATIO, "patch_size": SIZE, "patch_size_t": SIZE, "qk_norm": TEXT | NULL, "text_embed_dim": SIZE,
    "text_embed_2_dim": SIZE, "image_embed_dim": SIZE, "use_meanflow": FLAG, "target_size": SIZE,
    "rope_axes_dim": SIZES,
})


def _parameters_only(node: Node) -> Node:
    """A module built but not called: its parameters, no work."""
    c = node.cost
    return replace(node, cost=Cost(params=c.params, linear_weights=c.linear_weights),
                   children=tuple(_parameters_only(ch) for ch in node.children))


def image_projection(in_features: int, dim: int, tokens) -> Node:
    """``HunyuanVideo15ImageProjection`` (line 312) on ``tokens`` image tokens: :math:`T_3 (c^2 + c d)` MACs."""
    return Node("image_embedder", children=(
        Node("norm_in", ops.layer_norm(tokens, in_features)),
        Node("linear_1", ops.linear(tokens, in_features, in_features) + ops.activation(tokens * in_features)),
        Node("linear_2", ops.linear(tokens, in_features, dim)),
        Node("norm_out", ops.layer_norm(tokens, dim)),
    ), formula="hunyuan_video15_image_projection")


@register("HunyuanVideo15Transformer3DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_hunyuan_video15.py",
          nominal=RunShape(latent_height=8, latent_width=8, latent_frames=1, text_len=8, text_len_2=8, image_tokens=8))
def hunyuan_video15_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = positive_int(config, "out_channels")
    p, pt = positive_int(config, "patch_size"), positive_int(config, "patch_size_t")
    # HunyuanVideo15AttnProcessor2_0 calls attn.norm_q / norm_k unconditionally (line 69): no None
    qk_norm = _choice(config, "qk_norm", tuple(k for k in QK_NORMS if k is not None))
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    if isinstance(frames, int) and frames < pt:
        raise FlopcalcError(f"{config.component}: {frames} latent frame(s) are fewer than patch_size_t {pt}")
    if shape.text_len_2 is None or shape.image_tokens is None:
        raise FlopcalcError(f"{config.component}: HunyuanVideo15Transformer3DModel needs the byT5 and image token "
                            "counts (its forward runs context_embedder_2 and image_embedder on every call)")
    n = patched(frames, pt) * patched(shape.latent_height, p) * patched(shape.latent_width, p)
    t1, t2, t3 = shape.text_len, shape.text_len_2, shape.image_tokens
    t = t1 + t2 + t3

    embed = [mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim)]
    if config["use_meanflow"]:
        embed.append(_parameters_only(mlp_embedder("timestep_embedder_r", TIMESTEP_CHANNELS, dim)))
    dual = dual_stream_block(dim=dim, heads=heads, head_dim=head_dim, video_tokens=n, text_tokens=t,
                             mlp_ratio=_mlp_ratio(config), qk_norm=qk_norm)
    return Node("transformer", children=(
        Node("x_embedder", children=(Node("proj", ops.conv(in_channels, dim, pt * p * p, n)),)),
        image_projection(positive_int(config, "image_embed_dim"), dim, t3),
        token_refiner(dim=dim, heads=heads, head_dim=head_dim, text_dim=positive_int(config, "text_embed_dim"),
                      tokens=t1, layers=count_int(config, "num_refiner_layers")),
        byt5_projection(positive_int(config, "text_embed_2_dim"), dim, t2),
        Node("time_embed", children=tuple(embed)),
        Node("cond_type_embed", ops.embedding(CONDITION_TYPES, dim)),
        module_list("transformer_blocks", [dual] * count_int(config, "num_layers")),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, pt * p * p * out_channels)),
    ), formula="hunyuan_video15_transformer")
