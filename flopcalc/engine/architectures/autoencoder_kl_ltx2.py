"""``AutoencoderKLLTX2Video`` (diffusers ``models/autoencoders/autoencoder_kl_ltx2.py``), the video VAE of
LTX-2: 32× spatial, 8× temporal compression for the LTX-2 card (patch 4; the encoder's four downsamplers are
spatial, temporal and twice spatio-temporal; the decoder's three residual upsamplers, each ×2 in time and space,
``upsample_factor`` 2); block formulas in ``formulas/ltx2.py``.

``decode`` is ``vae.decode(z, temb)`` on one latent video ``(T, h, w)``: ``_decode`` runs the decoder once over
all ``T`` latent frames (``use_framewise_decoding`` and ``use_tiling`` are off by default and the LTX-2
pipelines turn neither on) and yields ``8(T − 1) + 1`` frames of ``32h × 32w``. With ``timestep_conditioning``
the pipeline passes ``decode_timestep`` and the decoder's timestep embedders run (the card's config is
reconstructed with it off). A spatially tiled decode (``vae.enable_tiling()``: 512-px tiles at stride 448, as
LTX-Video's) is the same decoder on each overlapping tile, each over all latent frames: :func:`decode_split`, which
shares LTX-Video's tile grid (``autoencoder_kl_ltx.latent_tile_split``).

``encode`` is ``vae.encode(x)`` on one video ``(F, H, W)``: the causal encoder, ``(F − 1)/8 + 1`` latent frames
of ``H/32 × W/32`` for the card. An image (no frame count) is one frame.

Parameters are the whole model's: encoder + decoder (``latents_mean`` / ``latents_std`` are buffers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flopcalc.engine.architectures.autoencoder_kl_ltx import latent_tile_split
from flopcalc.engine.config import (
    FLAG, FLAGS, LAYER_COUNTS, NAMES, NULL, SIZE, SIZES, Config, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas.ltx2 import DOWNSAMPLE_STRIDES, UPSAMPLE_STRIDES, ltx2_decoder, ltx2_encoder
from flopcalc.formulas.tiling import CallSplit

SOURCE = "diffusers/models/autoencoders/autoencoder_kl_ltx2.py"

#: ``AutoencoderKLLTX2Video.__init__`` keyword defaults (autoencoder_kl_ltx2.py:1071-1100, diffusers 0.42.1).
DEFAULTS = {
    "in_channels": 3, "out_channels": 3, "latent_channels": 128, "block_out_channels": [256, 512, 1024, 2048],
    "down_block_types": ["LTX2VideoDownBlock3D"] * 4, "decoder_block_out_channels": [256, 512, 1024],
    "layers_per_block": [4, 6, 6, 2, 2], "decoder_layers_per_block": [5, 5, 5, 5],
    "spatio_temporal_scaling": [True, True, True, True], "decoder_spatio_temporal_scaling": [True, True, True],
    "decoder_inject_noise": [False, False, False, False],
    "downsample_type": ["spatial", "temporal", "spatiotemporal", "spatiotemporal"],
    "upsample_type": ["spatiotemporal", "spatiotemporal", "spatiotemporal"], "upsample_residual": [True, True, True],
    "upsample_factor": [2, 2, 2], "timestep_conditioning": False, "patch_size": 4, "patch_size_t": 1,
    "resnet_norm_eps": 1e-6, "scaling_factor": 1.0, "encoder_causal": True, "decoder_causal": True,
    "encoder_spatial_padding_mode": "zeros", "decoder_spatial_padding_mode": "reflect",
    "spatial_compression_ratio": None, "temporal_compression_ratio": None,
}
#: A shape every config can run, for parameter counts: one frame of 4096² pixels, a 2-frame 2×2 latent.
NOMINAL = RunShape(latent_height=2, latent_width=2, latent_frames=2, height=4096, width=4096, frames=1)


def _get(values: Mapping[str, Any], key: str) -> Any:
    value = values.get(key)
    return DEFAULTS[key] if value is None else value


def _scaling(values: Mapping[str, Any]) -> int:
    scaling = _get(values, "spatio_temporal_scaling")
    if isinstance(scaling, bool):  # one flag for every encoder level (the constructor expands it)
        return len(_get(values, "layers_per_block")) - 1 if scaling else 0
    return sum(bool(x) for x in scaling)


def spatial_compression(values: Mapping[str, Any]) -> int:
    """``spatial_compression_ratio``: the config's, else ``patch_size · 2^Σ spatio_temporal_scaling`` (32 for the
    card), as ``AutoencoderKLLTX2Video.__init__`` computes it (:1151)."""
    return int(_get(values, "spatial_compression_ratio") or _get(values, "patch_size") * 2 ** _scaling(values))


def temporal_compression(values: Mapping[str, Any]) -> int:
    """``temporal_compression_ratio``: the config's, else ``patch_size_t · 2^Σ spatio_temporal_scaling`` (8 for
    the card's explicit value)."""
    return int(_get(values, "temporal_compression_ratio") or _get(values, "patch_size_t") * 2 ** _scaling(values))


