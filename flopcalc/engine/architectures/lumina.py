r"""Lumina DiTs: ``Lumina2Transformer2DModel`` (Lumina-Image-2.0, diffusers
``models/transformers/transformer_lumina2.py``) and ``LuminaNextDiT2DModel`` (Lumina-Next,
``models/transformers/lumina_nextdit2d.py``). Block formulas: :mod:`flopcalc.formulas.lumina`.

Both patchify the ``C × h × w`` latent with a linear layer on ``p × p`` patches into
:math:`N = (h/p)(w/p)` tokens, and condition on :math:`T` caption tokens and one vector
``temb`` of width :math:`c = \min(d, 1024)`.

**Lumina-Image-2.0** refines the caption (``context_refiner``, :math:`T` tokens, unmodulated
blocks) and the image (``noise_refiner``, :math:`N` tokens) apart, then runs the joint
``layers`` on the concatenation, :math:`L = T_\text{eff} + N` tokens, where
:math:`T_\text{eff}` is the caption mask's sum (``Lumina2RotaryPosEmbed``: the joint sequence
holds only the valid caption tokens). flopcalc counts a full mask, :math:`T_\text{eff} = T`:
the upper bound, and the run the pipeline makes when the prompt fills ``max_sequence_length``.
``norm_out`` projects all :math:`L` tokens; the caption rows are dropped afterwards.

.. math::

   \mathrm{MACs} = N p^2 C d + (256 c + c^2) + T d_\text{cap} d
     + R\,[B_0(T) + B(N)] + K\,B(T + N) + c d + (T + N)\,d\,p^2 C_\text{out}

with :math:`B` the block of :mod:`flopcalc.formulas.lumina` (:math:`B_0` without modulation),
:math:`R` ``num_refiner_layers`` and :math:`K` ``num_layers``.

**Lumina-Next** runs ``num_layers`` blocks on the :math:`N` image tokens, each with gated
cross-attention to the :math:`T` caption tokens; the caption also enters ``temb`` mean-pooled
(one vector through ``caption_embedder``):

.. math::

   \mathrm{MACs} = N p^2 C d + (256 c + c^2) + d_c c + K\,B(N, T) + c d + N d\,p^2 C_\text{out}

Rotary tables are elementwise (gathers, complex products): no MACs. Lumina-Next's table comes
from the pipeline (``get_2d_rotary_pos_embed_lumina(head_dim, 384, 384)``), so its grid is at
most 384 patches a side.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, RATIO, SIZE, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.lumina import (
    lumina2_block,
    lumina_ffn_inner,
    lumina_layer_norm_continuous,
    lumina_next_block,
)
from flopcalc.engine.registry import RunShape, register

#: ``Lumina2Transformer2DModel.__init__`` keyword defaults (transformer_lumina2.py).
LUMINA2_DEFAULTS = {
    "sample_size": 128,
    "patch_size": 2,
    "in_channels": 16,
    "out_channels": None,
    "hidden_size": 2304,
    "num_layers": 26,
    "num_refiner_layers": 2,
    "num_attention_heads": 24,
    "num_kv_heads": 8,
    "multiple_of": 256,
    "ffn_dim_multiplier": None,
    "norm_eps": 1e-5,
    "scaling_factor": 1.0,
    "axes_dim_rope": [32, 32, 32],
    "axes_lens": [300, 512, 512],
    "cap_feat_dim": 1024,
}

#: ``LuminaNextDiT2DModel.__init__`` keyword defaults (lumina_nextdit2d.py).
LUMINA_NEXT_DEFAULTS = {
    "sample_size": 128,
    "patch_size": 2,
    "in_channels": 4,
    "hidden_size": 2304,
    "num_layers": 32,
    "num_attention_heads": 32,
    "num_kv_heads": None,
    "multiple_of": 256,
    "ffn_dim_multiplier": None,
    "norm_eps": 1e-5,
    "learn_sigma": True,
    "qk_norm": True,
    "cross_attention_dim": 2048,
    "scaling_factor": 1.0,
}

#: ``LuminaPipeline.__call__`` builds the rotary table for a 384 × 384 patch grid.
LUMINA_NEXT_ROPE_GRID = 384
#: ``Timesteps(num_channels=256)``: the sinusoidal width both models embed the timestep from.
FREQUENCY_EMBEDDING_SIZE = 256


def _heads(config: Config, dim: int) -> tuple[int, int]:
    """(query heads, key/value heads); ``num_kv_heads`` None means as many as query heads."""
    heads = positive_int(config, "num_attention_heads")
    kv_heads = heads if config["num_kv_heads"] is None else positive_int(config, "num_kv_heads")
    if heads % kv_heads:
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} is not a multiple of "
                          f"num_kv_heads {kv_heads} (grouped-query attention repeats each K/V head).")
    if dim // heads == 0:
        raise ConfigError(f"{config.component}/config.json: hidden_size {dim} is smaller than "
                          f"num_attention_heads {heads}.")
    return heads, kv_heads


def _ffn_inner(config: Config, inner_dim: int) -> int:
    return lumina_ffn_inner(inner_dim, positive_int(config, "multiple_of"), config["ffn_dim_multiplier"])


def _grid(shape: RunShape, patch: int) -> tuple[object, object]:
    return ops.exact_div(shape.latent_height, patch), ops.exact_div(shape.latent_width, patch)


def _check_lumina2_rope(config: Config, shape: RunShape, grid_h, grid_w, head_dim: int) -> None:
    """``Lumina2RotaryPosEmbed`` gathers caption positions 0..T (the image tokens sit at T on axis
    0) and patch rows / columns from tables of ``axes_lens`` entries; its three axes together are
    the head width."""
    axes_dim, axes_lens = list(config["axes_dim_rope"]), list(config["axes_lens"])
    if sum(axes_dim) != head_dim:
        raise ConfigError(f"{config.component}/config.json: axes_dim_rope {axes_dim} sums to {sum(axes_dim)}, "
                          f"but the head width hidden_size / num_attention_heads is {head_dim}.")
    t = shape.text_len
    if isinstance(t, int) and t >= axes_lens[0]:
        raise ConfigError(f"transformer: {t} caption tokens exceed the rotary table (axes_lens[0]={axes_lens[0]}: "
                          f"at most {axes_lens[0] - 1} tokens); lower max_sequence_length.")
    if isinstance(grid_h, int) and (grid_h > axes_lens[1] or grid_w > axes_lens[2]):
        patch = positive_int(config, "patch_size")
        raise ResolutionError(f"transformer: a {grid_h}×{grid_w} patch grid exceeds the rotary tables (axes_lens "
                              f"{axes_lens[1]}×{axes_lens[2]}); at most {axes_lens[1] * patch * 8}×"
                              f"{axes_lens[2] * patch * 8} image pixels with the pipeline's 8× latent.")


#: Every config key ``Lumina2Transformer2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("Lumina2Transformer2DModel", {
    "sample_size": SIZE, "patch_size": SIZE, "in_channels": SIZE, "out_channels": SIZE | NULL,
    "hidden_size": SIZE, "num_layers": LAYERS, "num_refiner_layers": LAYERS, "num_attention_heads": SIZE,
    "num_kv_heads": SIZE | NULL, "multiple_of": SIZE, "ffn_dim_multiplier": RATIO | NULL, "cap_feat_dim": SIZE,
    "axes_dim_rope": ListOf(SIZE, lo=3, hi=3), "axes_lens": ListOf(SIZE, lo=3, hi=3),
})

#: Every config key ``LuminaNextDiT2DModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("LuminaNextDiT2DModel", {
    "sample_size": SIZE, "patch_size": SIZE, "in_channels": SIZE, "hidden_size": SIZE, "num_layers": LAYERS,
    "num_attention_heads": SIZE, "num_kv_heads": SIZE | NULL, "multiple_of": SIZE,
    "ffn_dim_multiplier": RATIO | NULL, "learn_sigma": FLAG, "qk_norm": FLAG, "cross_attention_dim": SIZE,
})


@register("Lumina2Transformer2DModel", role="denoiser", defaults=LUMINA2_DEFAULTS,
          source="diffusers/models/transformers/transformer_lumina2.py")
def lumina2_transformer(config: Config, shape: RunShape) -> Node:
    dim = positive_int(config, "hidden_size")
    heads, kv_heads = _heads(config, dim)
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    out_channels = config["out_channels"] or in_channels
    cap_dim = positive_int(config, "cap_feat_dim")
    cond = min(dim, 1024)
    gh, gw = _grid(shape, patch)
    _check_lumina2_rope(config, shape, gh, gw, dim // heads)
    n, t = gh * gw, shape.text_len
    ffn = _ffn_inner(config, 4 * dim)
    refiners = count_int(config, "num_refiner_layers")

    def block(tokens, modulation: bool = True) -> Node:
        return lumina2_block(tokens=tokens, dim=dim, heads=heads, kv_heads=kv_heads, ffn_inner=ffn,
                             modulation=modulation)

    return Node(
        "transformer",
        children=(
            Node("rope_embedder"),
            Node("x_embedder", ops.linear(n, patch * patch * in_channels, dim)),
            Node("time_caption_embed", children=(
                mlp_embedder("timestep_embedder", FREQUENCY_EMBEDDING_SIZE, cond),
                Node("caption_embedder", children=(Node("0", ops.rms_norm(t, cap_dim)),
                                                   Node("1", ops.linear(t, cap_dim, dim)))),
            )),
            module_list("noise_refiner", [block(n)] * refiners),
            module_list("context_refiner", [block(t, modulation=False)] * refiners),
            module_list("layers", [block(t + n)] * count_int(config, "num_layers")),
            lumina_layer_norm_continuous("norm_out", tokens=t + n, dim=dim, out_dim=patch * patch * out_channels),
        ),
        formula="lumina2_transformer",
    )


@register("LuminaNextDiT2DModel", role="denoiser", defaults=LUMINA_NEXT_DEFAULTS,
          source="diffusers/models/transformers/lumina_nextdit2d.py")
def lumina_next_transformer(config: Config, shape: RunShape) -> Node:
    dim = positive_int(config, "hidden_size")
    heads, kv_heads = _heads(config, dim)
    if config["qk_norm"] and config["num_kv_heads"] is None:
        raise ConfigError(f"{config.component}/config.json: LuminaNextDiT2DModel cannot be built with qk_norm and "
                          "num_kv_heads null (diffusers' Attention sizes the k norm as head_dim * kv_heads); "
                          "set num_kv_heads.")
    if (dim // heads) % 4:
        raise ConfigError(f"{config.component}/config.json: the head width hidden_size / num_attention_heads = "
                          f"{dim // heads} must be a multiple of 4 (2-D rotary embedding).")
    patch = positive_int(config, "patch_size")
    in_channels = positive_int(config, "in_channels")
    out_channels = in_channels * 2 if config["learn_sigma"] else in_channels
    context_dim = positive_int(config, "cross_attention_dim")
    cond = min(dim, 1024)
    gh, gw = _grid(shape, patch)
    if isinstance(gh, int) and max(gh, gw) > LUMINA_NEXT_ROPE_GRID:
        raise ResolutionError(
            f"transformer: a {gh}×{gw} patch grid exceeds the {LUMINA_NEXT_ROPE_GRID}×{LUMINA_NEXT_ROPE_GRID} rotary "
            f"table LuminaPipeline builds; at most {LUMINA_NEXT_ROPE_GRID * patch * 8} image pixels per side.")
    n, t = gh * gw, shape.text_len
    block = lumina_next_block(tokens=n, context_tokens=t, dim=dim, context_dim=context_dim, heads=heads,
                              kv_heads=kv_heads, ffn_inner=_ffn_inner(config, int(4 * 2 * dim / 3)),
                              qk_norm=bool(config["qk_norm"]))
    return Node(
        "transformer",
        children=(
            Node("patch_embedder", children=(Node("proj", ops.linear(n, patch * patch * in_channels, dim)),)),
            Node("pad_token", ops.parameters(dim)),
            Node("time_caption_embed", children=(
                mlp_embedder("timestep_embedder", FREQUENCY_EMBEDDING_SIZE, cond),
                Node("caption_embedder", children=(Node("0", ops.layer_norm(1, context_dim)),
                                                   Node("1", ops.linear(1, context_dim, cond)))),
            )),
            module_list("layers", [block] * count_int(config, "num_layers")),
            lumina_layer_norm_continuous("norm_out", tokens=n, dim=dim, out_dim=patch * patch * out_channels),
        ),
        formula="lumina_next_transformer",
    )
