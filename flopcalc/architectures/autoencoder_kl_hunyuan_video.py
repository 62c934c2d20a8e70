"""``AutoencoderKLHunyuanVideo`` (diffusers ``models/autoencoders/autoencoder_kl_hunyuan_video.py``),
HunyuanVideo's causal 3-D VAE: 8× spatial (``spatial_compression_ratio``), 4× temporal
(``temporal_compression_ratio``; 129 frames ↔ 33 latent frames). Block formulas:
``formulas/hunyuan_video_vae.py``.

``decode`` / ``encode`` are ``vae.decode(z)`` / ``vae.encode(x)``. How they run is set on the model,
not in its config, so the run shape says it (:class:`HunyuanVideoVaeShape`, which the
pipeline plan fills from ``Settings.vae_tiling``):

* ``framewise=True, tiling=False`` (a plain :class:`RunShape` too): the model's defaults, as
  ``HunyuanVideoPipeline`` runs it: ``use_framewise_decoding`` / ``use_framewise_encoding`` on
  (overlapping temporal chunks: 5 latent frames every 3 when there are more than 4; 17 frames every
  12 when there are more than 16), ``use_tiling`` off;
* ``framewise=False, tiling=False``: both off: one pass over the whole latent / video;
* ``framewise=True, tiling=True``: after ``vae.enable_tiling()`` (the diffusers docs' example):
  temporal chunks and, within each, overlapping 256-pixel tiles every 192 pixels when a side is
  larger than 256 pixels (32 latent pixels every 24 for the decoder); overlaps counted in full.

A symbolic law's shapes are plain :class:`RunShape` s (the extra fields do not reach it), so the
one-pass runs have calls of their own for laws, ``decode_untiled`` / ``encode_untiled``: the same
modules, no parameters of their own (a component's parameters are the sum over its calls:
``decode`` holds ``post_quant_conv`` and the decoder's, ``encode`` the encoder's and ``quant_conv``'s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flopcalc.config import (
    Choice, FLAG, LAYERS, NAMES, SIZE, SIZES, Config, check_block_types, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.cost import Node
from flopcalc.errors import ConfigError, FlopcalcError
from flopcalc.formulas.hunyuan_video_vae import (
    TILE_SAMPLE_MIN_FRAMES,
    TILE_SAMPLE_MIN_SIZE,
    TILE_SAMPLE_STRIDE,
    TILE_SAMPLE_STRIDE_FRAMES,
    Tiles,
    VaeStructure,
    decode_call,
    encode_call,
    tiles,
    without_params,
)
from flopcalc.registry import RunShape, register

CLASS = "AutoencoderKLHunyuanVideo"
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_hunyuan_video.py"
#: ``AutoencoderKLHunyuanVideo.__init__`` keyword defaults.
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 16,
    "down_block_types": ["HunyuanVideoDownBlock3D"] * 4,
    "up_block_types": ["HunyuanVideoUpBlock3D"] * 4,
    "block_out_channels": [128, 256, 512, 512],
    "layers_per_block": 2,
    "act_fn": "silu",
    "norm_num_groups": 32,
    "scaling_factor": 0.476986,
    "spatial_compression_ratio": 8,
    "temporal_compression_ratio": 4,
    "mid_block_add_attention": True,
}
NOMINAL = RunShape(latent_height=8, latent_width=8, latent_frames=1, height=64, width=64, frames=1)


@dataclass(frozen=True)
class HunyuanVideoVaeShape(RunShape):
    """A VAE run shape that also says how the model runs: ``use_framewise_decoding`` /
    ``use_framewise_encoding`` (``framewise``) and ``use_tiling`` (``tiling``)."""

    framewise: bool = True
    tiling: bool = False


def mode_of(shape: RunShape) -> tuple[bool, bool]:
    """``(framewise, tiling)`` of a run shape: the model's defaults for a plain :class:`RunShape`."""
    return getattr(shape, "framewise", True), getattr(shape, "tiling", False)


def scale_factor(values: Mapping[str, Any]) -> int:
    """``vae_scale_factor_spatial`` of ``HunyuanVideoPipeline``: the VAE's ``spatial_compression_ratio``."""
    return values.get("spatial_compression_ratio", DEFAULTS["spatial_compression_ratio"])


def temporal_factor(values: Mapping[str, Any]) -> int:
    """``vae_scale_factor_temporal``: the VAE's ``temporal_compression_ratio``."""
    return values.get("temporal_compression_ratio", DEFAULTS["temporal_compression_ratio"])


