"""``AutoencoderKLLTXVideo`` (diffusers ``models/autoencoders/autoencoder_kl_ltx.py``), the video VAE
of LTX-Video: 32× spatial, 8× temporal compression for the 0.9 releases (patch 4, three
spatio-temporal scaling blocks); block formulas in ``formulas/ltx.py``.

``decode`` is ``vae.decode(z, temb)`` on one latent video ``(T, h, w)``: ``_decode`` runs the
decoder once over all ``T`` latent frames (``use_framewise_decoding`` and ``use_tiling`` are off by
default and ``LTXPipeline`` turns neither on) and yields ``8(T − 1) + 1`` frames of ``32h × 32w``.
With ``timestep_conditioning`` the pipeline passes ``decode_timestep`` and the decoder's timestep
embedders run. A spatially tiled decode (``vae.enable_tiling()``) is the same decoder on each
overlapping tile: :func:`decode_split` / :func:`encode_split` say how a call is split
(``formulas/tiling.py``), and the pipeline plan (``flopcalc/engine/pipelines/ltx.py``) lists one run per tile
shape.

``encode`` is ``vae.encode(x)`` on one video ``(F, H, W)``: the causal encoder (``encoder_causal``),
``(F − 1)/8 + 1`` latent frames of ``H/32 × W/32`` for the card. There is no quant / post-quant
convolution. An image (no frame count given) is one frame.

Parameters are the whole model's: encoder + decoder (``latents_mean``/``latents_std`` are buffers).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from flopcalc.engine.config import (
    FLAG, FLAGS, LAYER_COUNTS, NAMES, NULL, SIZE, SIZES, Config, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.image_tiling import TileSizes
from flopcalc.formulas.ltx import ltx_decoder, ltx_encoder
from flopcalc.formulas.tiling import CallSplit, spatial_split
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``AutoencoderKLLTXVideo.__init__`` keyword defaults (autoencoder_kl_ltx.py, diffusers 0.42.1).
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 128,
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["LTXVideoDownBlock3D"] * 4,
    "decoder_block_out_channels": [128, 256, 512, 512],
    "layers_per_block": [4, 3, 3, 3, 4],
    "decoder_layers_per_block": [4, 3, 3, 3, 4],
    "spatio_temporal_scaling": [True, True, True, False],
    "decoder_spatio_temporal_scaling": [True, True, True, False],
    "decoder_inject_noise": [False, False, False, False, False],
    "downsample_type": ["conv", "conv", "conv", "conv"],
    "upsample_residual": [False, False, False, False],
    "upsample_factor": [1, 1, 1, 1],
    "timestep_conditioning": False,
    "patch_size": 4,
    "patch_size_t": 1,
    "resnet_norm_eps": 1e-6,
    "scaling_factor": 1.0,
    "encoder_causal": True,
    "decoder_causal": False,
    "spatial_compression_ratio": None,
    "temporal_compression_ratio": None,
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_ltx.py"
#: A shape every config can run, for parameter counts (which do not depend on it): one frame (no
#: temporal downsampler needs more) of 4096² pixels (divides by any patch × spatial downsampling).
NOMINAL = RunShape(latent_height=2, latent_width=2, latent_frames=2, height=4096, width=4096, frames=1)


#: ``AutoencoderKLLTXVideo.__init__``: ``tile_sample_min_height/width`` 512 and
#: ``tile_sample_stride_height/width`` 448 (pixels), what ``vae.enable_tiling()`` keeps by default.
TILE_SAMPLE, TILE_STRIDE = 512, 448


def tile_grid(height: int, width: int, tile: int, stride: int) -> dict[tuple[int, int], int]:
    """``(tile height, tile width) → count`` over the overlapping tile grid ``tiled_decode`` /
    ``tiled_encode`` cut; one untiled call when both sides fit in one tile (the VAE's condition)."""
    return spatial_split(height, width, tile, stride).tiles()


def latent_tile_split(latent_height: int, latent_width: int, spatial: int, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs for a VAE of ``spatial`` compression that tiles as LTX-Video's: with ``use_tiling``,
    ``tiled_decode`` on latent tiles of ``512 / spatial`` every ``448 / spatial`` when a side exceeds the tile, each
    tile over all latent frames (``use_framewise_decoding`` stays off); else one call. The LTX-2 video VAE tiles
    alike (``AutoencoderKLLTX2Video._decode`` / ``tiled_decode``, autoencoder_kl_ltx2.py:1266-1282, 1405-1465)."""
    return spatial_split(latent_height, latent_width, TILE_SAMPLE // spatial, TILE_STRIDE // spatial, tiling)


def decode_split(values: Mapping[str, Any], latent_height: int, latent_width: int, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs (:func:`latent_tile_split` at this config's spatial compression)."""
    return latent_tile_split(latent_height, latent_width, spatial_compression(values), tiling)


def encode_split(values: Mapping[str, Any], height: int, width: int, tiling: bool) -> CallSplit:
    """How ``vae.encode`` runs: with ``use_tiling``, ``tiled_encode`` on 512-pixel tiles every 448 when a
    side exceeds 512; else one call."""
    return spatial_split(height, width, TILE_SAMPLE, TILE_STRIDE, tiling)


#: ``enable_tiling(tile_sample_min_height=, ..., tile_sample_stride_width=)`` (autoencoder_kl_ltx.py:1177-1184,
#: 1212-1218, 1389-1444): the tile side ``memory --gpu`` may propose (:mod:`flopcalc.gpu_memory.vae_tiles`).
VIDEO_TILING = TileSizes(default_tile=lambda values: TILE_SAMPLE, stride=Fraction(TILE_STRIDE, TILE_SAMPLE),
                         takes_sizes=True, compression=lambda values: spatial_compression(values),
                         source="diffusers/models/autoencoders/autoencoder_kl_ltx.py:1177-1184, 1212-1218, 1389-1444")


def _get(values: Mapping[str, Any], key: str) -> Any:
    value = values.get(key)
    return DEFAULTS[key] if value is None else value


def spatial_compression(values: Mapping[str, Any]) -> int:
    """``spatial_compression_ratio``: the config's, else ``patch_size · 2^Σ spatio_temporal_scaling``
    (32 for the card): video pixels per latent pixel."""
    scaling = sum(bool(x) for x in _get(values, "spatio_temporal_scaling"))
    return int(_get(values, "spatial_compression_ratio") or _get(values, "patch_size") * 2 ** scaling)


def temporal_compression(values: Mapping[str, Any]) -> int:
    """``temporal_compression_ratio``: the config's, else ``patch_size_t · 2^Σ spatio_temporal_scaling``
    (8 for the card): ``F`` frames ↔ ``(F − 1)/8 + 1`` latent frames."""
    scaling = sum(bool(x) for x in _get(values, "spatio_temporal_scaling"))
    return int(_get(values, "temporal_compression_ratio") or _get(values, "patch_size_t") * 2 ** scaling)


def _int_list(config: Config, key: str, length: int, *, minimum: int = 0) -> list[int]:
    value = config[key]
    if (not isinstance(value, (list, tuple)) or len(value) < length
            or any(isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in value)):
        raise ConfigError(f"{config.component}/config.json: {key!r} must list at least {length} integers "
                          f">= {minimum}, got {value!r}")
    return list(value)


def _flags(config: Config, key: str, length: int) -> list[bool]:
    value = config[key]
    if not isinstance(value, (list, tuple)) or len(value) < length:
        raise ConfigError(f"{config.component}/config.json: {key!r} must list at least {length} flags, got {value!r}")
    return [bool(v) for v in value]


def _decoder(config: Config, shape: RunShape) -> Node:
    boc = _int_list(config, "decoder_block_out_channels", 1, minimum=1)
    levels = len(boc)
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    return ltx_decoder(
        latent_channels=positive_int(config, "latent_channels"), out_channels=positive_int(config, "out_channels"),
        block_out_channels=boc, spatio_temporal_scaling=_flags(config, "decoder_spatio_temporal_scaling", levels),
        layers_per_block=_int_list(config, "decoder_layers_per_block", levels + 1),
        patch_size=positive_int(config, "patch_size"), inject_noise=_flags(config, "decoder_inject_noise", levels + 1),
        upsample_factor=_int_list(config, "upsample_factor", levels, minimum=1),
        timestep_conditioning=bool(config["timestep_conditioning"]),
        g=(frames, shape.latent_height, shape.latent_width),
    )


def _encoder(config: Config, shape: RunShape) -> Node:
    boc = _int_list(config, "block_out_channels", 1, minimum=1)
    types = config["down_block_types"]
    known = ("LTXVideoDownBlock3D", "LTXVideo095DownBlock3D")
    if not isinstance(types, (list, tuple)) or not types or any(t not in known for t in types):
        raise ConfigError(f"{config.component}/config.json: 'down_block_types' must list {' / '.join(known)}, "
                          f"got {types!r}")
    count = len(boc) - (1 if types[-1] == "LTXVideo095DownBlock3D" else 0)  # as LTXVideoEncoder3d counts
    if len(types) < count:
        raise ConfigError(f"{config.component}/config.json: 'down_block_types' needs {count} entries, got {types!r}")
    downsample = list(config["downsample_type"])
    if len(downsample) < count or any(d not in ("conv", "spatial", "temporal", "spatiotemporal") for d in downsample):
        raise ConfigError(f"{config.component}/config.json: 'downsample_type' needs {count} of conv / spatial / "
                          f"temporal / spatiotemporal, got {downsample!r}")
    frames = 1 if shape.frames is None else shape.frames
    return ltx_encoder(
        in_channels=positive_int(config, "in_channels"), latent_channels=positive_int(config, "latent_channels"),
        block_out_channels=boc, down_block_types=list(types),
        spatio_temporal_scaling=_flags(config, "spatio_temporal_scaling", count),
        layers_per_block=_int_list(config, "layers_per_block", max(count, 1)), downsample_type=downsample,
        patch_size=positive_int(config, "patch_size"), patch_size_t=positive_int(config, "patch_size_t"),
        g=(frames, shape.height, shape.width),
    )


#: Every config key ``AutoencoderKLLTXVideo`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("AutoencoderKLLTXVideo", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE,
    "block_out_channels": SIZES, "decoder_block_out_channels": SIZES,
    "layers_per_block": LAYER_COUNTS, "decoder_layers_per_block": LAYER_COUNTS,
    "spatio_temporal_scaling": FLAGS, "decoder_spatio_temporal_scaling": FLAGS, "decoder_inject_noise": FLAGS,
    "down_block_types": NAMES, "downsample_type": NAMES, "upsample_residual": FLAGS, "upsample_factor": SIZES,
    "patch_size": SIZE, "patch_size_t": SIZE, "timestep_conditioning": FLAG,
    "spatial_compression_ratio": SIZE | NULL, "temporal_compression_ratio": SIZE | NULL,
})


@register("AutoencoderKLLTXVideo", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, nominal=NOMINAL,
          scale_factor=spatial_compression)
def autoencoder_kl_ltx_decode(config: Config, shape: RunShape) -> Node:
    return Node("vae", children=(_decoder(config, shape),), formula="autoencoder_kl_ltx_decode")


@register("AutoencoderKLLTXVideo", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, nominal=NOMINAL,
          scale_factor=spatial_compression)
def autoencoder_kl_ltx_encode(config: Config, shape: RunShape) -> Node:
    return Node("vae", children=(_encoder(config, shape),), formula="autoencoder_kl_ltx_encode")


loading_rules(
    "AutoencoderKLLTXVideo",
    # autoencoder_kl_ltx.py:1142-1143: persistent latents_mean / latents_std, latent_channels each
    buffers=lambda c: tuple(Buffer(name, positive_int(c, "latent_channels"), "loaded")
                            for name in ("latents_mean", "latents_std")),
    source="diffusers/models/autoencoders/autoencoder_kl_ltx.py:1142",
)
