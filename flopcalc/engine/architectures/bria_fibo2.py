"""BRIA FIBO 2: ``BriaFibo2Transformer2DModel`` (diffusers ``models/transformers/transformer_bria_fibo2.py``).

A single-stream Z-Image DiT (not FIBO 1's FLUX blocks). One forward (:500-653) on a latent of ``C × h × w``
(``BriaFibo2Pipeline``: ``C = in_channels`` = 32, ``h × w = H/8 × W/8``): ``x_embedder`` on the ``N = (h/p)(w/p)``
patch tokens (``p = patch_size`` 2), the timestep embedded twice (``t_embedder`` on the noisy timestep and on 0, the
"clean" one), ``noise_refiner`` blocks on the image tokens (one global modulation), the Perceiver (``perceiver``) that
reads the first of the text encoder's bundles (``m`` tokens of width ``cap_feat_dim``) into ``G`` gist tokens, ``G``
from ``m`` by ``compute_gist_count``; then ``n_layers`` blocks on ``G + N`` tokens with per-token modulation (noisy
and clean: two modulation vectors each), the blocks named in ``injection_layer_ids`` also cross-attending to their own
bundle of the ``m`` text tokens; ``final_layer`` on the ``N`` image tokens. Block formulas:
:mod:`flopcalc.formulas.bria_fibo2`. RoPE tables (``RopeEmbedder``) are table lookups: no matmul. Editing
(``context_latents``) is not planned by flopcalc, so the assembler models the generation call.
"""

from __future__ import annotations

