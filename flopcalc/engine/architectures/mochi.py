"""Mochi video transformer: ``MochiTransformer3DModel`` (diffusers ``models/transformers/transformer_mochi.py``), an
asymmetric joint-attention DiT (a ``d``-wide video stream, a ``pooled_projection_dim``-wide text stream); block
formulas in ``formulas/mochi.py``.

The model sees the ``C × F × h × w`` latent and ``T`` T5 tokens of width ``text_embed_dim`` (transformer_mochi.py:441):

* ``time_embed`` (``MochiCombinedTimestepCaptionEmbedding``): the timestep MLP, the attention pooler of the text
  states (added to it: the conditioning vector) and ``caption_proj`` (the text stream);
* ``patch_embed`` (``PatchEmbed``, no position table): a ``p × p`` stride-``p`` Conv2d per latent frame, giving
  ``N = F · (h/p) · (w/p)`` tokens (the latent must split into whole patches: the output
  reshape, transformer_mochi.py:488-490, needs it);
* ``rope`` (``MochiRoPE``): positions times ``pos_frequencies`` (one einsum), cos and sin;
* ``num_layers`` ``MochiTransformerBlock``s, the last one ``context_pre_only``;
* ``norm_out`` (``AdaLayerNormContinuous``, no affine) and ``proj_out`` (d → p²·``out_channels``).
"""

from __future__ import annotations

from flopcalc.engine.config import LAYERS, NULL, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous
from flopcalc.formulas.mochi import mochi_rope, mochi_time_embed, mochi_transformer_block
from flopcalc.engine.registry import RunShape, register

#: ``MochiTransformer3DModel.__init__`` keyword defaults (transformer_mochi.py:343-357).
DEFAULTS = {
    "patch_size": 2,
    "num_attention_heads": 24,
    "attention_head_dim": 128,
    "num_layers": 48,
    "pooled_projection_dim": 1536,
    "in_channels": 12,
    "out_channels": None,
    "qk_norm": "rms_norm",
    "text_embed_dim": 4096,
    "time_embed_dim": 256,
    "activation_fn": "swiglu",
    "max_sequence_length": 256,
}
SOURCE = "diffusers/models/transformers/transformer_mochi.py"

declare_keys("MochiTransformer3DModel", {
    "patch_size": SIZE, "num_attention_heads": SIZE, "attention_head_dim": SIZE, "num_layers": LAYERS,
    "pooled_projection_dim": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL, "qk_norm": TEXT,
    "text_embed_dim": SIZE, "time_embed_dim": SIZE, "activation_fn": TEXT, "max_sequence_length": SIZE,
})

#: The attention pooler's heads (``num_attention_heads=8`` in transformer_mochi.py:375, not a config key).
POOLER_HEADS = 8


def _refuse_unsupported(config: Config) -> None:
    if config["activation_fn"] != "swiglu":
        raise ConfigError(f"{config.component}/config.json: activation_fn must be 'swiglu' (the only feed-forward "
                          f"flopcalc counts for Mochi), got {config['activation_fn']!r}")
    if positive_int(config, "text_embed_dim") % POOLER_HEADS:
        raise ConfigError(f"{config.component}/config.json: text_embed_dim must divide into the attention pooler's "
                          f"{POOLER_HEADS} heads, got {config['text_embed_dim']}")


@register("MochiTransformer3DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def mochi_transformer(config: Config, shape: RunShape) -> Node:
    """One forward on the ``F × h × w`` latent (``shape.latent_frames``; 1 when unset) and ``shape.text_len`` text
    tokens, every text token valid (see ``formulas/mochi.py``)."""
    _refuse_unsupported(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    dim = heads * head_dim
    p = positive_int(config, "patch_size")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    # forward's final reshape (transformer_mochi.py:488-490) needs whole patches
    grid_h, grid_w = ops.exact_div(shape.latent_height, p), ops.exact_div(shape.latent_width, p)
    n = frames * grid_h * grid_w
    text, text_dim = shape.text_len, positive_int(config, "pooled_projection_dim")
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    layers = count_int(config, "num_layers")
    block = dict(dim=dim, heads=heads, head_dim=head_dim, text_dim=text_dim, tokens=n, text_tokens=text)
    blocks = [mochi_transformer_block(**block, context_pre_only=i == layers - 1) for i in range(layers)]
    children = (
        Node("patch_embed", children=(Node("proj", ops.conv2d(in_channels, dim, p, frames * grid_h, grid_w)),)),
        mochi_time_embed(dim=dim, text_dim=text_dim, text_embed_dim=positive_int(config, "text_embed_dim"),
                         time_embed_dim=positive_int(config, "time_embed_dim"), text_tokens=text,
                         pool_heads=POOLER_HEADS),
        Node("pos_frequencies", ops.parameters(3 * heads * (head_dim // 2))),
        mochi_rope(tokens=n, heads=heads, head_dim=head_dim),
        module_list("transformer_blocks", blocks),
        ada_layer_norm_continuous("norm_out", dim, dim, n),
        Node("proj_out", ops.linear(n, dim, p * p * int(out_channels))),
    )
    return Node("transformer", children=children, formula="mochi_transformer")
