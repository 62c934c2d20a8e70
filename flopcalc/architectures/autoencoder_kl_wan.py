"""``AutoencoderKLWan`` (diffusers ``models/autoencoders/autoencoder_kl_wan.py``), the causal 3-D video
VAE of Wan 2.1 (and, with ``is_residual`` and ``patch_size``, Wan 2.2); block formulas in
``formulas/wan_vae.py``.

``decode`` (``_decode``, untiled: ``use_tiling`` is off by default and ``WanPipeline`` does not turn
it on) runs the causal 1×1×1 ``post_quant_conv`` on all ``T`` latent frames at once, then the decoder
once per latent frame with the causal feature cache, and (``patch_size``) unpatchifies (no work).
``encode`` (``_encode``) patchifies, runs the encoder on the first frame and then on chunks of 4,
and the causal 1×1×1 ``quant_conv`` (2z → 2z) on the latent. Tiled decoding and encoding run these
same calls on each overlapping tile: the pipeline plan counts them tile by tile
(``flopcalc/pipelines/wan.py``). The parameters of the whole model are the sum over the two calls.
"""

from __future__ import annotations

from typing import Any

from flopcalc.architectures.autoencoder_kl_qwen_image import causal_vae_levels
from flopcalc.config import (
    FLAG, FLAGS, LAYERS, NULL, RATIO, SIZE, SIZES, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.cost import Node
from flopcalc.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.causal_vae import causal_conv3d
from flopcalc.formulas.wan_vae import (
    decode_chunks,
    encode_chunks,
    wan_decoder,
    wan_encoder,
)
from flopcalc.registry import RunShape, register

#: ``AutoencoderKLWan.__init__`` keyword defaults (autoencoder_kl_wan.py).
DEFAULTS = {
    "base_dim": 96,
    "decoder_base_dim": None,
    "z_dim": 16,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "dropout": 0.0,
    "latents_mean": [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715,
                     0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921],
    "latents_std": [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652,
                    1.5579, 1.6382, 1.1253, 2.8251, 1.9160],
    "is_residual": False,
    "in_channels": 3,
    "out_channels": 3,
    "patch_size": None,
    "scale_factor_temporal": 4,
    "scale_factor_spatial": 8,
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_wan.py"


def _factor(values: dict[str, Any], key: str) -> int:
    value = values.get(key, DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"vae/config.json: {key!r} must be a positive integer (WanPipeline reads it), "
                          f"got {value!r}")
    return value


def scale_factor(values: dict[str, Any]) -> int:
    """``vae_scale_factor_spatial`` as ``WanPipeline`` reads it: ``vae.config.scale_factor_spatial``."""
    return _factor(values, "scale_factor_spatial")


def temporal_scale_factor(values: dict[str, Any]) -> int:
    """``vae_scale_factor_temporal``: ``vae.config.scale_factor_temporal``."""
    return _factor(values, "scale_factor_temporal")


def _structure(config: Config) -> dict[str, Any]:
    return {
        "dim_mult": causal_vae_levels(config),
        "num_res_blocks": count_int(config, "num_res_blocks"),
        "is_residual": bool(config["is_residual"]),
    }


def _patch(config: Config) -> int:
    """``patch_size`` (None: no patchify; 1 is a no-op too)."""
    value = config["patch_size"]
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{config.component}/config.json: 'patch_size' must be null or a positive integer, "
                          f"got {value!r}")
    return value


#: Every config key ``AutoencoderKLWan`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("AutoencoderKLWan", {
    "base_dim": SIZE, "decoder_base_dim": SIZE | NULL, "z_dim": SIZE, "dim_mult": SIZES,
    "num_res_blocks": LAYERS, "attn_scales": ListOf(RATIO, lo=0), "temperal_downsample": FLAGS,
    "in_channels": SIZE, "out_channels": SIZE, "is_residual": FLAG, "patch_size": SIZE | NULL,
    "scale_factor_spatial": SIZE, "scale_factor_temporal": SIZE,
})


@register("AutoencoderKLWan", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor)
def autoencoder_kl_wan_decode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z = positive_int(config, "z_dim")
    base = config["decoder_base_dim"]
    base = positive_int(config, "base_dim") if base is None else positive_int(config, "decoder_base_dim")
    _patch(config)
    h, w = shape.latent_height, shape.latent_width
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    decoder = wan_decoder(base_dim=base, z_dim=z, temperal_upsample=list(config["temperal_downsample"])[::-1],
                          out_channels=positive_int(config, "out_channels"), height=h, width=w,
                          chunks=decode_chunks(frames), **kw)
    return Node("vae", children=(
        Node("post_quant_conv", causal_conv3d(z, z, (1, 1, 1), frames * h * w)),
        decoder,
    ), formula="autoencoder_kl_wan_decode")


@register("AutoencoderKLWan", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor)
def autoencoder_kl_wan_encode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z2 = 2 * positive_int(config, "z_dim")
    patch = _patch(config)
    frames = 1 if shape.frames is None else shape.frames
    if any(isinstance(side, int) and side % patch for side in (shape.height, shape.width)):
        raise ConfigError(f"{config.component}: AutoencoderKLWan patchifies by {patch}: height and width must be "
                          f"multiples of {patch}, got {shape.height}×{shape.width}")
    try:
        encoder, chunks, h, w = wan_encoder(
            base_dim=positive_int(config, "base_dim"), z_channels=z2, attn_scales=list(config["attn_scales"]),
            temperal_downsample=list(config["temperal_downsample"]), in_channels=positive_int(config, "in_channels"),
            height=ops.exact_div(shape.height, patch), width=ops.exact_div(shape.width, patch),
            chunks=encode_chunks(frames), **kw)
    except ValueError as exc:
        raise ConfigError(f"{config.component}: AutoencoderKLWan cannot encode {frames} frames: {exc}") from None
    return Node("vae", children=(
        encoder,
        Node("quant_conv", causal_conv3d(z2, z2, (1, 1, 1), chunks.frames * h * w)),
    ), formula="autoencoder_kl_wan_encode")
