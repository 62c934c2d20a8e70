"""HunyuanDiT: ``HunyuanDiT2DModel`` (diffusers ``models/transformers/hunyuan_transformer_2d.py``).

The latent (``C × H/8 × W/8``) is patchified by a strided convolution (``PatchEmbed`` without a
positional table: the blocks get 2-D rotary embeddings instead) into ``N = (H/8p)(W/8p)``
tokens. The text is the BERT states (``text_len``, 77) followed by the mT5 states projected to
the BERT width by ``text_embedder`` (``text_len_t5``, 256): every block cross-attends to all
``T = text_len + text_len_t5`` of them. The mT5 states are also attention-pooled into the
timestep embedding (``time_extra_emb``). Blocks after the middle one (``layer > num_layers // 2``)
take a long skip from the first half. The output is ``AdaLayerNormContinuous`` then ``proj_out``.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import FLAG, LAYERS, RATIO, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_continuous, mlp_embedder
from flopcalc.formulas.hunyuan_dit import (
    ACTIVATIONS,
    POOL_HEADS,
    hunyuan_dit_block,
    hunyuan_timestep_embedding,
)
from flopcalc.engine.perturbed_attention import selected, supports_perturbation
from flopcalc.engine.registry import RunShape, register

#: ``HunyuanDiT2DModel.__init__`` keyword defaults (hunyuan_transformer_2d.py).
DEFAULTS = {
    "num_attention_heads": 16,
    "attention_head_dim": 88,
    "in_channels": None,
    "patch_size": None,
    "activation_fn": "gelu-approximate",
    "sample_size": 32,
    "hidden_size": 1152,
    "num_layers": 28,
    "mlp_ratio": 4.0,
    "learn_sigma": True,
    "cross_attention_dim": 1024,
    "norm_type": "layer_norm",
    "cross_attention_dim_t5": 2048,
    "pooled_projection_dim": 1024,
    "text_len": 77,
    "text_len_t5": 256,
    "use_style_cond_and_image_meta_size": True,
}


def skip_layers(num_layers: int) -> int:
    """Blocks built with a long skip (``skip=layer > num_layers // 2``)."""
    return max(0, num_layers - num_layers // 2 - 1)


def skip_sources(num_layers: int) -> int:
    """Block outputs kept for the skips (``layer < num_layers // 2 - 1``): forward pops one per
    skip block, so the counts must agree (``num_layers`` even, or at most 1)."""
    return max(0, num_layers // 2 - 1)


def ff_inner_dim(dim: int, mlp_ratio: float) -> int:
    """``int(self.inner_dim * mlp_ratio)``, exactly as the model computes it (a float product)."""
    return int(dim * mlp_ratio)


def widths(config: Config) -> tuple[int, int]:
    """``(heads, dim)`` of the blocks: ``hidden_size`` must equal heads × head dim (the timestep embedding is
    ``hidden_size`` wide and feeds blocks that wide)."""
    heads = positive_int(config, "num_attention_heads")
    dim = heads * positive_int(config, "attention_head_dim")
    hidden = positive_int(config, "hidden_size")
    if hidden != dim:
        raise ConfigError(f"{config.component}/config.json: hidden_size {hidden} must equal num_attention_heads × "
                          f"attention_head_dim = {dim} (the blocks are that wide and take the {hidden}-wide "
                          "timestep embedding)")
    return heads, dim


def t5_width(config: Config) -> int:
    """``cross_attention_dim_t5``, which the attention pool splits into :data:`POOL_HEADS` heads."""
    t5_dim = positive_int(config, "cross_attention_dim_t5")
    if t5_dim % POOL_HEADS:
        raise ConfigError(f"{config.component}/config.json: cross_attention_dim_t5 {t5_dim} must divide into the "
                          f"attention pool's {POOL_HEADS} heads")
    return t5_dim


def feed_forward(config: Config) -> tuple[float, str]:
    """``(mlp_ratio, activation_fn)`` of the blocks' FeedForward."""
    mlp_ratio = config["mlp_ratio"]
    if isinstance(mlp_ratio, bool) or not isinstance(mlp_ratio, (int, float)) or mlp_ratio <= 0:
        raise ConfigError(f"{config.component}/config.json: 'mlp_ratio' must be a positive number, got {mlp_ratio!r}")
    activation = config["activation_fn"]
    if activation not in ACTIVATIONS:
        raise ConfigError(f"{config.component}/config.json: activation_fn {activation!r} is not a FeedForward "
                          f"activation (one of {', '.join(ACTIVATIONS)})")
    return mlp_ratio, activation


def _grid(config: Config, shape: RunShape, patch: int) -> tuple[Any, Any]:
    for side in (shape.latent_height, shape.latent_width):
        if isinstance(side, int) and side % patch:
            raise ResolutionError(f"HunyuanDiT latent sides must be multiples of patch_size {patch}: got "
                                  f"{shape.latent_height}×{shape.latent_width} latent (image ×8)")
    return ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)


def _text_tokens(config: Config, shape: RunShape) -> Any:
    """``T``: the model concatenates ``text_len`` BERT and ``text_len_t5`` mT5 states and only
    accepts that many (``text_embedding_padding`` is ``(text_len + text_len_t5, C)``)."""
    expected = count_int(config, "text_len") + count_int(config, "text_len_t5")
    t = shape.text_len
    if t is None:
        return expected
    if isinstance(t, int) and t != expected:
        raise ConfigError(f"{config.component}: HunyuanDiT2DModel takes exactly text_len + text_len_t5 = "
                          f"{expected} text tokens (BERT ⊕ mT5), not {t}")
    return t


#: Every config key ``HunyuanDiT2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("HunyuanDiT2DModel", {
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "in_channels": SIZE, "patch_size": SIZE,
    "activation_fn": TEXT, "sample_size": SIZE, "hidden_size": SIZE, "num_layers": LAYERS, "mlp_ratio": RATIO,
    "learn_sigma": FLAG, "cross_attention_dim": SIZE, "cross_attention_dim_t5": SIZE,
    "pooled_projection_dim": SIZE, "text_len": SIZE, "text_len_t5": SIZE,
    "use_style_cond_and_image_meta_size": FLAG, "norm_type": TEXT,
})


