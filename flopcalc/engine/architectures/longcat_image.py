"""LongCat-Image transformer: ``LongCatImageTransformer2DModel`` (diffusers
``models/transformers/transformer_longcat_image.py``).

Layer for layer the Bria transformer (:mod:`flopcalc.engine.architectures.bria`): FLUX.1's double- and
single-stream blocks (``LongCatImageTransformerBlock`` :269-350, ``LongCatImageSingleTransformerBlock``
:215-265, the same layers as FLUX's), ``time_embed`` (``LongCatImageTimestepEmbeddings``: a sinusoidal
projection and ``timestep_embedder``), ``context_embedder`` (``joint_attention_dim`` → d, Qwen2.5-VL's hidden
states), ``x_embedder`` on the 2×2-packed latent, ``norm_out`` and ``proj_out`` (d → p²·in_channels). No guidance
or pooled-text embedding is built (``pooled_projection_dim`` is stored and unused; the forward's ``guidance`` is
ignored).
"""

from __future__ import annotations

from flopcalc.engine.architectures.bria import bria_head, bria_trunk, packed_tokens
from flopcalc.engine.config import LAYERS, SIZE, SIZES, Config, declare_keys
from flopcalc.engine.cost import Node
from flopcalc.engine.registry import RunShape, register

SOURCE = "diffusers/models/transformers/transformer_longcat_image.py"

#: ``LongCatImageTransformer2DModel.__init__`` keyword defaults (transformer_longcat_image.py:411-423).
DEFAULTS = {
    "patch_size": 1,
    "in_channels": 64,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 3584,
    "pooled_projection_dim": 3584,
    "axes_dims_rope": [16, 56, 56],
}

declare_keys("LongCatImageTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "num_layers": LAYERS, "num_single_layers": LAYERS,
    "attention_head_dim": SIZE, "num_attention_heads": SIZE, "joint_attention_dim": SIZE,
    "pooled_projection_dim": SIZE, "axes_dims_rope": SIZES,
})


@register("LongCatImageTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def longcat_image_transformer(config: Config, shape: RunShape) -> Node:
    """``LongCatImageTransformer2DModel.forward`` (:464-548) on ``N`` packed image tokens (the edit pipeline
    appends the input image's packed latent: ``shape.reference_tokens`` more) and ``shape.text_len``."""
    n = packed_tokens(shape)
    if shape.reference_tokens is not None:
        n = n + shape.reference_tokens
    return Node("transformer", children=(*bria_trunk(config, n, shape.text_len, False), *bria_head(config, n)),
                formula="longcat_image_transformer")
