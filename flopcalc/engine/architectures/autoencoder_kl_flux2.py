"""``AutoencoderKLFlux2`` (diffusers ``models/autoencoders/autoencoder_kl_flux2.py``): FLUX.2's VAE.

The ``AutoencoderKL`` layout (``Encoder`` with ``double_z``, ``Decoder``, 1×1 ``quant_conv`` /
``post_quant_conv``; :mod:`flopcalc.engine.architectures.autoencoder_kl`) with 32 latent channels, an optional
``decoder_block_out_channels`` (the decoder's widths; ``None``: ``block_out_channels``), and a
``bn`` (``BatchNorm2d(prod(patch_size)·latent_channels, affine=False)``): running statistics only,
buffers and no parameters, which the pipelines apply by hand to the patchified latents
(elementwise, no counted work). ``decode`` = ``post_quant_conv`` + ``decoder``; ``encode`` =
``encoder`` + ``quant_conv``. Tiling and slicing are off by default, as the pipelines leave them.
"""

from __future__ import annotations

from fractions import Fraction

from flopcalc.engine.architectures.autoencoder_kl import _sample_tile, decode_split
from flopcalc.engine.image_tiling import ImageTiling

from flopcalc.engine.architectures.autoencoder_kl import autoencoder_kl_decode, autoencoder_kl_encode, scale_factor
from flopcalc.engine.config import NULL, SIZE, SIZES, Config, ListOf, declare_keys, declared_keys, positive_int, positive_int_list
from flopcalc.engine.cost import Node
from flopcalc.engine.registry import RunShape, register
from flopcalc.engine.loading import Buffer, loading_rules

#: ``AutoencoderKLFlux2.__init__`` keyword defaults (autoencoder_kl_flux2.py).
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "block_out_channels": [128, 256, 512, 512],
    "decoder_block_out_channels": None,
    "layers_per_block": 2,
    "latent_channels": 32,
    "norm_num_groups": 32,
    "use_quant_conv": True,
    "use_post_quant_conv": True,
    "mid_block_add_attention": True,
    "patch_size": [2, 2],
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_flux2.py"


def flux2_scale_factor(values) -> int:
    """``Flux2Pipeline.vae_scale_factor``: ``2 ** (len(vae.config.block_out_channels) - 1)``."""
    return scale_factor({"block_out_channels": values.get("block_out_channels", DEFAULTS["block_out_channels"])})


#: ``AutoencoderKL``'s keys plus the decoder's own widths and the patch of ``bn``, as
#: :func:`flopcalc.engine.config.declare_keys` validates them.
declare_keys("AutoencoderKLFlux2", {
    **declared_keys("AutoencoderKL"), "decoder_block_out_channels": SIZES | NULL,
    "patch_size": ListOf(SIZE, lo=2, hi=2),
})

@register("AutoencoderKLFlux2", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=flux2_scale_factor)
def autoencoder_kl_flux2_decode(config: Config, shape: RunShape) -> Node:
    """``AutoencoderKL``'s decode with the decoder's widths (``decoder_block_out_channels`` when set)."""
    widths = config["decoder_block_out_channels"]
    if widths is not None:
        widths = positive_int_list(config, "decoder_block_out_channels")
        config = Config(config.component, {**config.values, "block_out_channels": widths}, config.defaults)
    return autoencoder_kl_decode(config, shape)


@register("AutoencoderKLFlux2", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=flux2_scale_factor)
def autoencoder_kl_flux2_encode(config: Config, shape: RunShape) -> Node:
    """``AutoencoderKL``'s encode (the encoder always has ``block_out_channels``)."""
    return autoencoder_kl_encode(config, shape)


def _bn_buffers(config: Config) -> tuple[Buffer, ...]:
    """``bn`` (``BatchNorm2d(prod(patch_size)·latent_channels, affine=False)``): persistent running mean and
    variance, loaded with the weights, and the int64 ``num_batches_tracked``."""
    channels = positive_int(config, "latent_channels")
    for side in positive_int_list(config, "patch_size"):
        channels *= side
    return (Buffer("bn.running_mean", channels, "loaded"), Buffer("bn.running_var", channels, "loaded"),
            Buffer("bn.num_batches_tracked", 1, "int64"))


loading_rules("AutoencoderKLFlux2", buffers=_bn_buffers, source=SOURCE)


#: ``AutoencoderKLFlux2`` tiles as ``AutoencoderKL`` does: ``enable_tiling()`` (``AutoencoderMixin``, vae.py:899) takes
#: no sizes; tiles of ``sample_size`` every ``int(tile · 0.75)`` latent pixels (autoencoder_kl_flux2.py:145-152,
#: 211-213, 376-400).
IMAGE_TILING = ImageTiling(default_tile=_sample_tile, stride=Fraction(3, 4), takes_sizes=False,
                           compression=flux2_scale_factor,
                           decode_split=lambda values, h, w, tile_px: decode_split(values, h, w),
                           source="diffusers/models/autoencoders/autoencoder_kl_flux2.py:145-152, 211-213, 376-400")
