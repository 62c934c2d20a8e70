"""``AutoencoderKLCogVideoX`` (diffusers ``models/autoencoders/autoencoder_kl_cogvideox.py``), the
causal 3-D VAE of CogVideoX: 8× in space (``2 ** (len(block_out_channels) − 1)``), 4× in time
(``temporal_compression_ratio``: ``F`` frames ↔ ``(F − 1) / 4 + 1`` latent frames). Block formulas:
``formulas/cogvideox_vae.py``.

``decode`` runs ``_decode``: the decoder on frame batches of 2 latent frames (the first of 3 when
the count is odd) with a conv cache, ``post_quant_conv`` first when ``use_post_quant_conv``; with
``enable_tiling()`` (off by default, ``use_tiling = False``) and a latent wider or taller than the
tile, ``tiled_decode`` runs that on every overlapping tile. ``encode`` runs ``_encode``: the encoder
on batches of 8 frames (``quant_conv`` after, when ``use_quant_conv``), tiled likewise.

Shapes: decode reads ``latent_frames`` (1 when absent: an image), ``latent_height``/``width`` and,
for symbolic laws, ``frames`` (the decoded frame count, which fixes the parity of the frame batches);
encode reads ``frames`` (1 when absent), ``height``, ``width``. A tiled call is the untiled call on
every tile: :func:`decode_split` / :func:`encode_split` say how a call is split
(``formulas/tiling.py``), and the pipeline plans one run per tile shape.
Parameters of the whole model are the sum over the two calls (decode: decoder and
``post_quant_conv``; encode: encoder and ``quant_conv``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from flopcalc.engine.config import (
    FLAG, LAYERS, NAMES, RATIO, SIZE, SIZES, Config, check_block_types, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.formulas import cogvideox_vae as vae
from flopcalc.formulas.tiling import CallSplit, tiled_or_whole
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderKLCogVideoX.__init__`` keyword defaults.
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["CogVideoXDownBlock3D"] * 4,
    "up_block_types": ["CogVideoXUpBlock3D"] * 4,
    "block_out_channels": [128, 256, 256, 512],
    "latent_channels": 16,
    "layers_per_block": 3,
    "act_fn": "silu",
    "norm_eps": 1e-6,
    "norm_num_groups": 32,
    "temporal_compression_ratio": 4,
    "sample_height": 480,
    "sample_width": 720,
    "scaling_factor": 1.15258426,
    "shift_factor": None,
    "latents_mean": None,
    "latents_std": None,
    "force_upcast": True,
    "use_quant_conv": False,
    "use_post_quant_conv": False,
    "invert_scale_latents": False,
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_cogvideox.py"


def _get(values: Mapping[str, Any], key: str) -> Any:
    return values.get(key, DEFAULTS[key])


def scale_factor(values: Mapping[str, Any]) -> int:
    """``vae_scale_factor_spatial`` as ``CogVideoXPipeline`` computes it: ``2 ** (len(block_out_channels) − 1)``."""
    return 2 ** (len(_get(values, "block_out_channels")) - 1)


def temporal_ratio(values: Mapping[str, Any]) -> int:
    """``vae_scale_factor_temporal``: the config's ``temporal_compression_ratio``."""
    ratio = _get(values, "temporal_compression_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio < 1 or ratio != int(ratio):
        raise ConfigError(f"vae/config.json: 'temporal_compression_ratio' must be a positive integer, got {ratio!r}")
    return int(ratio)


def temporal_levels(values: Mapping[str, Any]) -> int:
    """Up/down blocks that resample time: ``int(np.log2(temporal_compression_ratio))``."""
    return int(math.log2(temporal_ratio(values)))


def decoded_frames(values: Mapping[str, Any], latent_frames: int) -> int:
    """Frames ``decode`` returns for ``latent_frames`` (49 for 13 with the 4× VAE)."""
    levels = min(temporal_levels(values), len(_get(values, "block_out_channels")) - 1)
    return vae.decoded_frames(latent_frames, levels, latent_frames % 2)


def _tile_sizes(values: Mapping[str, Any]) -> tuple[int, int]:
    """``tile_sample_min_height`` / ``_width``: half the config's ``sample_height`` / ``sample_width``."""
    return _get(values, "sample_height") // 2, _get(values, "sample_width") // 2


def _split(height: int, width: int, tile_h: int, tile_w: int, tiling: bool) -> CallSplit:
    """``tiled_decode`` / ``tiled_encode`` when ``use_tiling`` and a side exceeds its tile (tiles every
    ``int(tile · (1 − tile_overlap_factor))``), else the whole call."""
    return CallSplit(None, *tiled_or_whole(height, width, tile_h, tile_w, vae.tile_stride(tile_h, vae.TILE_OVERLAP_HEIGHT),
                                           vae.tile_stride(tile_w, vae.TILE_OVERLAP_WIDTH), tiling))


def decode_split(values: Mapping[str, Any], latent_h: int, latent_w: int, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs: with ``enable_tiling()``, ``tiled_decode`` on latent tiles of
    ``tile_latent_min_height × tile_latent_min_width`` (the sample tile over the scale factor), each
    through the whole frame-batched decoder, when the latent exceeds one; else one call (the frames are
    never split into independent calls: the frame batches share a conv cache, in the decoder's formula)."""
    sample_h, sample_w = _tile_sizes(values)
    f = scale_factor(values)
    return _split(latent_h, latent_w, int(sample_h / f), int(sample_w / f), tiling)


def encode_split(values: Mapping[str, Any], height: int, width: int, tiling: bool) -> CallSplit:
    """How ``vae.encode`` runs: with ``enable_tiling()``, ``tiled_encode`` on pixel tiles of
    ``tile_sample_min_height × tile_sample_min_width`` when the video exceeds one; else one call."""
    return _split(height, width, *_tile_sizes(values), tiling)


def _structure(config: Config) -> dict[str, Any]:
    channels = positive_int_list(config, "block_out_channels")
    for key, kind in (("down_block_types", "CogVideoXDownBlock3D"), ("up_block_types", "CogVideoXUpBlock3D")):
        check_block_types(config, key, kind, len(channels))
    return {
        "block_out_channels": channels,
        "layers_per_block": count_int(config, "layers_per_block"),
    }


def _levels(config: Config) -> tuple[int, int]:
    """(resolution levels, the ones that resample time)."""
    levels = len(config["block_out_channels"])
    return levels, min(temporal_levels(dict(config.values)), levels - 1)


#: Every config key ``AutoencoderKLCogVideoX`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("AutoencoderKLCogVideoX", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "down_block_types": NAMES, "up_block_types": NAMES,
    "use_quant_conv": FLAG, "use_post_quant_conv": FLAG, "temporal_compression_ratio": SIZE | RATIO,
    "sample_height": SIZE, "sample_width": SIZE, "norm_num_groups": SIZE,
})


@register("AutoencoderKLCogVideoX", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_cogvideox_decode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z, out = positive_int(config, "latent_channels"), positive_int(config, "out_channels")
    levels, k_t = _levels(config)
    h, w = shape.latent_height, shape.latent_width
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    odd = vae.first_batch_odd(frames, shape.frames, k_t)
    area = h * w
    positions = vae.decoder_positions(frames, odd, area, levels, k_t)
    children = []
    if config["use_post_quant_conv"]:
        if out != z:
            raise ConfigError(f"{config.component}/config.json: diffusers builds post_quant_conv with out_channels "
                              f"({out}) channels, which cannot take the {z}-channel latent: decode would fail")
        children.append(Node("post_quant_conv", vae.safe_conv(out, out, 1, frames * area)))
    children.append(vae.decoder(latent_channels=z, out_channels=out, positions=positions, **kw))
    return Node("vae", children=tuple(children), formula="autoencoder_kl_cogvideox_decode")


@register("AutoencoderKLCogVideoX", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_cogvideox_encode(config: Config, shape: RunShape) -> Node:
    """``quant_conv`` is built with ``2 · out_channels`` channels (as diffusers 0.42.1 does); it
    only runs when that equals the encoder's ``2 · latent_channels`` output."""
    kw = _structure(config)
    z, out = positive_int(config, "latent_channels"), positive_int(config, "out_channels")
    levels, k_t = _levels(config)
    frames = 1 if shape.frames is None else shape.frames
    try:
        positions = vae.encoder_positions(frames, shape.height, shape.width, levels, k_t)
    except ValueError as exc:
        raise ResolutionError(f"{config.component}: a {shape.height}×{shape.width} video (or tile) is too small to "
                              f"encode: {exc}") from None
    children = [vae.encoder(in_channels=positive_int(config, "in_channels"), latent_channels=z, positions=positions,
                            **kw)]
    if config["use_quant_conv"]:
        children.append(Node("quant_conv", vae.safe_conv(2 * out, 2 * out, 1, positions[-1])))
    return Node("vae", children=tuple(children), formula="autoencoder_kl_cogvideox_encode")
