"""``AutoencoderKLHunyuanImage`` (diffusers ``models/autoencoders/autoencoder_kl_hunyuanimage.py``), HunyuanImage
2.1's 32× VAE; block formulas in ``formulas/hunyuan_image_vae.py``.

``decode`` runs the ``HunyuanImageDecoder2D`` on the latent (no post-quant conv), ``encode`` the
``HunyuanImageEncoder2D`` on the image (no quant conv). Tiling and slicing are off by default and
``HunyuanImagePipeline`` never turns them on, so a call is one pass over the whole latent / image.
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.engine.config import FLAG, LAYERS, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas.hunyuan_image_vae import decoder, encoder, stages
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderKLHunyuanImage.__init__`` keyword defaults (autoencoder_kl_hunyuanimage.py:393); the other
#: arguments have no default (a config must give them).
DEFAULTS = {
    "scaling_factor": None,
    "downsample_match_channel": True,
    "upsample_match_channel": True,
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_hunyuanimage.py"

declare_keys("AutoencoderKLHunyuanImage", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "spatial_compression_ratio": SIZE, "downsample_match_channel": FLAG,
    "upsample_match_channel": FLAG,
})


def scale_factor(values: Mapping[str, Any]) -> int:
    """``HunyuanImagePipeline.vae_scale_factor``: ``vae.config.spatial_compression_ratio``
    (pipeline_hunyuanimage.py:215)."""
    return int(values["spatial_compression_ratio"])


def _blocks(config: Config) -> dict:
    """The sizes both halves read, checked as the real ``__init__`` checks them (lines 228, 316)."""
    channels = [int(c) for c in config["block_out_channels"]]
    z = positive_int(config, "latent_channels")
    if channels[-1] % (2 * z) or channels[0] % z:
        raise ConfigError(f"{config.component}/config.json: block_out_channels {channels} must have a last entry "
                          f"divisible by 2 × latent_channels ({2 * z}) and a first divisible by {z}, as "
                          "AutoencoderKLHunyuanImage requires")
    if any(c % 32 for c in channels):
        raise ConfigError(f"{config.component}/config.json: every block_out_channels entry must be a multiple of "
                          f"32 (GroupNorm(32, ·)), got {channels}")
    ratio = positive_int(config, "spatial_compression_ratio")
    layers = count_int(config, "layers_per_block")
    for half, chans, per_level, key in (("encoder", channels, layers, "downsample_match_channel"),
                                        ("decoder", channels[::-1], layers + 1, "upsample_match_channel")):
        for kind, c_in, c_out in stages(chans, per_level, ratio, bool(config[key])):
            if kind == "resnet" and c_in != c_out:
                # HunyuanImageResnetBlock.forward applies conv_shortcut (built c_in → c_out) to conv2's c_out
                # channels (line 77), so a ResNet that changes channels fails in the real class.
                raise ConfigError(f"{config.component}/config.json: the {half} would need a ResNet from {c_in} to "
                                  f"{c_out} channels, which AutoencoderKLHunyuanImage cannot run (its conv_shortcut "
                                  f"takes the block's output); channels may change only at the resamplers ({key})")
            # HunyuanImageDownsample (line 113): C_out/4 conv channels, C_out | 4 C_in (grouped mean);
            # HunyuanImageUpsample (line 151): C_in | 4 C_out (repeated shortcut).
            down_bad = half == "encoder" and (c_out % 4 or (4 * c_in) % c_out)
            if kind == "resample" and (down_bad or (half == "decoder" and (4 * c_out) % c_in)):
                raise ConfigError(f"{config.component}/config.json: a {half} resampler from {c_in} to {c_out} "
                                  "channels cannot run in AutoencoderKLHunyuanImage (its pixel shuffle needs "
                                  + ("C_out a multiple of 4 dividing 4 × C_in)" if half == "encoder"
                                     else "C_in to divide 4 × C_out)"))
    return {"latent_channels": z, "block_out_channels": channels,
            "layers_per_block": layers, "ratio": ratio}


@register("AutoencoderKLHunyuanImage", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def hunyuan_image_vae_decode(config: Config, shape: RunShape) -> Node:
    kw = _blocks(config)
    kw["block_out_channels"] = list(reversed(kw["block_out_channels"]))
    dec = decoder(out_channels=positive_int(config, "out_channels"), match_channel=bool(config["upsample_match_channel"]),
                  height=shape.latent_height, width=shape.latent_width, **kw)
    return Node("vae", children=(dec,), formula="hunyuan_image_vae_decode")


@register("AutoencoderKLHunyuanImage", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def hunyuan_image_vae_encode(config: Config, shape: RunShape) -> Node:
    enc = encoder(in_channels=positive_int(config, "in_channels"),
                  match_channel=bool(config["downsample_match_channel"]), height=shape.height, width=shape.width,
                  **_blocks(config))
    return Node("vae", children=(enc,), formula="hunyuan_image_vae_encode")