supports_perturbation("HunyuanDiT2DModel")


@register("HunyuanDiT2DModel", role="denoiser", defaults=DEFAULTS,
          source="diffusers/models/transformers/hunyuan_transformer_2d.py",
          nominal=RunShape(latent_height=64, latent_width=64))
def hunyuan_dit_transformer(config: Config, shape: RunShape) -> Node:
    heads, dim = widths(config)
    hidden = dim
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    out_channels = 2 * in_channels if config["learn_sigma"] else in_channels
    layers = count_int(config, "num_layers")
    if skip_layers(layers) != skip_sources(layers):
        raise ConfigError(f"{config.component}/config.json: num_layers {layers} cannot run: HunyuanDiT2DModel.forward "
                          f"pops {skip_layers(layers)} long skips but keeps {skip_sources(layers)} (use an even count)")
    context_dim = positive_int(config, "cross_attention_dim")
    t5_dim = t5_width(config)
    t5_tokens = count_int(config, "text_len_t5")
    bert_tokens = count_int(config, "text_len")
    mlp_ratio, activation = feed_forward(config)
    gh, gw = _grid(config, shape, patch)
    n, t = gh * gw, _text_tokens(config, shape)

    def block(skip: bool, identity: bool) -> Node:
        return hunyuan_dit_block(dim=dim, heads=heads, tokens=n, context_tokens=t, context_dim=context_dim,
                                 ff_inner_dim=ff_inner_dim(dim, mlp_ratio), activation=activation,
                                 skip=skip, identity_self_attention=identity)

    skips = skip_layers(layers)
    # perturbed-attention guidance: the self-attention modules are the blocks' attn1 (attn2 reads the text)
    chosen = selected(shape.perturbed, [f"blocks.{i}.attn1" for i in range(layers)], config.component)
    on = shape.perturbed is not None and shape.perturbed.identity
    blocks = [block(i >= layers - skips, on and f"blocks.{i}.attn1" in chosen) for i in range(layers)]
    return Node(
        "transformer",
        children=(
            mlp_embedder("text_embedder", t5_dim, 4 * t5_dim, context_dim, tokens=t5_tokens),
            Node("text_embedding_padding", ops.parameters((bert_tokens + t5_tokens) * context_dim)),
            Node("pos_embed", children=(Node("proj", ops.conv2d(in_channels, hidden, patch, gh, gw)),)),
            hunyuan_timestep_embedding(
                "time_extra_emb", dim=hidden, pooled_dim=positive_int(config, "pooled_projection_dim"),
                t5_tokens=t5_tokens, t5_dim=t5_dim,
                style_and_size=bool(config["use_style_cond_and_image_meta_size"]),
            ),
            module_list("blocks", blocks),
            ada_layer_norm_continuous("norm_out", dim, dim, n),
            Node("proj_out", ops.linear(n, dim, patch * patch * out_channels)),
        ),
        formula="hunyuan_dit_transformer",
    )
