"""Ovis-Image transformer: ``OvisImageTransformer2DModel`` (diffusers ``models/transformers/transformer_ovis_image.py``).

A FLUX.1-layout MMDiT: the pipeline packs the ``C × H/8 × W/8`` latent into 2×2 patches, so the model sees
``N = (H/16)(W/16)`` image tokens of ``in_channels = 4C`` features, and ``T`` text tokens (Qwen3 hidden states of
``joint_attention_dim`` features, RMS-normed by ``context_embedder_norm`` before ``context_embedder``). No pooled
text and no guidance embedding: the timestep alone conditions the blocks (``timestep_embedder``). ``num_layers``
double-stream and ``num_single_layers`` single-stream blocks (:mod:`flopcalc.formulas.ovis_image`), then
``norm_out`` and ``proj_out`` on the image tokens. Rotary embeddings (``OvisImagePosEmbed``) are elementwise and
parameter-free.
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, NULL, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.ovis_image import ovis_image_double_block, ovis_image_single_block

SOURCE = "diffusers/models/transformers/transformer_ovis_image.py"

#: ``OvisImageTransformer2DModel.__init__`` keyword defaults (transformer_ovis_image.py:424-436).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 64,
    "out_channels": 64,
    "num_layers": 6,
    "num_single_layers": 27,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 2048,
    "axes_dims_rope": [16, 56, 56],
}

#: The pipeline packs 2×2 latent patches into one token.
PACKING = 2

declare_keys("OvisImageTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "num_layers": LAYERS,
    "num_single_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE,
    "axes_dims_rope": SIZES,
})


def _head_dim(config: Config) -> int:
    """The head width, which the rotary axes must fill exactly (``apply_rotary_emb`` multiplies per channel)."""
    head_dim = positive_int(config, "attention_head_dim")
    axes = config["axes_dims_rope"]
    if sum(axes) != head_dim:
        raise ConfigError(f"{config.component}/config.json: sum(axes_dims_rope) = {sum(axes)} must equal "
                          f"attention_head_dim {head_dim} (the rotary table spans one head)")
    return head_dim


@register("OvisImageTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def ovis_image_transformer(config: Config, shape: RunShape) -> Node:
    """``OvisImageTransformer2DModel.forward`` (:477-585) on ``N`` packed image tokens and ``shape.text_len``."""
    heads, head_dim = positive_int(config, "num_attention_heads"), _head_dim(config)
    dim = heads * head_dim
    c_in, patch = positive_int(config, "in_channels"), positive_int(config, "patch_size")
    c_out = config["out_channels"] or c_in
    jad = positive_int(config, "joint_attention_dim")
    n = ops.exact_div(shape.latent_height, PACKING) * ops.exact_div(shape.latent_width, PACKING)
    t = shape.text_len
    double = ovis_image_double_block(dim=dim, heads=heads, head_dim=head_dim, image_tokens=n, text_tokens=t)
    single = ovis_image_single_block(dim=dim, heads=heads, head_dim=head_dim, tokens=n + t)
    return Node("transformer", children=(
        mlp_embedder("timestep_embedder", 256, dim),
        Node("context_embedder_norm", ops.rms_norm(t, jad)),
        Node("context_embedder", ops.linear(t, jad, dim)),
        Node("x_embedder", ops.linear(n, c_in, dim)),
        module_list("transformer_blocks", [double] * count_int(config, "num_layers")),
        module_list("single_transformer_blocks", [single] * count_int(config, "num_single_layers")),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, patch * patch * c_out)),
    ), formula="ovis_image_transformer")
