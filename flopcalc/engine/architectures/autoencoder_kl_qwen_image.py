"""``AutoencoderKLQwenImage`` (diffusers ``models/autoencoders/autoencoder_kl_qwenimage.py``), the
causal 3-D VAE of Qwen-Image (fine-tuned from the Wan 2.1 video VAE), on one image: a
``(B, C, 1, H, W)`` tensor, i.e. one chunk of one frame (block formulas: ``formulas/causal_vae.py``).

``decode`` runs ``post_quant_conv`` (causal 1×1×1, z → z) on the latent and the decoder once per
latent frame (one here); ``encode`` runs the encoder on the first frame and ``quant_conv``
(causal 1×1×1, 2z → 2z). Tiling and slicing are off by default. On a single frame the
``time_conv`` of the temporal resamplers never runs (their cache slot is empty on the first chunk):
their parameters count, their MACs are 0. The parameters of the whole model are the sum over the two
calls (decode: ``post_quant_conv`` + decoder; encode: encoder + ``quant_conv``).
"""

from __future__ import annotations

from fractions import Fraction

from flopcalc.engine.image_tiling import ImageTiling, sized_split
from flopcalc.formulas.tiling import CallSplit

from typing import Any

from flopcalc.engine.config import (
    FLAGS, LAYERS, RATIO, SIZE, SIZES, Config, ListOf, count_int, declare_keys, positive_int,
    positive_int_list,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.causal_vae import causal_conv3d, causal_decoder, causal_encoder
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderKLQwenImage.__init__`` keyword defaults (autoencoder_kl_qwenimage.py).
DEFAULTS = {
    "base_dim": 96,
    "z_dim": 16,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "dropout": 0.0,
    "input_channels": 3,
    "latents_mean": [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508, 0.4134, -0.0715,
                     0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921],
    "latents_std": [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743, 3.2687, 2.1526, 2.8652,
                    1.5579, 1.6382, 1.1253, 2.8251, 1.9160],
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_qwenimage.py"


def scale_factor(values: dict[str, Any]) -> int:
    """``vae_scale_factor`` as ``QwenImagePipeline`` computes it: ``2 ** len(vae.temperal_downsample)``."""
    return 2 ** len(values.get("temperal_downsample", DEFAULTS["temperal_downsample"]))


def causal_vae_levels(config: Config) -> list[int]:
    """``dim_mult`` of a Wan-style causal VAE (Wan, Qwen-Image), checked with the
    ``temperal_downsample`` list that must give one entry per downsampling level."""
    dim_mult = positive_int_list(config, "dim_mult")
    temporal = config["temperal_downsample"]
    if not isinstance(temporal, list) or len(temporal) < len(dim_mult) - 1:
        raise ConfigError(f"{config.component}/config.json: 'temperal_downsample' needs one entry per "
                          f"downsampling level ({len(dim_mult) - 1}), got {temporal!r}")
    return dim_mult


def _structure(config: Config) -> dict[str, Any]:
    return {
        "base_dim": positive_int(config, "base_dim"),
        "dim_mult": causal_vae_levels(config),
        "num_res_blocks": count_int(config, "num_res_blocks"),
    }


#: Every config key ``AutoencoderKLQwenImage`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("AutoencoderKLQwenImage", {
    "base_dim": SIZE, "z_dim": SIZE, "dim_mult": SIZES, "num_res_blocks": LAYERS,
    "attn_scales": ListOf(RATIO, lo=0), "temperal_downsample": FLAGS, "input_channels": SIZE,
})


@register("AutoencoderKLQwenImage", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_qwen_image_decode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z = positive_int(config, "z_dim")
    h, w = shape.latent_height, shape.latent_width
    decoder = causal_decoder(z_dim=z, temperal_upsample=list(config["temperal_downsample"])[::-1],
                             out_channels=positive_int(config, "input_channels"), height=h, width=w, **kw)
    return Node("vae", children=(
        Node("post_quant_conv", causal_conv3d(z, z, (1, 1, 1), h * w)),
        decoder,
    ), formula="autoencoder_kl_qwen_image_decode")


@register("AutoencoderKLQwenImage", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_qwen_image_encode(config: Config, shape: RunShape) -> Node:
    kw = _structure(config)
    z2 = 2 * positive_int(config, "z_dim")
    encoder = causal_encoder(z_channels=z2, attn_scales=list(config["attn_scales"]),
                             temperal_downsample=list(config["temperal_downsample"]),
                             in_channels=positive_int(config, "input_channels"), height=shape.height,
                             width=shape.width, **kw)
    h, w = shape.height, shape.width
    for _ in range(len(kw["dim_mult"]) - 1):
        h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)
    return Node("vae", children=(
        encoder,
        Node("quant_conv", causal_conv3d(z2, z2, (1, 1, 1), h * w)),
    ), formula="autoencoder_kl_qwen_image_encode")


def _tile_split(values, latent_h: int, latent_w: int, tile_px: int | None) -> CallSplit:
    tile = tile_px or QWEN_TILE
    return sized_split(values, latent_h, latent_w, tile, IMAGE_TILING.stride_px(tile), scale_factor(values))


#: ``AutoencoderKLQwenImage.__init__`` sets ``tile_sample_min_height/width = 256``,
#: ``tile_sample_stride_height/width = 192`` (autoencoder_kl_qwenimage.py:727-732); ``enable_tiling`` takes all four
#: (autoencoder_kl_qwenimage.py:744-772). Each tile decodes its one frame through ``post_quant_conv`` and the
#: decoder, as the whole latent does (autoencoder_kl_qwenimage.py:1002-1013).
QWEN_TILE = 256
IMAGE_TILING = ImageTiling(default_tile=lambda values: QWEN_TILE, stride=Fraction(192, 256), takes_sizes=True,
                           compression=scale_factor, decode_split=_tile_split,
                           source="diffusers/models/autoencoders/autoencoder_kl_qwenimage.py:727-772, 846, 973-1027")
