"""``AutoencoderKLLTX2Audio`` (diffusers ``models/autoencoders/autoencoder_kl_ltx2_audio.py``), the audio VAE of
LTX-2: a 2-D VAE over mel spectrograms (time × mel bins, ``in_channels`` stereo channels), 4× in time and in mel
bins for the card; block formulas in ``formulas/ltx2.py``.

``decode`` is ``audio_vae.decode(z)`` on one latent ``(latent_channels, L, M/4)``: the run shape's ``seq_len``
is L (time), the latent's mel bins are the config's ``mel_bins`` over 4 (``LTX2Pipeline``: ``num_mel_bins //
audio_vae_mel_compression_ratio``). The card's causal decoder yields ``4L − 3`` time rows of ``M`` mel bins (the
decoder then crops / pads to that target: no work). ``encode`` is ``audio_vae.encode(x)`` on one spectrogram of
``seq_len`` time rows × ``mel_bins``.

Parameters are the whole model's (``latents_mean`` / ``latents_std``, ``base_channels`` each, are buffers).
"""

from __future__ import annotations

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, SIZES, Choice, Config, ListOf, boolean, count_int, declare_keys, positive_int,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas.ltx2 import CAUSALITY_AXES, audio_decoder, audio_encoder

SOURCE = "diffusers/models/autoencoders/autoencoder_kl_ltx2_audio.py"

#: ``AutoencoderKLLTX2Audio.__init__`` keyword defaults (autoencoder_kl_ltx2_audio.py:662-681, diffusers 0.42.1).
DEFAULTS = {
    "base_channels": 128, "output_channels": 2, "ch_mult": [1, 2, 4], "num_res_blocks": 2, "attn_resolutions": None,
    "in_channels": 2, "resolution": 256, "latent_channels": 8, "norm_type": "pixel", "causality_axis": "height",
    "dropout": 0.0, "mid_block_add_attention": False, "sample_rate": 16000, "mel_hop_length": 160,
    "is_causal": True, "mel_bins": 64, "double_z": True,
}
#: ``LATENT_DOWNSAMPLE_FACTOR``: the pipelines' time and mel compression of the audio VAE (:19, :750-753).
LATENT_DOWNSAMPLE_FACTOR = 4
NOMINAL = RunShape(seq_len=16)

declare_keys("AutoencoderKLLTX2Audio", {
    "base_channels": SIZE, "output_channels": SIZE, "ch_mult": SIZES, "num_res_blocks": LAYERS,
    "attn_resolutions": ListOf(SIZE, lo=0) | NULL, "in_channels": SIZE, "resolution": SIZE, "latent_channels": SIZE,
    "norm_type": Choice("pixel", "group"), "causality_axis": Choice(*CAUSALITY_AXES),
    "mid_block_add_attention": FLAG, "sample_rate": SIZE, "mel_hop_length": SIZE, "mel_bins": SIZE | NULL,
    "double_z": FLAG,
})


def _common(config: Config) -> dict:
    mult = config["ch_mult"]
    if not isinstance(mult, (list, tuple)) or not mult:
        raise ConfigError(f"{config.component}/config.json: 'ch_mult' must be a non-empty list, got {mult!r}")
    norm, axis = config["norm_type"], config["causality_axis"]
    base = positive_int(config, "base_channels")
    if norm == "group":
        if axis != "none":  # LTX2AudioResnetBlock refuses a causal GroupNorm block (:150)
            raise ConfigError(f"{config.component}/config.json: norm_type 'group' needs causality_axis 'none'")
        if any((base * m) % 32 for m in mult):
            raise ConfigError(f"{config.component}/config.json: GroupNorm(32) needs widths divisible by 32")
    if config["mel_bins"] is None:
        raise ConfigError(f"{config.component}/config.json: mel_bins is null; the LTX-2 pipelines read it to shape "
                          "the audio latent")
    return {"base_channels": base, "ch_mult": [int(m) for m in mult], "num_res_blocks": count_int(config, "num_res_blocks"),
            "norm_type": norm, "causality_axis": axis, "attn_resolutions": tuple(config["attn_resolutions"] or ()),
            "resolution": positive_int(config, "resolution"), "mid_attention": boolean(config, "mid_block_add_attention")}


@register("AutoencoderKLLTX2Audio", call="decode", role="audio_vae", defaults=DEFAULTS, source=SOURCE,
          nominal=NOMINAL)
def autoencoder_kl_ltx2_audio_decode(config: Config, shape: RunShape) -> Node:
    return Node("audio_vae", children=(audio_decoder(
        latent_channels=positive_int(config, "latent_channels"), output_channels=positive_int(config, "output_channels"),
        frames=shape.seq_len, mel_bins=positive_int(config, "mel_bins") // LATENT_DOWNSAMPLE_FACTOR,
        **_common(config)),),
        formula="autoencoder_kl_ltx2_audio_decode")


@register("AutoencoderKLLTX2Audio", call="encode", role="audio_vae", defaults=DEFAULTS, source=SOURCE,
          nominal=NOMINAL)
def autoencoder_kl_ltx2_audio_encode(config: Config, shape: RunShape) -> Node:
    return Node("audio_vae", children=(audio_encoder(
        in_channels=positive_int(config, "in_channels"), latent_channels=positive_int(config, "latent_channels"),
        double_z=boolean(config, "double_z"), frames=shape.seq_len, mel_bins=positive_int(config, "mel_bins"),
        **_common(config)),),
        formula="autoencoder_kl_ltx2_audio_encode")


loading_rules(
    "AutoencoderKLLTX2Audio",
    # autoencoder_kl_ltx2_audio.py:745-748: persistent latents_mean / latents_std of base_channels entries each
    buffers=lambda c: tuple(Buffer(name, positive_int(c, "base_channels"), "loaded")
                            for name in ("latents_mean", "latents_std")),
    source="diffusers/models/autoencoders/autoencoder_kl_ltx2_audio.py:745",
)
