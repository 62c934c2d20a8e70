"""``AutoencoderKLQwenImage21`` (diffusers 0.42.1 ``models/autoencoders/autoencoder_kl_qwenimage21.py``), the image
VAE of Qwen-Image 2.1: Wan 2.2's residual causal VAE (``is_residual``) specialised to one frame, its
``QwenImage21CausalConv3d`` an ``nn.Conv2d`` subclass with 2-D kernels (block formulas: ``formulas/causal_vae.py``
with ``kt=1``).

``decode`` (``_decode``, untiled: ``use_tiling`` is off by default and ``QwenImage21Pipeline`` does not turn it on)
runs the 1×1 ``post_quant_conv`` (z → z) and the decoder once on the single latent frame (the feature cache is
empty on that first chunk, so no ``time_conv`` runs: their parameters count, their MACs are 0), then unpatchifies
(``patch_size``; no work). ``encode`` (``_encode``) patchifies, runs the encoder on the frame and the 1×1
``quant_conv`` (2z → 2z). The convolutions squeeze the frame axis away (autoencoder_kl_qwenimage21.py:172-183), so
the model takes one frame only. The parameters of the whole model are the sum over the two calls.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.architectures.autoencoder_kl_qwen_image import causal_vae_levels
from flopcalc.engine.config import (
    FLAG,
    FLAGS,
    LAYERS,
    NULL,
    RATIO,
    SIZE,
    SIZES,
    Config,
    ListOf,
    count_int,
    declare_keys,
    positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.causal_vae import (
    causal_conv3d,
    causal_decoder,
    causal_encoder,
    halve,
)

CLASS = "AutoencoderKLQwenImage21"
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_qwenimage21.py"
#: ``QwenImage21CausalConv3d`` is 2-D: the temporal extent of its kernels.
KT = 1

#: ``AutoencoderKLQwenImage21.__init__`` keyword defaults (autoencoder_kl_qwenimage21.py:993-1166); the 64
#: ``latents_mean`` / ``latents_std`` values are only read by the pipeline's (elementwise) latent scaling.
DEFAULTS = {
    "base_dim": 96,
    "decoder_base_dim": 144,
    "z_dim": 64,
    "dim_mult": [1, 2, 4, 8, 8],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True, True],
    "dropout": 0.0,
    "is_residual": True,
    "in_channels": 4,
    "out_channels": 4,
    "patch_size": None,
    "scale_factor_temporal": 8,
    "scale_factor_spatial": 16,
}


def scale_factor(values: dict[str, Any]) -> int:
    """``QwenImage21Pipeline.vae_scale_factor``: 16, set in ``__init__`` whatever the VAE's config says
    (pipeline_qwenimage21.py:205-207)."""
    return 16


def _patch(config: Config) -> int:
    """``patch_size`` (None: no patchify; 1 is a no-op too)."""
    value = config["patch_size"]
    return 1 if value is None else positive_int(config, "patch_size")


def _check_shortcuts(config: Config, dim_mult: list[int]) -> None:
    """The residual layout's parameter-free shortcuts regroup channels, which the real class checks when it is built:
    ``QwenImage21AvgDown3D`` (encoder level i, in → out channels, factor ``f_t · f_s²``: ``f_s`` 2 but at the last
    level, ``f_t`` 2 where ``temperal_downsample``) needs ``in · factor`` divisible by ``out``
    (autoencoder_kl_qwenimage21.py:44-49), ``QwenImage21DupUp3D`` (decoder level i) ``out · factor`` by ``in``
    (:108)."""
    if not config["is_residual"]:
        return
    temporal = list(config["temperal_downsample"])
    levels = len(dim_mult)
    base = positive_int(config, "base_dim")
    dims = [base * m for m in [1, *dim_mult]]
    for i in range(levels):
        down = i != levels - 1
        factor = (2 if down and temporal[i] else 1) * (4 if down else 1)
        if dims[i] * factor % dims[i + 1]:
            raise ConfigError(f"{config.component}/config.json: encoder level {i} maps {dims[i]} to {dims[i + 1]} "
                              f"channels, and its shortcut (QwenImage21AvgDown3D, factor {factor}) needs "
                              f"{dims[i]}·{factor} divisible by {dims[i + 1]} (dim_mult {dim_mult})")
    decoder_base = config["decoder_base_dim"]
    decoder_base = base if decoder_base is None else positive_int(config, "decoder_base_dim")
    dims = [decoder_base * m for m in [dim_mult[-1], *dim_mult[::-1]]]
    upsample = temporal[::-1]
    for i in range(levels - 1):
        factor = (2 if upsample[i] else 1) * 4
        if dims[i + 1] * factor % dims[i]:
            raise ConfigError(f"{config.component}/config.json: decoder level {i} maps {dims[i]} to {dims[i + 1]} "
                              f"channels, and its shortcut (QwenImage21DupUp3D, factor {factor}) needs "
                              f"{dims[i + 1]}·{factor} divisible by {dims[i]} (dim_mult {dim_mult})")


def _structure(config: Config) -> dict[str, Any]:
    dim_mult = causal_vae_levels(config)
    _check_shortcuts(config, dim_mult)
    return {
        "dim_mult": dim_mult,
        "num_res_blocks": count_int(config, "num_res_blocks"),
        "is_residual": bool(config["is_residual"]),
        "kt": KT,
    }


declare_keys(CLASS, {
    "base_dim": SIZE, "decoder_base_dim": SIZE | NULL, "z_dim": SIZE, "dim_mult": SIZES, "num_res_blocks": LAYERS,
    "attn_scales": ListOf(RATIO, lo=0), "temperal_downsample": FLAGS, "in_channels": SIZE, "out_channels": SIZE,
    "is_residual": FLAG, "patch_size": SIZE | NULL,
})


def _one_frame(config: Config, frames: Any) -> None:
    if frames not in (None, 1):
        raise ConfigError(f"{config.component}: AutoencoderKLQwenImage21 takes one frame (its causal convolutions "
                          f"are 2-D and squeeze the frame axis away), got {frames}")


@register(CLASS, call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor)
def autoencoder_kl_qwen_image21_decode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z = positive_int(config, "z_dim")
    base = config["decoder_base_dim"]
    base = positive_int(config, "base_dim") if base is None else positive_int(config, "decoder_base_dim")
    _patch(config)
    _one_frame(config, shape.latent_frames)
    h, w = shape.latent_height, shape.latent_width
    decoder = causal_decoder(base_dim=base, z_dim=z, temperal_upsample=list(config["temperal_downsample"])[::-1],
                             out_channels=positive_int(config, "out_channels"), height=h, width=w, **kw)
    return Node("vae", children=(
        Node("post_quant_conv", causal_conv3d(z, z, (1, 1, 1), h * w)),
        decoder,
    ), formula="autoencoder_kl_qwen_image21_decode")


@register(CLASS, call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor)
def autoencoder_kl_qwen_image21_encode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z2 = 2 * positive_int(config, "z_dim")
    patch = _patch(config)
    _one_frame(config, shape.frames)
    if any(isinstance(side, int) and side % patch for side in (shape.height, shape.width)):
        raise ConfigError(f"{config.component}: AutoencoderKLQwenImage21 patchifies by {patch}: height and width "
                          f"must be multiples of {patch}, got {shape.height}×{shape.width}")
    h, w = ops.exact_div(shape.height, patch), ops.exact_div(shape.width, patch)
    encoder = causal_encoder(base_dim=positive_int(config, "base_dim"), z_channels=z2,
                             attn_scales=list(config["attn_scales"]),
                             temperal_downsample=list(config["temperal_downsample"]),
                             in_channels=positive_int(config, "in_channels"), height=h, width=w, **kw)
    for _ in range(len(kw["dim_mult"]) - 1):
        h, w = halve(h), halve(w)
    return Node("vae", children=(
        encoder,
        Node("quant_conv", causal_conv3d(z2, z2, (1, 1, 1), h * w)),
    ), formula="autoencoder_kl_qwen_image21_encode")


#: No buffers, no module kept in float32 (no ``_keep_in_fp32_modules``); ``QwenImage21RMS_norm``'s ``bias`` is the
#: float 0.0, not a tensor (autoencoder_kl_qwenimage21.py:199-207).
loading_rules(CLASS, source=SOURCE + ":187-217, 977-1204")
