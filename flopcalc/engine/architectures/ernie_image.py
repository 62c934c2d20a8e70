"""ERNIE-Image transformer: ``ErnieImageTransformer2DModel`` (diffusers
``models/transformers/transformer_ernie_image.py``).

A single-stream DiT on ``[image patches, text tokens]``. The pipeline hands it the VAE latent already patchified
2×2 (``C·4 × H/16 × W/16``: ``in_channels`` 128 for a 32-channel VAE); ``x_embedder.proj`` is a ``p × p``,
stride-``p`` ``Conv2d`` on it (``N = (H/16p)(W/16p)`` patches), ``text_proj`` maps the text encoder's states to
the width when ``text_in_dim`` differs from it (bias-free), the timestep goes through ``time_embedding`` and one
shared ``adaLN_modulation`` (d → 6d) that every block reads. ``num_layers`` blocks
(:mod:`flopcalc.formulas.ernie_image`), then ``final_norm`` (an affine-free LayerNorm modulated by a d → 2d
linear) and ``final_linear`` on *all* ``L = N + T`` tokens (the text rows are dropped afterwards). ``qk_layernorm``
false cannot be built in diffusers 0.42.1 (``ErnieImageAttention`` refuses ``qk_norm=None``): refused. The
rotary table (``ErnieImageEmbedND3``) is elementwise and parameter-free.
"""

from __future__ import annotations

from flopcalc.engine.config import FLAG, LAYERS, SIZE, SIZES, Config, boolean, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.ernie_image import ernie_image_block

SOURCE = "diffusers/models/transformers/transformer_ernie_image.py"

#: ``ErnieImageTransformer2DModel.__init__`` keyword defaults (transformer_ernie_image.py:301-315).
DEFAULTS = {
    "hidden_size": 3072,
    "num_attention_heads": 24,
    "num_layers": 24,
    "ffn_hidden_size": 8192,
    "in_channels": 128,
    "out_channels": 128,
    "patch_size": 1,
    "text_in_dim": 2560,
    "rope_axes_dim": [32, 48, 48],
    "qk_layernorm": True,
}

declare_keys("ErnieImageTransformer2DModel", {
    "hidden_size": SIZE, "num_attention_heads": SIZE, "num_layers": LAYERS, "ffn_hidden_size": SIZE,
    "in_channels": SIZE, "out_channels": SIZE, "patch_size": SIZE, "text_in_dim": SIZE, "rope_axes_dim": SIZES,
    "qk_layernorm": FLAG,
})


def _geometry(config: Config) -> tuple[int, int]:
    d, heads = positive_int(config, "hidden_size"), positive_int(config, "num_attention_heads")
    where = f"{config.component}/config.json"
    if d % heads:
        raise ConfigError(f"{where}: hidden_size {d} must divide by num_attention_heads {heads}")
    if not boolean(config, "qk_layernorm"):
        raise ConfigError(f"{where}: qk_layernorm false cannot be built by diffusers 0.42.1's ErnieImageAttention "
                          "(qk_norm=None is refused as an unknown qk_norm)")
    if sum(config["rope_axes_dim"]) > d // heads:
        raise ConfigError(f"{where}: sum(rope_axes_dim) = {sum(config['rope_axes_dim'])} exceeds the head width "
                          f"{d // heads}")
    return d, heads


@register("ErnieImageTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def ernie_image_transformer(config: Config, shape: RunShape) -> Node:
    """``ErnieImageTransformer2DModel.forward`` (:348-458) on the patchified latent grid ``shape.latent_height ×
    shape.latent_width`` (H/16 × W/16) and ``shape.text_len`` text tokens (padded to the batch's longest)."""
    d, heads = _geometry(config)
    p, c_in, c_out = (positive_int(config, k) for k in ("patch_size", "in_channels", "out_channels"))
    n = ops.exact_div(shape.latent_height, p) * ops.exact_div(shape.latent_width, p)
    t, text_in = shape.text_len, positive_int(config, "text_in_dim")
    seq = n + t
    children = [Node("x_embedder", children=(Node("proj", ops.conv(c_in, d, p * p, n)),))]
    if text_in != d:
        children.append(Node("text_proj", ops.linear(t, text_in, d, bias=False)))
    block = ernie_image_block(tokens=seq, dim=d, heads=heads, d_ff=positive_int(config, "ffn_hidden_size"))
    children += [
        mlp_embedder("time_embedding", d, d),
        Node("adaLN_modulation", children=(Node("1", ops.activation(d) + ops.linear(1, d, 6 * d)),)),
        module_list("layers", [block] * count_int(config, "num_layers")),
        Node("final_norm", children=(Node("norm", ops.layer_norm(seq, d, affine=False)),
                                      Node("linear", ops.linear(1, d, 2 * d)))),
        Node("final_linear", ops.linear(seq, d, p * p * c_out)),
    ]
    return Node("transformer", children=tuple(children), formula="ernie_image_transformer")
