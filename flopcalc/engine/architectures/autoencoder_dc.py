"""``AutoencoderDC`` (diffusers ``models/autoencoders/autoencoder_dc.py``), SANA's deep-compression
autoencoder: ``decode`` runs the ``Decoder`` on the latent, ``encode`` the ``Encoder`` on the image
(no quant convs). Tiling and slicing are off by default, so the whole latent is decoded in one pass.
The spatial factor is ``2 ** (len(encoder_block_out_channels) - 1)`` (``spatial_compression_ratio``,
SanaPipeline's ``vae_scale_factor``): 32 for SANA's f32c32 model. Block formulas:
:mod:`flopcalc.formulas.autoencoder_dc`.
"""

from __future__ import annotations

from fractions import Fraction

from flopcalc.engine.image_tiling import ImageTiling, sized_split
from flopcalc.formulas.tiling import CallSplit

from typing import Any

from flopcalc.engine.config import LAYER_COUNTS, NAMES, SIZE, SIZES, TEXT, Config, ListOf, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas.autoencoder_dc import (
    BLOCK_TYPES,
    NORM_TYPES,
    dc_decoder,
    dc_encoder,
)
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderDC.__init__`` keyword defaults (autoencoder_dc.py).
DEFAULTS = {
    "in_channels": 3, "latent_channels": 32, "attention_head_dim": 32,
    "encoder_block_types": "ResBlock", "decoder_block_types": "ResBlock",
    "encoder_block_out_channels": [128, 256, 512, 512, 1024, 1024],
    "decoder_block_out_channels": [128, 256, 512, 512, 1024, 1024],
    "encoder_layers_per_block": [2, 2, 2, 3, 3, 3], "decoder_layers_per_block": [3, 3, 3, 3, 3, 3],
    "encoder_qkv_multiscales": [[], [], [], [5], [5], [5]], "decoder_qkv_multiscales": [[], [], [], [5], [5], [5]],
    "upsample_block_type": "pixel_shuffle", "downsample_block_type": "pixel_unshuffle",
    "decoder_norm_types": "rms_norm", "decoder_act_fns": "silu", "encoder_out_shortcut": True,
    "decoder_in_shortcut": True, "decoder_conv_act_fn": "relu", "scaling_factor": 1.0,
}
SOURCE = "diffusers/models/autoencoders/autoencoder_dc.py"


def spatial_compression(values) -> int:
    """``AutoencoderDC.spatial_compression_ratio``: ``2 ** (len(encoder_block_out_channels) - 1)``."""
    return 2 ** (len(values.get("encoder_block_out_channels", DEFAULTS["encoder_block_out_channels"])) - 1)


def _per_stage(config: Config, key: str, stages: int, allowed: tuple[str, ...] | None = None) -> list:
    """A per-stage option given as one value (repeated, as the Encoder/Decoder do) or a list."""
    value = config[key]
    values = [value] * stages if isinstance(value, str) else list(value)
    if len(values) != stages:
        raise ConfigError(f"{config.component}/config.json: {key!r} has {len(values)} entries for {stages} stages")
    if allowed is not None and set(values) - set(allowed):
        raise ConfigError(f"{config.component}/config.json: {key!r} {values} is not supported "
                          f"(flopcalc models {', '.join(allowed)})")
    return values


