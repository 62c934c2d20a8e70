"""``AutoencoderOobleck`` (diffusers ``models/autoencoders/autoencoder_oobleck.py``), Stable Audio's waveform VAE:
``decode(z)`` on a latent of ``seq_len`` frames, ``encode(x)`` on ``seq_len`` audio samples
(:mod:`flopcalc.formulas.oobleck`). ``hop_length``, the product of ``downsampling_ratios``, is how many samples one
latent frame stands for (the pipelines' ``downsample_ratio``)."""

from __future__ import annotations

from math import prod

from flopcalc.engine.config import SIZE, SIZES, Config, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas.oobleck import oobleck_decoder, oobleck_encoder

SOURCE = "diffusers/models/autoencoders/autoencoder_oobleck.py"

#: ``AutoencoderOobleck.__init__`` keyword defaults (autoencoder_oobleck.py:326-336).
DEFAULTS = {
    "encoder_hidden_size": 128,
    "downsampling_ratios": [2, 4, 4, 8, 8],
    "channel_multiples": [1, 2, 4, 8, 16],
    "decoder_channels": 128,
    "decoder_input_channels": 64,
    "audio_channels": 2,
    "sampling_rate": 44100,
}
NOMINAL = RunShape(seq_len=4)

declare_keys("AutoencoderOobleck", {
    "encoder_hidden_size": SIZE, "downsampling_ratios": SIZES, "channel_multiples": SIZES, "decoder_channels": SIZE,
    "decoder_input_channels": SIZE, "audio_channels": SIZE, "sampling_rate": SIZE,
})


def hop_length(values) -> int:
    """``hop_length = prod(downsampling_ratios)`` (autoencoder_oobleck.py:347): samples per latent frame."""
    return int(prod(values.get("downsampling_ratios", DEFAULTS["downsampling_ratios"])))


def _layout(config: Config) -> tuple[list[int], list[int]]:
    ratios = [int(r) for r in config["downsampling_ratios"]]
    multiples = [int(m) for m in config["channel_multiples"]]
    if len(ratios) != len(multiples):  # the encoder indexes channel_multiples per stride
        raise ConfigError(f"{config.component}/config.json: downsampling_ratios ({len(ratios)}) and channel_multiples "
                          f"({len(multiples)}) must have the same length")
    return ratios, multiples


@register("AutoencoderOobleck", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=hop_length,
          nominal=NOMINAL)
def autoencoder_oobleck_decode(config: Config, shape: RunShape) -> Node:
    """``decode(z)``: ``OobleckDecoder`` on ``(decoder_input_channels, seq_len)``."""
    ratios, multiples = _layout(config)
    dec = oobleck_decoder(positive_int(config, "decoder_channels"), positive_int(config, "decoder_input_channels"),
                          positive_int(config, "audio_channels"), ratios[::-1], multiples, shape.seq_len)
    return Node("vae", children=(dec,), formula="autoencoder_oobleck_decode")


@register("AutoencoderOobleck", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE, scale_factor=hop_length,
          nominal=NOMINAL)
def autoencoder_oobleck_encode(config: Config, shape: RunShape) -> Node:
    """``encode(x)``: ``OobleckEncoder`` on ``(audio_channels, seq_len)`` samples."""
    ratios, multiples = _layout(config)
    enc = oobleck_encoder(positive_int(config, "encoder_hidden_size"), positive_int(config, "audio_channels"),
                          ratios, multiples, shape.seq_len)
    return Node("vae", children=(enc,), formula="autoencoder_oobleck_encode")
