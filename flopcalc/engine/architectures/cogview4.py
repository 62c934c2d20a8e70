"""CogView4: ``CogView4Transformer2DModel`` (diffusers ``models/transformers/transformer_cogview4.py``).

``forward``: ``rope`` (the 2-D rotary table of the image patches: broadcast products, no matmul),
``patch_embed`` (``proj``: a linear of each p × p latent patch to the width d, and ``text_proj``: the
text states from ``text_embed_dim`` to d, both with bias), ``time_condition_embed``
(``CogView3CombinedTimestepSizeEmbeddings``: ``timestep_embedder`` from the d-wide sinusoidal timestep
to ``time_embed_dim``, ``condition_embedder`` from the 6 · ``condition_dim`` sinusoids of original size,
crop and target size to ``time_embed_dim``), ``num_layers``
:func:`~flopcalc.formulas.cogview4.cogview4_block` blocks, ``norm_out``
(``CogView4AdaLayerNormContinuous``: a LayerNorm without affine and a linear of the timestep
embedding to scale and shift, no activation) and ``proj_out``. ``pos_embed_max_size`` builds nothing.
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.cogview4 import cogview4_block
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.engine.registry import RunShape, register

#: ``CogView4Transformer2DModel.__init__`` keyword defaults.
DEFAULTS = {
    "patch_size": 2, "in_channels": 16, "out_channels": 16, "num_layers": 30, "attention_head_dim": 40,
    "num_attention_heads": 64, "text_embed_dim": 4096, "time_embed_dim": 512, "condition_dim": 256,
    "pos_embed_max_size": 128, "sample_size": 128, "rope_axes_dim": [256, 256],
}
#: ``pooled_projection_dim = 3 * 2 * condition_dim``: original size, crop and target size, two values each.
CONDITION_VALUES = 6


#: Every config key ``CogView4Transformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("CogView4Transformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE, "num_layers": LAYERS, "attention_head_dim": SIZE,
    "num_attention_heads": SIZE, "text_embed_dim": SIZE, "time_embed_dim": SIZE, "condition_dim": SIZE,
    "pos_embed_max_size": SIZE, "sample_size": SIZE, "rope_axes_dim": SIZES,
})


@register("CogView4Transformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_cogview4.py")
def cogview4_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    if head_dim % 4:
        raise ConfigError(f"{config.component}/config.json: attention_head_dim {head_dim} must be a multiple of 4 "
                          "(CogView4RotaryPosEmbed splits each head between the two image axes)")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    time_dim = positive_int(config, "time_embed_dim")
    n = ops.exact_div(shape.latent_height, patch) * ops.exact_div(shape.latent_width, patch)
    t = shape.text_len
    block = cogview4_block(dim=dim, heads=heads, head_dim=head_dim, time_dim=time_dim, image_tokens=n, text_tokens=t)
    return Node("transformer", children=(
        Node("patch_embed", children=(
            Node("proj", ops.linear(n, positive_int(config, "in_channels") * patch * patch, dim)),
            Node("text_proj", ops.linear(t, positive_int(config, "text_embed_dim"), dim)),
        )),
        Node("time_condition_embed", children=(
            mlp_embedder("timestep_embedder", dim, time_dim),
            mlp_embedder("condition_embedder", CONDITION_VALUES * positive_int(config, "condition_dim"), time_dim),
        )),
        module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
        Node("norm_out", children=(
            Node("linear", ops.linear(1, time_dim, 2 * dim)),
            Node("norm", ops.layer_norm(n, dim, affine=False)),
        )),
        Node("proj_out", ops.linear(n, dim, patch * patch * positive_int(config, "out_channels"))),
    ), formula="cogview4_transformer")
