"""``AutoencoderKLHunyuanVideo`` (diffusers ``models/autoencoders/autoencoder_kl_hunyuan_video.py``),
HunyuanVideo's causal 3-D VAE: 8× spatial (``spatial_compression_ratio``), 4× temporal
(``temporal_compression_ratio``; 129 frames ↔ 33 latent frames). Block formulas:
``formulas/hunyuan_video_vae.py``.

``decode`` / ``encode`` are ``vae.decode(z)`` / ``vae.encode(x)``. How they run is set on the model,
not in its config (``use_framewise_decoding`` / ``use_framewise_encoding``, ``use_tiling``), so the
run shape says it (:class:`HunyuanVideoVaeShape`, which the pipeline plan fills from
``Settings.vae_tiling``):

* ``framewise=True, tiling=False`` (a plain :class:`RunShape` too): the model's defaults, as
  ``HunyuanVideoPipeline`` runs it: overlapping temporal chunks (5 latent frames every 3 when there
  are more than 4; 17 frames every 12 when there are more than 16), no spatial tiles;
* ``framewise=False, tiling=False``: both off: one pass over the whole latent / video;
* ``framewise=True, tiling=True``: after ``vae.enable_tiling()`` (the diffusers docs' example):
  temporal chunks and, within each, overlapping 256-pixel tiles every 192 pixels when a side is
  larger than 256 pixels (32 latent pixels every 24 for the decoder); overlaps counted in full.

:func:`decode_split` / :func:`encode_split` turn a mode and a size into the call's
:class:`~flopcalc.formulas.tiling.CallSplit` (chunks × tiles, ``formulas/tiling.py``). The plan puts
it on the run shape (``RunShape.split``): it takes the one-pass or the chunked branch at its sizes,
also for a symbolic law, whose chunk counts are then exact ``floor`` / ``Min`` terms in ``F``; the
assemblers sum every piece into one tree (``decode_call`` / ``encode_call``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flopcalc.engine.config import (
    Choice, FLAG, LAYERS, NAMES, SIZE, SIZES, Config, check_block_types, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.formulas.hunyuan_video_vae import (
    TILE_SAMPLE_MIN_FRAMES,
    TILE_SAMPLE_MIN_SIZE,
    TILE_SAMPLE_STRIDE,
    TILE_SAMPLE_STRIDE_FRAMES,
    VaeStructure,
    decode_call,
    encode_call,
)
from flopcalc.formulas.tiling import CallSplit, Slices, slices, tiled_or_whole, whole
from flopcalc.engine.registry import RunShape, register

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
    """A VAE run shape that also says how the model's switches are set: ``use_framewise_decoding`` /
    ``use_framewise_encoding`` (``framewise``) and ``use_tiling`` (``tiling``), as reports show them;
    ``split`` (the plan's :func:`decode_split` / :func:`encode_split`) is what they make of this call."""

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


def _chunks(frames: Any, limit: int, window: int, stride: int, framewise: bool) -> Slices:
    """``_decode`` / ``_encode``: the temporal-chunk path (``_temporal_tiled_decode`` /
    ``_temporal_tiled_encode``: ``window`` frames every ``stride``) when framewise and more than
    ``limit`` frames, else one pass. The branch is taken at the frame count's value (a symbolic plan's
    tracked int: at its representative value); a bare symbolic count is taken as chunked."""
    if framewise and (not isinstance(frames, int) or frames > limit):
        return slices(frames, window, stride)
    return whole(frames)


def _spatial(height: Any, width: Any, tile: int, stride: int, tiling: bool) -> tuple[Slices, Slices]:
    """Rows and columns: ``tiled_decode`` / ``tiled_encode`` run when tiling is on and either side
    exceeds the tile."""
    if tiling and not (isinstance(height, int) and isinstance(width, int)):
        raise FlopcalcError("the spatially tiled HunyuanVideo VAE (vae_tiling=True) has no single law in H and W "
                            "(its tile count and sizes step with the size); estimate it numerically")
    return tiled_or_whole(height, width, tile, tile, stride, stride, tiling)


def decode_split(values: Mapping[str, Any], latent_frames: Any, latent_height: Any, latent_width: Any,
                 framewise: bool = True, tiling: bool = False) -> CallSplit:
    """How ``vae.decode`` runs on a latent: chunks of ``16 // r_t + 1`` latent frames every
    ``12 // r_t`` (more than ``16 // r_t`` frames, framewise), tiles of ``256 // r_s`` latent pixels
    every ``192 // r_s`` (tiling)."""
    r_t, r_s = temporal_factor(values), scale_factor(values)
    limit = TILE_SAMPLE_MIN_FRAMES // r_t
    frames = _chunks(latent_frames, limit, limit + 1, TILE_SAMPLE_STRIDE_FRAMES // r_t, framewise)
    return CallSplit(frames, *_spatial(latent_height, latent_width, TILE_SAMPLE_MIN_SIZE // r_s,
                                       TILE_SAMPLE_STRIDE // r_s, tiling))


def encode_split(values: Mapping[str, Any], frames: Any, height: Any, width: Any, framewise: bool = True,
                 tiling: bool = False) -> CallSplit:
    """How ``vae.encode`` runs on a video: chunks of 17 frames every 12 (more than 16, framewise),
    256-pixel tiles every 192 (tiling)."""
    chunks = _chunks(frames, TILE_SAMPLE_MIN_FRAMES, TILE_SAMPLE_MIN_FRAMES + 1, TILE_SAMPLE_STRIDE_FRAMES,
                     framewise)
    return CallSplit(chunks, *_spatial(height, width, TILE_SAMPLE_MIN_SIZE, TILE_SAMPLE_STRIDE, tiling))


#: Every config key ``AutoencoderKLHunyuanVideo`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
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
    """``vae.decode(z)`` split as ``shape.split`` says (else as the shape's mode says; default:
    temporal chunks, untiled)."""
    s = structure(config)
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    split = shape.split or decode_split(config.values, frames, shape.latent_height, shape.latent_width,
                                        *mode_of(shape))
    return decode_call(s, split.frames, split.rows, split.cols)


@register(CLASS, call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=scale_factor,
          nominal=NOMINAL)
def autoencoder_kl_hunyuan_video_encode(config: Config, shape: RunShape) -> Node:
    """``vae.encode(x)`` split as ``shape.split`` says (else as the shape's mode says; default:
    temporal chunks, untiled)."""
    s = structure(config)
    frames = 1 if shape.frames is None else shape.frames
    split = shape.split or encode_split(config.values, frames, shape.height, shape.width, *mode_of(shape))
    return encode_call(s, split.frames, split.rows, split.cols)