def structure(config: Config) -> VaeStructure:
    channels = positive_int_list(config, "block_out_channels")
    for key, kind in (("down_block_types", "HunyuanVideoDownBlock3D"), ("up_block_types", "HunyuanVideoUpBlock3D")):
        check_block_types(config, key, kind, len(channels))
    temporal = positive_int(config, "temporal_compression_ratio")
    if temporal != 4:
        raise ConfigError(f"{config.component}/config.json: temporal_compression_ratio {temporal} is not supported "
                          "(HunyuanVideoDecoder3D only builds 4)")
    spatial = positive_int(config, "spatial_compression_ratio")
    if spatial & (spatial - 1):
        raise ConfigError(f"{config.component}/config.json: spatial_compression_ratio must be a power of 2, "
                          f"got {spatial}")
    return VaeStructure(
        in_channels=positive_int(config, "in_channels"), out_channels=positive_int(config, "out_channels"),
        latent_channels=positive_int(config, "latent_channels"), block_out_channels=tuple(channels),
        layers_per_block=count_int(config, "layers_per_block"), groups=positive_int(config, "norm_num_groups"),
        mid_attention=bool(config["mid_block_add_attention"]), spatial_ratio=spatial, temporal_ratio=temporal)


def chunked(frames: Any, limit: int, framewise: bool) -> bool:
    """Whether ``_decode`` / ``_encode`` take the temporal-chunk path: framewise and more than
    ``limit`` frames. A symbolic frame count is taken as chunked: the pipeline plan picks the
    ``_untiled`` call for clips short enough to run in one pass."""
    return framewise and (not isinstance(frames, int) or frames > limit)


def _spatial(size: Any, other: Any, tile: int, stride: int, tiling: bool) -> Tiles:
    """Tiles along one side: ``tiled_decode`` / ``tiled_encode`` run when tiling is on and either
    side exceeds the tile."""
    if not tiling:
        return ((size, 1),)
    if not (isinstance(size, int) and isinstance(other, int)):
        raise FlopcalcError("the spatially tiled HunyuanVideo VAE (vae_tiling=True) has no single law in H and W "
                            "(its tile count and sizes step with the size); estimate it numerically")
    if size > tile or other > tile:
        return tiles(size, tile, stride)
    return ((size, 1),)


def _decode(config: Config, shape: RunShape, framewise: bool, tiling: bool) -> Node:
    s = structure(config)
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    limit = TILE_SAMPLE_MIN_FRAMES // s.temporal_ratio
    if chunked(frames, limit, framewise):
        temporal = tiles(frames, limit + 1, TILE_SAMPLE_STRIDE_FRAMES // s.temporal_ratio)
    else:
        temporal = ((frames, 1),)
    tile, stride = TILE_SAMPLE_MIN_SIZE // s.spatial_ratio, TILE_SAMPLE_STRIDE // s.spatial_ratio
    h, w = shape.latent_height, shape.latent_width
    return decode_call(s, temporal, _spatial(h, w, tile, stride, tiling), _spatial(w, h, tile, stride, tiling))


def _encode(config: Config, shape: RunShape, framewise: bool, tiling: bool) -> Node:
    s = structure(config)
    frames = 1 if shape.frames is None else shape.frames
    if chunked(frames, TILE_SAMPLE_MIN_FRAMES, framewise):
        temporal = tiles(frames, TILE_SAMPLE_MIN_FRAMES + 1, TILE_SAMPLE_STRIDE_FRAMES)
    else:
        temporal = ((frames, 1),)
    h, w = shape.height, shape.width
    return encode_call(s, temporal, _spatial(h, w, TILE_SAMPLE_MIN_SIZE, TILE_SAMPLE_STRIDE, tiling),
                       _spatial(w, h, TILE_SAMPLE_MIN_SIZE, TILE_SAMPLE_STRIDE, tiling))


#: Every config key ``AutoencoderKLHunyuanVideo`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("AutoencoderKLHunyuanVideo", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "down_block_types": NAMES, "up_block_types": NAMES,
    "mid_block_add_attention": FLAG, "norm_num_groups": SIZE,
    "spatial_compression_ratio": Choice(*(2**k for k in range(11))),  # a power of 2
    "temporal_compression_ratio": Choice(4),  # the only ratio HunyuanVideoDecoder3D builds
})


@register(CLASS, call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor,
          nominal=NOMINAL)
def autoencoder_kl_hunyuan_video_decode(config: Config, shape: RunShape) -> Node:
    """``vae.decode(z)`` as the shape's mode says (default: temporal chunks, untiled)."""
    return _decode(config, shape, *mode_of(shape))


@register(CLASS, call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor,
          nominal=NOMINAL)
def autoencoder_kl_hunyuan_video_encode(config: Config, shape: RunShape) -> Node:
    """``vae.encode(x)`` as the shape's mode says (default: temporal chunks, untiled)."""
    return _encode(config, shape, *mode_of(shape))


@register(CLASS, call="decode_untiled", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor,
          nominal=NOMINAL)
def autoencoder_kl_hunyuan_video_decode_untiled(config: Config, shape: RunShape) -> Node:
    """``vae.decode(z)`` in one pass (no chunks, no tiles), for symbolic laws; parameters: ``decode``'s."""
    return without_params(_decode(config, shape, False, False))


@register(CLASS, call="encode_untiled", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor,
          nominal=NOMINAL)
def autoencoder_kl_hunyuan_video_encode_untiled(config: Config, shape: RunShape) -> Node:
    """``vae.encode(x)`` in one pass, for symbolic laws; parameters: ``encode``'s."""
    return without_params(_encode(config, shape, False, False))
