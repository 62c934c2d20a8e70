"""Krea 2 transformer: ``Krea2Transformer2DModel`` (diffusers ``models/transformers/transformer_krea2.py``).

A single-stream DiT on ``[text, image]``. The pipeline packs the ``C × H/8 × W/8`` latent into ``p × p`` patches
(``N = (H/8p)(W/8p)`` tokens of ``in_channels = C·p²`` features, ``img_in``); the text arrives as ``T`` tokens ×
``num_text_layers`` tapped text-encoder hidden states, fused by ``text_fusion`` (two blocks across the layer axis
of each token, a ``projector`` over that axis, two blocks across the tokens) and projected by ``txt_in`` (an
RMSNorm and a GELU MLP). The timestep goes through ``time_embed`` (a 2-layer GELU MLP on a sinusoidal embedding)
and one shared ``time_mod_proj`` (d → 6d) that every block adds its own ``scale_shift_table`` to. ``num_layers``
blocks on all ``T + N`` tokens, then ``final_layer`` (a 2·d table, an RMSNorm and a linear d → ``in_channels``) on
the image tokens. Block formulas: :mod:`flopcalc.formulas.krea2`; the rotary table is elementwise.
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.krea2 import krea2_block, krea2_text_fusion_block

SOURCE = "diffusers/models/transformers/transformer_krea2.py"

#: ``Krea2Transformer2DModel.__init__`` keyword defaults (transformer_krea2.py:392-412).
DEFAULTS = {
    "in_channels": 64,
    "num_layers": 28,
    "attention_head_dim": 128,
    "num_attention_heads": 48,
    "num_key_value_heads": 12,
    "intermediate_size": 16384,
    "timestep_embed_dim": 256,
    "text_hidden_dim": 2560,
    "num_text_layers": 12,
    "text_num_attention_heads": 20,
    "text_num_key_value_heads": 20,
    "text_intermediate_size": 6912,
    "num_layerwise_text_blocks": 2,
    "num_refiner_text_blocks": 2,
    "axes_dims_rope": [32, 48, 48],
}

#: ``Krea2Pipeline``'s default ``patch_size`` (its own config, not the transformer's): 2×2 latent patches per token.
PATCH = 2

declare_keys("Krea2Transformer2DModel", {
    "in_channels": SIZE, "num_layers": LAYERS, "attention_head_dim": SIZE, "num_attention_heads": SIZE,
    "num_key_value_heads": SIZE, "intermediate_size": SIZE, "timestep_embed_dim": SIZE, "text_hidden_dim": SIZE,
    "num_text_layers": SIZE, "text_num_attention_heads": SIZE, "text_num_key_value_heads": SIZE,
    "text_intermediate_size": SIZE, "num_layerwise_text_blocks": LAYERS, "num_refiner_text_blocks": LAYERS,
    "axes_dims_rope": SIZES,
})


def _heads(config: Config, width: int, heads_key: str, kv_key: str) -> tuple[int, int]:
    heads, kv = positive_int(config, heads_key), positive_int(config, kv_key)
    where = f"{config.component}/config.json"
    if width % heads:
        raise ConfigError(f"{where}: the width {width} must divide by {heads_key} {heads} (Krea2Attention refuses it)")
    if heads % kv:
        raise ConfigError(f"{where}: {heads_key} {heads} must be a multiple of {kv_key} {kv}")
    return heads, kv


@register("Krea2Transformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def krea2_transformer(config: Config, shape: RunShape) -> Node:
    """``Krea2Transformer2DModel.forward`` (:457-531) on ``N`` packed image tokens and ``shape.text_len`` text tokens."""
    head_dim = positive_int(config, "attention_head_dim")
    if sum(config["axes_dims_rope"]) != head_dim:
        raise ConfigError(f"{config.component}/config.json: sum(axes_dims_rope) = {sum(config['axes_dims_rope'])} must "
                          f"equal attention_head_dim {head_dim}")
    d = head_dim * positive_int(config, "num_attention_heads")
    heads, kv = _heads(config, d, "num_attention_heads", "num_key_value_heads")
    td = positive_int(config, "text_hidden_dim")
    t_heads, t_kv = _heads(config, td, "text_num_attention_heads", "text_num_key_value_heads")
    layers, c = positive_int(config, "num_text_layers"), positive_int(config, "in_channels")
    n = ops.exact_div(shape.latent_height, PATCH) * ops.exact_div(shape.latent_width, PATCH)
    t = shape.text_len
    t_ff = positive_int(config, "text_intermediate_size")
    t_dim = positive_int(config, "timestep_embed_dim")
    fusion = Node("text_fusion", children=(
        module_list("layerwise_blocks", [krea2_text_fusion_block(sequences=t, length=layers, dim=td, heads=t_heads,
                                                                 kv_heads=t_kv, d_ff=t_ff)]
                    * count_int(config, "num_layerwise_text_blocks")),
        Node("projector", ops.linear(t * td, layers, 1, bias=False)),
        module_list("refiner_blocks", [krea2_text_fusion_block(sequences=1, length=t, dim=td, heads=t_heads,
                                                               kv_heads=t_kv, d_ff=t_ff)]
                    * count_int(config, "num_refiner_text_blocks")),
    ))
    block = krea2_block(tokens=t + n, dim=d, heads=heads, kv_heads=kv, d_ff=positive_int(config, "intermediate_size"))
    return Node("transformer", children=(
        Node("img_in", ops.linear(n, c, d)),
        Node("time_embed", children=(Node("linear_1", ops.linear(1, t_dim, d) + ops.activation(d)),
                                     Node("linear_2", ops.linear(1, d, d)))),
        Node("time_mod_proj", ops.activation(d) + ops.linear(1, d, 6 * d)),
        fusion,
        Node("txt_in", children=(Node("norm", ops.rms_norm(t, td)),
                                 Node("linear_1", ops.linear(t, td, d) + ops.activation(t * d)),
                                 Node("linear_2", ops.linear(t, d, d)))),
        module_list("transformer_blocks", [block] * count_int(config, "num_layers")),
        Node("final_layer", ops.parameters(2 * d), (Node("norm", ops.rms_norm(n, d)),
                                                    Node("linear", ops.linear(n, d, c)))),
    ), formula="krea2_transformer")


# transformer_krea2.py:388 _keep_in_fp32_modules: every Krea2RMSNorm's zero-centred gain stays in float32
loading_rules("Krea2Transformer2DModel", keep_in_fp32=("norm", "norm1", "norm2", "norm_q", "norm_k"), source=SOURCE)
