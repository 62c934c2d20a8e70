"""``AutoencoderKLWan`` (diffusers ``models/autoencoders/autoencoder_kl_wan.py``), the causal 3-D video
VAE of Wan 2.1 (and, with ``is_residual`` and ``patch_size``, Wan 2.2); block formulas in
``formulas/causal_vae.py``.

``decode`` (``_decode``, untiled: ``use_tiling`` is off by default and ``WanPipeline`` does not turn
it on) runs the causal 1×1×1 ``post_quant_conv`` on all ``T`` latent frames at once, then the decoder
once per latent frame with the causal feature cache, and (``patch_size``) unpatchifies (no work).
``encode`` (``_encode``) patchifies, runs the encoder on the first frame and then on chunks of 4,
and the causal 1×1×1 ``quant_conv`` (2z → 2z) on the latent. Tiled decoding and encoding
(``enable_tiling()``) run these same calls on each overlapping tile: :func:`decode_split` /
:func:`encode_split` say how a call is split (``formulas/tiling.py``), and the pipeline plan
(``flopcalc/engine/pipelines/wan.py``) counts one run per tile shape. The parameters of the whole model are
the sum over the two calls.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from flopcalc.engine.architectures.autoencoder_kl_qwen_image import causal_vae_levels
from flopcalc.engine.config import (
    FLAG, FLAGS, LAYERS, NULL, RATIO, SIZE, SIZES, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.image_tiling import TileSizes
from flopcalc.formulas import ops
from flopcalc.formulas.causal_vae import (
    causal_conv3d,
    causal_decoder,
    causal_encoder,
    decode_chunks,
    encode_chunks,
    encoded_frames,
    halve,
)
from flopcalc.formulas.tiling import CallSplit, slices, spatial_split
from flopcalc.engine.registry import RunShape, register

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
#: ``AutoencoderKLWan.enable_tiling`` defaults (``tile_sample_min_*`` 256, ``tile_sample_stride_*`` 192
#: pixels); tiling is off unless a caller enables it (``use_tiling = False`` in ``__init__``).
TILE_SAMPLE_MIN, TILE_SAMPLE_STRIDE = 256, 192


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


#: ``enable_tiling(tile_sample_min_height=, tile_sample_min_width=, tile_sample_stride_height=,
#: tile_sample_stride_width=)`` (autoencoder_kl_wan.py:1080-1085, 1121-1125, 1335-1402): the tile side ``memory --gpu``
#: may propose (:mod:`flopcalc.gpu_memory.vae_tiles`).
VIDEO_TILING = TileSizes(default_tile=lambda values: TILE_SAMPLE_MIN,
                         stride=Fraction(TILE_SAMPLE_STRIDE, TILE_SAMPLE_MIN), takes_sizes=True,
                         compression=scale_factor, source=f"{SOURCE}:1080-1085, 1121-1125, 1335-1402")


def decode_split(values: dict[str, Any], latent_height: int, latent_width: int, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs on a ``latent_height × latent_width`` latent: ``tiled_decode`` (with
    ``use_tiling``, when a side exceeds ``tile_sample_min // scale_factor_spatial``: latent tiles of 32
    every 24 for the 8× VAE) or whole. The frames are never split: ``_decode`` runs the decoder once per
    latent frame with its causal feature cache (in the decoder's formula, ``formulas/causal_vae.py``)."""
    f = scale_factor(values)
    tile, stride = TILE_SAMPLE_MIN // f, TILE_SAMPLE_STRIDE // f
    return spatial_split(latent_height, latent_width, tile, stride, tiling)


def encode_split(values: dict[str, Any], height: int, width: int, tiling: bool) -> CallSplit:
    """How ``vae.encode`` runs on a ``height × width`` video: ``tiled_encode`` tiles the patchified
    pixels (``patch_size``: 256 every 192 of them, when a side exceeds 256), else whole; the tile
    sides here are in pixels (patchified sides × ``patch_size``)."""
    patch = values.get("patch_size") or 1
    hp, wp = height // patch, width // patch
    if not (tiling and (hp > TILE_SAMPLE_MIN or wp > TILE_SAMPLE_MIN)):
        return CallSplit.of(None, height, width)
    rows, cols = (slices(side, TILE_SAMPLE_MIN, TILE_SAMPLE_STRIDE) for side in (hp, wp))
    return CallSplit(None, tuple((side * patch, n) for side, n in rows), tuple((side * patch, n) for side, n in cols))


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
#: :func:`flopcalc.engine.config.declare_keys` validates it.
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
    decoder = causal_decoder(base_dim=base, z_dim=z, temperal_upsample=list(config["temperal_downsample"])[::-1],
                             out_channels=positive_int(config, "out_channels"), height=h, width=w,
                             frames=decode_chunks(frames), **kw)
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
    temporal = list(config["temperal_downsample"])
    h, w = ops.exact_div(shape.height, patch), ops.exact_div(shape.width, patch)
    try:
        encoder = causal_encoder(
            base_dim=positive_int(config, "base_dim"), z_channels=z2, attn_scales=list(config["attn_scales"]),
            temperal_downsample=temporal, in_channels=positive_int(config, "in_channels"), height=h, width=w,
            frames=encode_chunks(frames), **kw)
        chunks = encoded_frames(encode_chunks(frames), temporal, len(kw["dim_mult"]))
    except ValueError as exc:
        raise ConfigError(f"{config.component}: AutoencoderKLWan cannot encode {frames} frames: {exc}") from None
    for _ in range(len(kw["dim_mult"]) - 1):
        h, w = halve(h), halve(w)
    return Node("vae", children=(
        encoder,
        Node("quant_conv", causal_conv3d(z2, z2, (1, 1, 1), chunks.frames * h * w)),
    ), formula="autoencoder_kl_wan_encode")
