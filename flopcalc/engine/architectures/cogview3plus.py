"""CogView3-Plus transformer: ``CogView3PlusTransformer2DModel`` (diffusers
``models/transformers/transformer_cogview3plus.py``); block formula in ``formulas/cogview3plus.py``.

``CogView3PlusPipeline`` hands it the ``C × H/8 × W/8`` latent and the T5 states (``text_embed_dim`` wide):

* ``patch_embed`` (``CogView3PlusPatchEmbed``, embeddings.py:579-632): ``proj`` on the ``N = (H/8p)(W/8p)`` patches
  (``C·p²`` features each) and ``text_proj`` on the T text tokens, then a slice of the fixed sin-cos table
  (``pos_embed``, a non-persistent float32 buffer of ``pos_embed_max_size² × d``) added to the image tokens;
* ``time_condition_embed`` (``CogView3CombinedTimestepSizeEmbeddings``, embeddings.py:1393-1423): the d-wide
  sinusoidal timestep through ``timestep_embedder`` (d → d_t → d_t) plus the 3·2 size conditions through
  ``condition_embedder`` (6·``condition_dim`` → d_t → d_t), once per sample;
* ``num_layers`` blocks on the T + N tokens; ``norm_out`` (``AdaLayerNormContinuous`` without affine: d_t → 2d on
  the conditioning, a LayerNorm on the N image tokens) and ``proj_out`` (d → p²·``out_channels``).
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ResolutionError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.cogview3plus import cogview3plus_block
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder

#: ``CogView3PlusTransformer2DModel.__init__`` keyword defaults (transformer_cogview3plus.py:169-183).
DEFAULTS = {
    "patch_size": 2, "in_channels": 16, "num_layers": 30, "attention_head_dim": 40, "num_attention_heads": 64,
    "out_channels": 16, "text_embed_dim": 4096, "time_embed_dim": 512, "condition_dim": 256,
    "pos_embed_max_size": 128, "sample_size": 128,
}
#: ``pooled_projection_dim = 3 * 2 * condition_dim``: original size, crop and target size, two values each.
CONDITION_VALUES = 6

#: Every config key ``CogView3PlusTransformer2DModel`` reads (assembler, loading rules and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("CogView3PlusTransformer2DModel", {
    "patch_size": SIZE, "in_channels": SIZE, "num_layers": LAYERS, "attention_head_dim": SIZE,
    "num_attention_heads": SIZE, "out_channels": SIZE, "text_embed_dim": SIZE, "time_embed_dim": SIZE,
    "condition_dim": SIZE, "pos_embed_max_size": SIZE, "sample_size": SIZE,
})


@register("CogView3PlusTransformer2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/transformer_cogview3plus.py")
def cogview3plus_transformer(config: Config, shape: RunShape) -> Node:
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    patch = positive_int(config, "patch_size")
    time_dim = positive_int(config, "time_embed_dim")
    grid_h, grid_w = ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)
    table = positive_int(config, "pos_embed_max_size")
    if any(isinstance(side, int) and side > table for side in (grid_h, grid_w)):
        raise ResolutionError(f"{config.component}: a {grid_h}×{grid_w} patch grid exceeds the sin-cos table of "
                              f"pos_embed_max_size {table} (the model slices pos_embed[:h, :w]): at most "
                              f"{table * patch} latent pixels a side")
    n, t = grid_h * grid_w, shape.text_len
    block = cogview3plus_block(dim=dim, heads=heads, head_dim=head_dim, time_dim=time_dim, image_tokens=n,
                               text_tokens=t)
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
        ada_layer_norm_continuous("norm_out", dim, time_dim, n),
        Node("proj_out", ops.linear(n, dim, patch * patch * positive_int(config, "out_channels"))),
    ), formula="cogview3plus_transformer")


# embeddings.py:600-604 (CogView3PlusPatchEmbed): the sin-cos table, pos_embed_max_size² × inner_dim, registered as a
# non-persistent float32 buffer
loading_rules(
    "CogView3PlusTransformer2DModel",
    buffers=lambda c: (Buffer("patch_embed.pos_embed", positive_int(c, "pos_embed_max_size") ** 2
                              * positive_int(c, "num_attention_heads") * positive_int(c, "attention_head_dim"),
                              "float32"),),
    source="diffusers/models/embeddings.py:600-604",
)