def _stages(config: Config, side: str) -> dict[str, Any]:
    widths = [int(c) for c in config[f"{side}_block_out_channels"]]
    n = len(widths)
    layers = [count_int_value(config, f"{side}_layers_per_block", v) for v in config[f"{side}_layers_per_block"]]
    if len(layers) != n:
        raise ConfigError(f"{config.component}/config.json: {side}_layers_per_block has {len(layers)} entries for "
                          f"{n} stages")
    scales = [[int(k) for k in s] for s in config[f"{side}_qkv_multiscales"]]
    if len(scales) != n:
        raise ConfigError(f"{config.component}/config.json: {side}_qkv_multiscales has {len(scales)} entries for "
                          f"{n} stages")
    head_dim = positive_int(config, "attention_head_dim")
    types = _per_stage(config, f"{side}_block_types", n, BLOCK_TYPES)
    narrow = [c for c, t in zip(widths, types) if t == "EfficientViTBlock" and c < head_dim]
    if narrow:  # SanaMultiscaleLinearAttention would build 0 heads (a Conv2d with 0 groups)
        raise ConfigError(f"{config.component}/config.json (AutoencoderDC): attention_head_dim {head_dim} exceeds the "
                          f"{narrow[0]} channels of an EfficientViTBlock stage of {side}_block_out_channels; "
                          "expected at most the stage's width")
    return {
        "in_channels": positive_int(config, "in_channels"),
        "latent_channels": positive_int(config, "latent_channels"),
        "head_dim": head_dim,
        "block_types": types,
        "block_out_channels": widths,
        "layers_per_block": layers,
        "qkv_multiscales": scales,
    }


def count_int_value(config: Config, key: str, value: Any) -> int:
    """One entry of a list of layer counts: a non-negative integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{config.component}/config.json: {key!r} entries must be non-negative integers, "
                          f"got {value!r}")
    return value


#: Every config key ``AutoencoderDC`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("AutoencoderDC", {
    "in_channels": SIZE, "latent_channels": SIZE, "attention_head_dim": SIZE,
    "encoder_block_out_channels": SIZES, "decoder_block_out_channels": SIZES,
    "encoder_layers_per_block": LAYER_COUNTS, "decoder_layers_per_block": LAYER_COUNTS,
    "encoder_block_types": TEXT | NAMES, "decoder_block_types": TEXT | NAMES,
    "encoder_qkv_multiscales": ListOf(ListOf(SIZE, lo=0), lo=0),
    "decoder_qkv_multiscales": ListOf(ListOf(SIZE, lo=0), lo=0),
    "decoder_norm_types": TEXT | NAMES, "downsample_block_type": TEXT, "upsample_block_type": TEXT,
})


@register("AutoencoderDC", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=spatial_compression)
def autoencoder_dc_decode(config: Config, shape: RunShape) -> Node:
    kw = _stages(config, "decoder")
    norms = _per_stage(config, "decoder_norm_types", len(kw["block_out_channels"]), NORM_TYPES)
    decoder = dc_decoder(norm_types=norms, interpolate=config["upsample_block_type"] == "interpolate",
                         height=shape.latent_height, width=shape.latent_width, **kw)
    return Node("vae", children=(decoder,), formula="autoencoder_dc_decode")


@register("AutoencoderDC", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=spatial_compression)
def autoencoder_dc_encode(config: Config, shape: RunShape) -> Node:
    kw = _stages(config, "encoder")
    encoder = dc_encoder(pixel_unshuffle=config["downsample_block_type"] == "pixel_unshuffle",
                         height=shape.height, width=shape.width, **kw)
    return Node("vae", children=(encoder,), formula="autoencoder_dc_encode")


def _tile_split(values, latent_h: int, latent_w: int, tile_px: int | None) -> CallSplit:
    tile = tile_px or DC_TILE
    return sized_split(values, latent_h, latent_w, tile, IMAGE_TILING.stride_px(tile), spatial_compression(values))


#: ``AutoencoderDC.__init__`` sets ``tile_sample_min_height/width = 512``, ``tile_sample_stride_height/width = 448``
#: (autoencoder_dc.py:496-501); ``enable_tiling`` takes all four (autoencoder_dc.py:506-536).
DC_TILE = 512
IMAGE_TILING = ImageTiling(default_tile=lambda values: DC_TILE, stride=Fraction(448, 512), takes_sizes=True,
                           compression=spatial_compression, decode_split=_tile_split,
                           source="diffusers/models/autoencoders/autoencoder_dc.py:496-501, 506-536, 575, 667-699")