from flopcalc.engine.config import (
    LAYERS, SIZE, SIZES, Config, Int, ListOf, Real, count_int, declare_keys, positive_int, positive_int_list,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.bria_fibo2 import (
    ADALN_EMBED_DIM, fibo2_block, fibo2_final_layer, fibo2_perceiver_layer, gist_count,
)

SOURCE = "diffusers/models/transformers/transformer_bria_fibo2.py"

#: ``BriaFibo2Transformer2DModel.__init__`` keyword defaults (transformer_bria_fibo2.py:437-458).
DEFAULTS = {
    "in_channels": 32,
    "patch_size": 2,
    "dim": 3584,
    "n_layers": 44,
    "n_refiner_layers": 2,
    "n_heads": 28,
    "norm_eps": 1e-5,
    "cap_feat_dim": 7680,
    "injection_layer_ids": [6, 14, 22, 30, 38],
    "perceiver_num_layers": 2,
    "min_num_gist_tokens": 256,
    "max_num_gist_tokens": 512,
    "gist_step": 64,
    "gist_min_text_len": 256,
    "gist_max_text_len": 2048,
    "rope_theta": 256.0,
    "t_scale": 1000.0,
    "axes_dims": [32, 48, 48],
    "axes_lens": [2048, 512, 512],
}

#: ``TimestepEmbedder(min(dim, 256), mid_size=1024)`` on a 256-wide sinusoidal embedding (:34-69, :462).
T_EMBED_MID, T_EMBED_FREQUENCIES = 1024, 256

declare_keys("BriaFibo2Transformer2DModel", {
    "in_channels": SIZE, "patch_size": SIZE, "dim": SIZE, "n_layers": LAYERS, "n_refiner_layers": LAYERS,
    "n_heads": SIZE, "norm_eps": Real(0.0, 1.0), "cap_feat_dim": SIZE,
    "injection_layer_ids": ListOf(Int(0, 100_000), lo=0), "perceiver_num_layers": LAYERS,
    "min_num_gist_tokens": SIZE, "max_num_gist_tokens": SIZE, "gist_step": SIZE, "gist_min_text_len": Int(0, 10**7),
    "gist_max_text_len": SIZE, "rope_theta": Real(0.0, 1e9), "t_scale": Real(0.0, 1e9), "axes_dims": SIZES,
    "axes_lens": SIZES,
})


def gist_tokens(config: Config, text_len: int) -> int:
    """How many gist tokens the Perceiver makes for a prompt of ``text_len`` tokens (``compute_gist_count``, :580-589),
    with the checks the real code needs to run (a non-empty text span, gist bounds in order)."""
    lo, hi = positive_int(config, "min_num_gist_tokens"), positive_int(config, "max_num_gist_tokens")
    t_lo, t_hi = count_int(config, "gist_min_text_len"), positive_int(config, "gist_max_text_len")
    if lo > hi:
        raise ConfigError(f"{config.component}/config.json: min_num_gist_tokens {lo} exceeds max_num_gist_tokens {hi}")
    if t_hi <= t_lo:
        raise ConfigError(f"{config.component}/config.json: gist_max_text_len {t_hi} must exceed gist_min_text_len "
                          f"{t_lo} (compute_gist_count divides by their difference)")
    if not isinstance(text_len, int) or hasattr(text_len, "expr"):
        raise ConfigError("BriaFibo2Transformer2DModel: the gist-token count is a rounded, clamped function of the "
                          "text length (compute_gist_count): no closed-form law; use the numeric estimate")
    return gist_count(int(text_len), min_gist=lo, max_gist=hi, step=positive_int(config, "gist_step"),
                      min_text=t_lo, max_text=t_hi)


def _heads(config: Config, dim: int) -> int:
    heads = positive_int(config, "n_heads")
    axes, lens = positive_int_list(config, "axes_dims"), positive_int_list(config, "axes_lens")
    if len(axes) != 3 or len(lens) != 3:
        raise ConfigError(f"{config.component}/config.json: axes_dims and axes_lens must have 3 entries (plane, row, "
                          f"column), got {axes} and {lens}")
    if dim // heads != sum(axes):
        raise ConfigError(f"{config.component}/config.json: the head width dim // n_heads = {dim // heads} must equal "
                          f"sum(axes_dims) = {sum(axes)} (the rotary table spans one head)")
    return heads


@register("BriaFibo2Transformer2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def bria_fibo2_transformer(config: Config, shape: RunShape) -> Node:
    """``BriaFibo2Transformer2DModel.forward`` (:500-653) on one row: ``N`` image tokens, ``shape.text_len`` text tokens
    in every bundle, no context images."""
    dim = positive_int(config, "dim")
    heads = _heads(config, dim)
    p, c, cap = positive_int(config, "patch_size"), positive_int(config, "in_channels"), positive_int(config, "cap_feat_dim")
    rows, cols = ops.exact_div(shape.latent_height, p), ops.exact_div(shape.latent_width, p)
    lens = positive_int_list(config, "axes_lens")
    gmax = positive_int(config, "max_num_gist_tokens")
    if isinstance(rows, int) and (gmax + 1 >= lens[0] or rows > lens[1] or cols > lens[2]):
        raise ConfigError(f"{config.component}/config.json: axes_lens {lens} cannot index the image's RoPE positions "
                          f"(plane {gmax + 1}, {rows} rows, {cols} columns of patches)")
    n, t = rows * cols, shape.text_len
    g = gist_tokens(config, t)
    layers = count_int(config, "n_layers")
    injected = set(config["injection_layer_ids"])
    adaln = min(dim, ADALN_EMBED_DIM)
    perceiver = Node("perceiver", children=(
        Node("latent_queries", ops.parameters(gmax * dim)),
        module_list("layers", [fibo2_perceiver_layer(gist=g, dim=dim, heads=heads, text_tokens=t, cross_dim=cap)]
                    * count_int(config, "perceiver_num_layers")),
        Node("norm_out", ops.rms_norm(g, dim)),
    ))
    blocks = [fibo2_block(tokens=g + n, dim=dim, heads=heads, modulation_vectors=2, text_tokens=t,
                          cross_dim=cap if i in injected else None) for i in range(layers)]
    return Node("transformer", children=(
        Node("x_embedder", ops.linear(n, p * p * c, dim)),
        Node("t_embedder", children=(Node("mlp", children=(  # noisy and clean timesteps: two vectors
            Node("0", ops.linear(2, T_EMBED_FREQUENCIES, T_EMBED_MID) + ops.activation(2 * T_EMBED_MID)),
            Node("2", ops.linear(2, T_EMBED_MID, adaln)),
        )),)),
        module_list("noise_refiner", [fibo2_block(tokens=n, dim=dim, heads=heads, modulation_vectors=1)]
                    * count_int(config, "n_refiner_layers")),
        perceiver,
        module_list("layers", blocks),
        fibo2_final_layer(tokens=n, dim=dim, out_channels=p * p * c),
    ), formula="bria_fibo2_transformer")