def decode_split(values: Mapping[str, Any], latent_height: int, latent_width: int, tiling: bool) -> CallSplit:
    """How ``vae.decode`` runs: with ``use_tiling`` (``vae.enable_tiling()``), ``_decode`` (:1281-1282) runs
    ``tiled_decode`` (:1405-1465) when a latent side exceeds ``tile_sample_min / spatial_compression_ratio``: the
    decoder on the latent tiles ``z[..., i : i + 512/f, j : j + 512/f]`` for ``i`` in ``range(0, side, 448/f)``,
    each over all latent frames (``enable_tiling`` leaves ``use_framewise_decoding`` off, :1174, 1218; its default
    tiles 512 px every 448, :1183-1189, are LTX-Video's: the grid is :func:`autoencoder_kl_ltx.latent_tile_split`);
    else one call."""
    return latent_tile_split(latent_height, latent_width, spatial_compression(values), tiling)


def _list(config: Config, key: str, length: int, kind: type, minimum: int = 0) -> list[Any]:
    value = config[key]
    if isinstance(value, bool) and kind is bool:  # the constructor expands one flag to every level
        return [value] * length
    if not isinstance(value, (list, tuple)) or len(value) < length or any(
            (not isinstance(v, bool)) if kind is bool else (isinstance(v, bool) or not isinstance(v, int) or v < minimum)
            for v in value):
        what = "flags" if kind is bool else f"integers >= {minimum}"
        raise ConfigError(f"{config.component}/config.json: {key!r} must list at least {length} {what}, got {value!r}")
    return list(value)


def _names(config: Config, key: str, length: int, allowed: Any) -> list[str]:
    value = config[key]
    if not isinstance(value, (list, tuple)) or len(value) < length or any(v not in allowed for v in value[:length]):
        raise ConfigError(f"{config.component}/config.json: {key!r} must list {length} of {' / '.join(allowed)}, "
                          f"got {value!r}")
    return list(value)


def _decoder(config: Config, shape: RunShape) -> Node:
    boc = _list(config, "decoder_block_out_channels", 1, int, 1)
    levels = len(boc)
    factor = _list(config, "upsample_factor", levels, int, 1)
    for i, f in enumerate(factor):
        if boc[i] % f or (i and boc[i - 1] % f):
            raise ConfigError(f"{config.component}/config.json: decoder_block_out_channels {boc} must divide by "
                              f"upsample_factor {factor}")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    return ltx2_decoder(
        latent_channels=positive_int(config, "latent_channels"), out_channels=positive_int(config, "out_channels"),
        block_out_channels=boc, spatio_temporal_scaling=_list(config, "decoder_spatio_temporal_scaling", levels, bool),
        layers_per_block=_list(config, "decoder_layers_per_block", levels + 1, int),
        upsample_type=_names(config, "upsample_type", levels, tuple(UPSAMPLE_STRIDES)),
        patch_size=positive_int(config, "patch_size"),
        inject_noise=_list(config, "decoder_inject_noise", levels + 1, bool), upsample_factor=factor,
        timestep_conditioning=bool(config["timestep_conditioning"]),
        g=(frames, shape.latent_height, shape.latent_width))


def _encoder(config: Config, shape: RunShape) -> Node:
    boc = _list(config, "block_out_channels", 1, int, 1)
    levels = len(boc)
    _names(config, "down_block_types", levels, ("LTX2VideoDownBlock3D",))
    frames = 1 if shape.frames is None else shape.frames
    return ltx2_encoder(
        in_channels=positive_int(config, "in_channels"), latent_channels=positive_int(config, "latent_channels"),
        block_out_channels=boc, spatio_temporal_scaling=_list(config, "spatio_temporal_scaling", levels, bool),
        layers_per_block=_list(config, "layers_per_block", levels + 1, int),
        downsample_type=_names(config, "downsample_type", levels, ("conv", *DOWNSAMPLE_STRIDES)),
        patch_size=positive_int(config, "patch_size"), patch_size_t=positive_int(config, "patch_size_t"),
        g=(frames, shape.height, shape.width))


#: Every config key ``AutoencoderKLLTX2Video`` reads (assemblers and pipeline plans).
declare_keys("AutoencoderKLLTX2Video", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "decoder_block_out_channels": SIZES, "layers_per_block": LAYER_COUNTS, "decoder_layers_per_block": LAYER_COUNTS,
    "spatio_temporal_scaling": FLAGS | FLAG, "decoder_spatio_temporal_scaling": FLAGS | FLAG,
    "decoder_inject_noise": FLAGS | FLAG, "down_block_types": NAMES, "downsample_type": NAMES,
    "upsample_type": NAMES, "upsample_factor": SIZES, "patch_size": SIZE, "patch_size_t": SIZE,
    "timestep_conditioning": FLAG, "spatial_compression_ratio": SIZE | NULL,
    "temporal_compression_ratio": SIZE | NULL,
})


@register("AutoencoderKLLTX2Video", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, nominal=NOMINAL,
          scale_factor=spatial_compression)
def autoencoder_kl_ltx2_decode(config: Config, shape: RunShape) -> Node:
    return Node("vae", children=(_decoder(config, shape),), formula="autoencoder_kl_ltx2_decode")


@register("AutoencoderKLLTX2Video", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, nominal=NOMINAL,
          scale_factor=spatial_compression)
def autoencoder_kl_ltx2_encode(config: Config, shape: RunShape) -> Node:
    return Node("vae", children=(_encoder(config, shape),), formula="autoencoder_kl_ltx2_encode")


loading_rules(
    "AutoencoderKLLTX2Video",
    # autoencoder_kl_ltx2.py:1145-1148: persistent latents_mean / latents_std, latent_channels each
    buffers=lambda c: tuple(Buffer(name, positive_int(c, "latent_channels"), "loaded")
                            for name in ("latents_mean", "latents_std")),
    source="diffusers/models/autoencoders/autoencoder_kl_ltx2.py:1145",
)
