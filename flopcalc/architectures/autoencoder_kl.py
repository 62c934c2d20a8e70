"""``AutoencoderKL`` (diffusers ``models/autoencoders/autoencoder_kl.py``): ``decode`` runs
``post_quant_conv`` (when ``use_post_quant_conv``) and the ``Decoder``; ``encode`` runs the
``Encoder`` and ``quant_conv`` (when ``use_quant_conv``). Tiling and slicing are off by default
in every pipeline, so the whole latent is decoded in one pass.
"""

from __future__ import annotations

from flopcalc.config import (
    FLAG, LAYERS, NAMES, SIZE, SIZES, Config, ListOf, count_int, declare_keys, positive_int,
)
from flopcalc.cost import Node
from flopcalc.formulas import ops
from flopcalc.formulas.vae_decoder import vae_decoder, vae_encoder
from flopcalc.registry import RunShape, register

#: ``AutoencoderKL.__init__`` keyword defaults (autoencoder_kl.py).
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "block_out_channels": [64],
    "layers_per_block": 1,
    "latent_channels": 4,
    "norm_num_groups": 32,
    "mid_block_add_attention": True,
    "use_quant_conv": True,
    "use_post_quant_conv": True,
    "down_block_types": ["DownEncoderBlock2D"],
    "up_block_types": ["UpDecoderBlock2D"],
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl.py"


def scale_factor(values) -> int:
    """``vae_scale_factor`` as the pipelines compute it: ``2 ** (len(block_out_channels) - 1)``."""
    return 2 ** (len(values.get("block_out_channels", DEFAULTS["block_out_channels"])) - 1)


def _blocks(config: Config) -> dict:
    channels = [int(c) for c in config["block_out_channels"]]
    for key, wanted in (("down_block_types", "DownEncoderBlock2D"), ("up_block_types", "UpDecoderBlock2D")):
        kinds = set(config[key])
        if kinds - {wanted}:
            from flopcalc.errors import UnknownArchitectureError

            raise UnknownArchitectureError(f"{config.component}: AutoencoderKL {key} {sorted(kinds)} "
                                           f"is not supported (only {wanted}).")
    return {
        "latent_channels": positive_int(config, "latent_channels"),
        "block_out_channels": channels,
        "layers_per_block": count_int(config, "layers_per_block"),
        "mid_block_add_attention": bool(config["mid_block_add_attention"]),
    }


#: Every config key ``AutoencoderKL`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("AutoencoderKL", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "down_block_types": NAMES, "up_block_types": NAMES,
    "mid_block_add_attention": FLAG, "use_quant_conv": FLAG, "use_post_quant_conv": FLAG,
    "norm_num_groups": SIZE, "sample_size": SIZE | ListOf(SIZE, lo=2, hi=2),
})


@register("AutoencoderKL", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_decode(config: Config, shape: RunShape) -> Node:
    kw = _blocks(config)
    z = kw["latent_channels"]
    h, w = shape.latent_height, shape.latent_width
    children = []
    if config["use_post_quant_conv"]:
        children.append(Node("post_quant_conv", ops.conv2d(z, z, 1, h, w)))
    children.append(vae_decoder(out_channels=positive_int(config, "out_channels"), height=h, width=w, **kw))
    return Node("vae", children=tuple(children), formula="autoencoder_kl_decode")


@register("AutoencoderKL", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor)
def autoencoder_kl_encode(config: Config, shape: RunShape) -> Node:
    kw = _blocks(config)
    z = kw["latent_channels"]
    enc = vae_encoder(in_channels=positive_int(config, "in_channels"), height=shape.height, width=shape.width, **kw)
    children = [enc]
    if config["use_quant_conv"]:
        f = scale_factor(config.values)
        children.append(Node("quant_conv", ops.conv2d(2 * z, 2 * z, 1, ops.exact_div(shape.height, f),
                                                      ops.exact_div(shape.width, f))))
    return Node("vae", children=tuple(children), formula="autoencoder_kl_encode")
