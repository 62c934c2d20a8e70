"""FLUX.1 transformer: ``FluxTransformer2DModel`` (diffusers ``models/transformers/transformer_flux.py``).

The pipeline packs the ``C × H/8 × W/8`` latent into 2×2 patches, so the model sees
``N = (H/16)(W/16)`` image tokens of ``in_channels = 4C`` features, and ``T`` T5 tokens.
Rotary embeddings (``FluxPosEmbed``) are elementwise and parameter-free.
"""

from __future__ import annotations

from flopcalc.config import FLAG, LAYERS, NULL, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.mmdit_joint_block import mmdit_joint_block
from flopcalc.formulas.single_stream_block import single_stream_block
from flopcalc.registry import RunShape, register

#: ``FluxTransformer2DModel.__init__`` keyword defaults (transformer_flux.py).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 64,
    "out_channels": None,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "pooled_projection_dim": 768,
    "guidance_embeds": False,
    "axes_dims_rope": [16, 56, 56],
}

#: FluxPipeline packs 2×2 latent patches into one token.
PACKING = 2


#: Every config key ``FluxTransformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("FluxTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "num_single_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "joint_attention_dim": SIZE, "pooled_projection_dim": SIZE, "guidance_embeds": FLAG,
    "axes_dims_rope": SIZES,
})


@register("FluxTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_flux.py")
def flux_transformer(config: Config, shape: RunShape) -> Node:
    heads = positive_int(config, "num_attention_heads")
    head_dim = positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    patch = positive_int(config, "patch_size")
    pooled = positive_int(config, "pooled_projection_dim")
    n = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    t = shape.text_len

    embed = [mlp_embedder("timestep_embedder", 256, dim)]
    if config["guidance_embeds"]:
        embed.append(mlp_embedder("guidance_embedder", 256, dim))
    embed.append(mlp_embedder("text_embedder", pooled, dim))

    joint = mmdit_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t,
                              qk_norm="rms_norm")
    single = single_stream_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t)
    return Node(
        "transformer",
        children=(
            Node("x_embedder", ops.linear(n, in_channels, dim)),
            Node("time_text_embed", children=tuple(embed)),
            Node("context_embedder", ops.linear(t, positive_int(config, "joint_attention_dim"), dim)),
            module_list("transformer_blocks", [joint] * count_int(config, "num_layers")),
            module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")),
            ada_layer_norm_continuous("norm_out", dim, dim, n),
            Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="flux_transformer",
    )
