"""``AutoencoderKLTemporalDecoder`` (diffusers ``models/autoencoders/autoencoder_kl_temporal_decoder.py``),
Stable Video Diffusion's VAE: the ``AutoencoderKL`` ``Encoder`` (``double_z``) and ``quant_conv`` for
``encode`` (the conditioning image), and a ``TemporalDecoder`` for ``decode(z, num_frames)``, which
``StableVideoDiffusionPipeline.decode_latents`` calls on chunks of ``decode_chunk_size`` frames (the
shape's ``frames``: the frames of one call)."""

from __future__ import annotations

from flopcalc.engine.architectures.autoencoder_kl import _check_encodable
from flopcalc.engine.config import (
    FLAG, LAYERS, NAMES, SIZE, SIZES, Config, ListOf, Real, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.spatio_temporal import temporal_decoder
from flopcalc.formulas.vae_decoder import vae_encoder
from flopcalc.engine.registry import RunShape, register

SOURCE = "diffusers/models/autoencoders/autoencoder_kl_temporal_decoder.py"

#: ``AutoencoderKLTemporalDecoder.__init__`` keyword defaults.
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"],
    "block_out_channels": [64],
    "layers_per_block": 1,
    "latent_channels": 4,
    "sample_size": 32,
    "scaling_factor": 0.18215,
    "force_upcast": True,
}
NOMINAL = RunShape(latent_height=8, latent_width=8, frames=2, height=64, width=64)

declare_keys("AutoencoderKLTemporalDecoder", {
    "in_channels": SIZE, "out_channels": SIZE, "down_block_types": NAMES, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "latent_channels": SIZE, "sample_size": SIZE | ListOf(SIZE, lo=2, hi=2),
    "scaling_factor": Real(0.0, 1e3), "force_upcast": FLAG,
})


def scale_factor(values) -> int:
    """``vae_scale_factor = 2 ** (len(block_out_channels) - 1)`` (the pipeline's)."""
    return 2 ** (len(values.get("block_out_channels", DEFAULTS["block_out_channels"])) - 1)


def _common(config: Config) -> dict:
    kinds = set(config["down_block_types"])
    if kinds - {"DownEncoderBlock2D"}:
        raise UnknownArchitectureError(f"{config.component}: AutoencoderKLTemporalDecoder down_block_types "
                                       f"{sorted(kinds)} are not supported (only DownEncoderBlock2D).")
    return {"latent_channels": positive_int(config, "latent_channels"),
            "block_out_channels": [int(c) for c in config["block_out_channels"]],
            "layers_per_block": count_int(config, "layers_per_block")}


@register("AutoencoderKLTemporalDecoder", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor, nominal=NOMINAL)
def autoencoder_kl_temporal_decoder_decode(config: Config, shape: RunShape) -> Node:
    """``decode(z, num_frames)`` on ``frames`` latents of ``latent_height × latent_width``."""
    kw = _common(config)
    dec = temporal_decoder(out_channels=positive_int(config, "out_channels"), frames=shape.frames,
                           height=shape.latent_height, width=shape.latent_width, **kw)
    return Node("vae", children=(dec,), formula="autoencoder_kl_temporal_decoder_decode")


@register("AutoencoderKLTemporalDecoder", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor, nominal=NOMINAL)
def autoencoder_kl_temporal_decoder_encode(config: Config, shape: RunShape) -> Node:
    """``encode(x)``: the ``Encoder`` and ``quant_conv`` (2z → 2z, 1×1) on one image."""
    kw = _common(config)
    z = kw["latent_channels"]
    _check_encodable(shape.height, shape.width, len(kw["block_out_channels"]) - 1)
    enc = vae_encoder(in_channels=positive_int(config, "in_channels"), height=shape.height, width=shape.width,
                      mid_block_add_attention=True, **kw)
    h, w = shape.height, shape.width
    for _ in kw["block_out_channels"][1:]:  # each Downsample2D: pad (0, 1, 0, 1), 3×3 conv, stride 2
        h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)
    return Node("vae", children=(enc, Node("quant_conv", ops.conv2d(2 * z, 2 * z, 1, h, w))),
                formula="autoencoder_kl_temporal_decoder_encode")
