"""FLUX.1 transformer: ``FluxTransformer2DModel`` (diffusers ``models/transformers/transformer_flux.py``).

The pipeline packs the ``C × H/8 × W/8`` latent into 2×2 patches, so the model sees
``N = (H/16)(W/16)`` image tokens of ``in_channels = 4C`` features, and ``T`` T5 tokens.
FLUX.1 Kontext concatenates the packed latent of its reference image after them
(``FluxKontextPipeline``: ``torch.cat([latents, image_latents], dim=1)``): every layer, ``norm_out``
and ``proj_out`` included, runs on ``N + shape.reference_tokens`` image tokens (the pipeline keeps
the first N of the output).
Rotary embeddings (``FluxPosEmbed``) are elementwise and parameter-free.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.gradients import gradient_graph
from flopcalc.engine.gradients import Blocks, Layer, LoraFlow
from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.mmdit_joint_block import JOINT_BLOCK_FLOW, mmdit_joint_block
from flopcalc.formulas.single_stream_block import SINGLE_STREAM_BLOCK_FLOW, single_stream_block
from flopcalc.engine.registry import RunShape, register

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
#: :func:`flopcalc.engine.config.declare_keys` validates it.
FLUX_KEYS = declare_keys("FluxTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "num_single_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "joint_attention_dim": SIZE, "pooled_projection_dim": SIZE, "guidance_embeds": FLAG,
    "axes_dims_rope": SIZES,
})


@register("FluxTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_flux.py")
def flux_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    patch = positive_int(config, "patch_size")
    n = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    if shape.reference_tokens is not None:
        n = n + shape.reference_tokens
    embed, context, joint, single = flux_trunk(config, n, shape.text_len)
    return Node(
        "transformer",
        children=(
            Node("x_embedder", ops.linear(n, in_channels, dim)),
            embed,
            context,
            joint,
            single,
            ada_layer_norm_continuous("norm_out", dim, dim, n),
            Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="flux_transformer",
    )


def flux_trunk(config: Config, n: Any, t: Any, prepended: int = 0) -> tuple[Node, Node, Node, Node]:
    """What ``FluxTransformer2DModel`` and ``FluxControlNetModel`` share, on ``n`` image and ``t``
    text tokens: ``time_text_embed`` (timestep, with ``guidance_embeds`` guidance, and pooled-text
    embedders), ``context_embedder`` (``joint_attention_dim`` → d), ``num_layers`` dual-stream and
    ``num_single_layers`` single-stream blocks; the blocks see ``prepended`` more text tokens
    (the ControlNet-Union mode embedding, joined after ``context_embedder``)."""
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    embed = [mlp_embedder("timestep_embedder", 256, dim)]
    if config["guidance_embeds"]:
        embed.append(mlp_embedder("guidance_embedder", 256, dim))
    embed.append(mlp_embedder("text_embedder", positive_int(config, "pooled_projection_dim"), dim))
    joint = mmdit_joint_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t + prepended,
                              qk_norm="rms_norm")
    single = single_stream_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t + prepended)
    return (Node("time_text_embed", children=tuple(embed)),
            Node("context_embedder", ops.linear(t, positive_int(config, "joint_attention_dim"), dim)),
            module_list("transformer_blocks", [joint] * count_int(config, "num_layers")),
            module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")))


gradient_graph(
    "FluxTransformer2DModel",
    # transformer_flux.py:723-734: x_embedder(latents), time_text_embed(timestep[, guidance], pooled)
    # whose first linears read sinusoidal projections / the pooled CLIP embedding, context_embedder(T5)
    input_layers=("x_embedder", "context_embedder", "time_text_embed.*.linear_1"),
    # transformer_flux.py:759, 791: each dual- and single-stream block is checkpointed
    checkpointed=("transformer_blocks.*", "single_transformer_blocks.*"),
    source="diffusers/models/transformers/transformer_flux.py:723-791",
    lora=LoraFlow(
        steps=(
            Layer("x_embedder", ("latents",), "img"),  # transformer_flux.py:723
            Layer("context_embedder", ("text",), "txt"),  # :734
            Blocks("transformer_blocks", JOINT_BLOCK_FLOW),
            Blocks("single_transformer_blocks", SINGLE_STREAM_BLOCK_FLOW),  # :383-413
            Layer("proj_out", ("img",), "out"),  # :816
        ),
        # timestep / guidance / pooled-text embedders and every AdaLN modulation linear read temb only
        frozen=("time_text_embed.**", "transformer_blocks.*.norm1.linear", "transformer_blocks.*.norm1_context.linear",
                "single_transformer_blocks.*.norm.linear", "norm_out.linear"),
        default_targets=("attn.to_k", "attn.to_q", "attn.to_v", "attn.to_out.0", "attn.add_k_proj", "attn.add_q_proj",
                         "attn.add_v_proj", "attn.to_add_out", "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj",
                         "ff_context.net.2"),
        targets_source="diffusers examples/dreambooth/train_dreambooth_lora_flux.py, main(): target_modules "
                       "when --lora_layers is not given",
        source="diffusers/models/transformers/transformer_flux.py:76-140, 383-497, 723-816",
    ),
)
