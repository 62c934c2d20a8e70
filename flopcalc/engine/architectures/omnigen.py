"""OmniGen transformer: ``OmniGenTransformer2DModel`` (diffusers ``models/transformers/transformer_omnigen.py``).

OmniGen has no separate text encoder: the transformer is a Phi-3 decoder that embeds the instruction's token ids
itself (``embed_tokens``) and runs every step on the whole sequence ``[condition tokens, time token, image
patches]``. The latent ``C × H/8 × W/8`` is cut into ``p × p`` patches (``output_image_proj``): ``N = (H/8p)(W/8p)``
image tokens; the condition is ``shape.text_len`` token embeddings plus, when the instruction holds input images
(editing), ``shape.reference_tokens`` tokens of those images' VAE latents, patch-embedded by ``input_image_proj``
and written over the placeholder ids of the instruction (``_get_multimodal_embeddings``, :388-405). The blocks,
the final ``norm`` and the rotary table run on all ``L = text_len + reference_tokens + 1 + N`` tokens; ``norm_out``
and ``proj_out`` on the last ``N``. Block formulas: :mod:`flopcalc.formulas.omnigen`.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    Int, LAYERS, ListOf, NULL, Nested, Real, SIZE, TEXT, Config, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.omnigen import omnigen_block, omnigen_rotary_embedding, patch_conv

SOURCE = "diffusers/models/transformers/transformer_omnigen.py"

#: ``OmniGenTransformer2DModel.__init__`` keyword defaults (transformer_omnigen.py:329-350).
DEFAULTS = {
    "in_channels": 4,
    "patch_size": 2,
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 8192,
    "num_layers": 32,
    "pad_token_id": 32000,
    "vocab_size": 32064,
    "rope_scaling": None,
    "pos_embed_max_size": 192,
    "time_step_dim": 256,
}

_FACTORS = ListOf(Real(0.0, 1e6), lo=1, hi=2**16)

#: Every config key ``OmniGenTransformer2DModel`` reads (assembler and pipeline plan).
declare_keys("OmniGenTransformer2DModel", {
    "in_channels": SIZE, "patch_size": SIZE, "hidden_size": SIZE, "num_attention_heads": SIZE,
    "num_key_value_heads": SIZE, "intermediate_size": SIZE, "num_layers": LAYERS, "pad_token_id": Int(-(2**31), 2**31) | NULL,
    "vocab_size": SIZE, "pos_embed_max_size": SIZE, "time_step_dim": SIZE,
    "rope_scaling": Nested({"short_factor": _FACTORS, "long_factor": _FACTORS, "type": TEXT}),
})


def _geometry(config: Config) -> tuple[int, int, int]:
    """(width d, heads h, head width d_h), refusing what the real module cannot build or run."""
    d, heads = positive_int(config, "hidden_size"), positive_int(config, "num_attention_heads")
    where = f"{config.component}/config.json"
    if d % heads:
        raise ConfigError(f"{where}: hidden_size {d} must divide by num_attention_heads {heads} (OmniGenBlock's "
                          f"attention reshapes its {d}-wide queries into heads of hidden_size // heads)")
    if d % 4:
        raise ConfigError(f"{where}: hidden_size {d} must be a multiple of 4 (OmniGenPatchEmbed builds a 2-D "
                          "sin-cos position table, half the width per axis, each half even)")
    if positive_int(config, "num_key_value_heads") != heads:
        raise ConfigError(f"{where}: num_key_value_heads must equal num_attention_heads ({heads}): "
                          "OmniGenAttnProcessor2_0 calls scaled_dot_product_attention without expanding the "
                          "key/value heads, which fails for grouped-query attention")
    pad, vocab = config["pad_token_id"], positive_int(config, "vocab_size")
    if pad is not None and not -vocab <= pad < vocab:
        raise ConfigError(f"{where}: pad_token_id {pad!r} must be an integer index into the {vocab}-entry "
                          "embed_tokens (nn.Embedding refuses it otherwise)")
    scaling = config["rope_scaling"]
    freqs = (d // heads + 1) // 2
    if not isinstance(scaling, dict) or "short_factor" not in scaling or "long_factor" not in scaling:
        raise ConfigError(f"{where}: rope_scaling must give short_factor and long_factor (OmniGenSuScaledRotary"
                          f"Embedding reads both; the class default null cannot be built)")
    for key in ("short_factor", "long_factor"):
        n = len(scaling[key]) if isinstance(scaling[key], list) else 0
        if n not in (1, freqs):
            raise ConfigError(f"{where}: rope_scaling.{key} has {n} entries; the rotary table has {freqs} "
                              f"frequencies (head width {d // heads}), and the two must broadcast")
    return d, heads, d // heads


@register("OmniGenTransformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def omnigen_transformer(config: Config, shape: RunShape) -> Node:
    """``OmniGenTransformer2DModel.forward`` (:407-496) on one row: ``shape.text_len`` instruction tokens
    (``shape.reference_tokens`` more of input images), the time token and the latent's patches."""
    d, heads, head_dim = _geometry(config)
    c, p = positive_int(config, "in_channels"), positive_int(config, "patch_size")
    limit = positive_int(config, "pos_embed_max_size")
    rows, cols = ops.exact_div(shape.latent_height, p), ops.exact_div(shape.latent_width, p)
    for side, value in (("height", rows), ("width", cols)):
        if isinstance(value, int) and value > limit:
            raise ResolutionError(f"OmniGen: the latent {side} in patches ({value}) exceeds pos_embed_max_size "
                                  f"{limit} (OmniGenPatchEmbed._cropped_pos_embed raises): at most "
                                  f"{limit * p * 8} pixels")
    n = rows * cols
    images = shape.reference_tokens or 0
    condition = shape.text_len + images
    seq = condition + 1 + n
    t_dim = positive_int(config, "time_step_dim")
    layer = omnigen_block(tokens=seq, dim=d, heads=heads, d_ff=positive_int(config, "intermediate_size"))
    return Node("transformer", children=(
        Node("patch_embedding", children=(
            Node("output_image_proj", patch_conv(n, c, d, p)),
            Node("input_image_proj", patch_conv(images, c, d, p)),
        )),
        mlp_embedder("time_token", t_dim, d),
        mlp_embedder("t_embedder", t_dim, d),
        Node("embed_tokens", ops.embedding(positive_int(config, "vocab_size"), d)),
        omnigen_rotary_embedding("rope", seq, head_dim),
        module_list("layers", [layer] * count_int(config, "num_layers")),
        Node("norm", ops.rms_norm(seq, d)),
        ada_layer_norm_continuous("norm_out", d, d, n),
        Node("proj_out", ops.linear(n, d, p * p * c)),
    ), formula="omnigen_transformer")


def _buffers(config: Config) -> tuple[Buffer, ...]:
    """``patch_embedding.pos_embed`` (persistent, float32 at creation: the 2-D sin-cos table of
    ``pos_embed_max_size²`` positions, :72-79) and the rotary ``rope.inv_freq`` (non-persistent float32, :147)."""
    d, heads, head_dim = _geometry(config)
    size = positive_int(config, "pos_embed_max_size")
    return (Buffer("patch_embedding.pos_embed", size * size * d, "loaded"),
            Buffer("rope.inv_freq", (head_dim + 1) // 2, "float32"))


loading_rules("OmniGenTransformer2DModel", buffers=_buffers, source=SOURCE)
