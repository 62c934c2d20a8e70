"""The Cosmos 1.0 video VAE ``AutoencoderKLCosmos`` (diffusers ``models/autoencoders/autoencoder_kl_cosmos.py``;
block formulas in ``formulas/cosmos_vae.py``): ``decode`` (``post_quant_conv`` and the decoder on the whole latent at
once: the class's tiling and frame-wise flags are never read by ``decode``/``encode``) and ``encode`` (the encoder and
``quant_conv`` on the whole video). Each call's tree holds its own parameters only (a component's parameters are the
sum over its calls)."""

from __future__ import annotations

from typing import Any

from flopcalc.engine.config import (
    LAYERS, NULL, SIZE, SIZES, Choice, Config, ListOf, Real, count_int, declare_keys, positive_int, positive_int_list,
)
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas.cosmos_vae import causal_conv, cosmos_decoder, cosmos_encoder

CLASS = "AutoencoderKLCosmos"
#: ``AutoencoderKLCosmos.__init__`` keyword defaults (autoencoder_kl_cosmos.py:923-940); ``latents_mean`` /
#: ``latents_std`` default to the CV8x8x8-1.0 statistics (:37-38), :data:`DEFAULT_STATS` values each, omitted here:
#: only their count is read (:func:`stats_frames`).
DEFAULTS = {
    "in_channels": 3, "out_channels": 3, "latent_channels": 16, "encoder_block_out_channels": [128, 256, 512, 512],
    "decode_block_out_channels": [256, 512, 512, 512], "attention_resolutions": [32], "resolution": 1024,
    "num_layers": 2, "patch_size": 4, "patch_type": "haar", "scaling_factor": 1.0, "spatial_compression_ratio": 8,
    "temporal_compression_ratio": 8,
}
#: ``len(LATENTS_MEAN)`` of autoencoder_kl_cosmos.py:37: 16 channels × 16 latent frames.
DEFAULT_STATS = 256
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_cosmos.py"
STATS = ListOf(Real(-1e6, 1e6, closed=True), lo=1, hi=1 << 16) | NULL

declare_keys(CLASS, {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "encoder_block_out_channels": SIZES,
    "decode_block_out_channels": SIZES, "attention_resolutions": ListOf(SIZE, lo=0), "resolution": SIZE,
    "num_layers": LAYERS, "patch_size": SIZE, "patch_type": Choice("haar", "rearrange"),
    "spatial_compression_ratio": SIZE, "temporal_compression_ratio": SIZE, "latents_mean": STATS,
    "latents_std": STATS,
})


def vae_factors(values: Any) -> tuple[int, int]:
    """``(vae_scale_factor_spatial, vae_scale_factor_temporal)`` of the Cosmos pipelines (pipeline_cosmos_text2world.py:
    191-194): ``spatial_compression_ratio`` and ``temporal_compression_ratio``."""
    return values["spatial_compression_ratio"], values["temporal_compression_ratio"]


def stats_frames(values: Any) -> int | None:
    """The latent frames the pipelines' ``latents_mean`` / ``latents_std`` cover (``view(1, C, -1, 1, 1)[:, :, :T]``):
    their length over ``latent_channels``; None when they are null (no normalization)."""
    mean = values.get("latents_mean", DEFAULT_STATS)
    if mean is None:
        return None
    count = mean if isinstance(mean, int) else len(mean)
    return count // positive_int(values, "latent_channels")


def _structure(config: Config) -> dict[str, Any]:
    """The settings both halves share, checked: ``patch_size`` a power of two, ratios powers of two at least the
    patch (the encoder/decoder derive their down/up-samplers from the log2 differences), two or more blocks."""
    patch = positive_int(config, "patch_size")
    sr, tr = positive_int(config, "spatial_compression_ratio"), positive_int(config, "temporal_compression_ratio")
    for key, v in (("patch_size", patch), ("spatial_compression_ratio", sr), ("temporal_compression_ratio", tr)):
        if v & (v - 1):
            raise ConfigError(f"{config.component}/config.json: {key} {v} is not a power of two (AutoencoderKLCosmos "
                              "builds its Haar levels and samplers from log2 of it)")
    if sr < patch or tr < patch:
        raise ConfigError(f"{config.component}/config.json: the compression ratios ({sr}, {tr}) must be at least the "
                          f"patch_size {patch}")
    enc, dec = positive_int_list(config, "encoder_block_out_channels"), positive_int_list(config,
                                                                                        "decode_block_out_channels")
    if len(enc) < 2 or len(dec) != len(enc):
        raise ConfigError(f"{config.component}/config.json: AutoencoderKLCosmos needs two or more encoder blocks "
                          f"and as many decoder blocks ({len(enc)} / {len(dec)})")
    return dict(layers=count_int(config, "num_layers"), attention_at=list(config["attention_resolutions"]),
                resolution=positive_int(config, "resolution"), patch=patch, haar=config["patch_type"] == "haar",
                spatial_layers=sr.bit_length() - patch.bit_length(), temporal_layers=tr.bit_length() -
                patch.bit_length()), enc, dec


@register(CLASS, role="vae_decoder", call="decode", defaults=DEFAULTS, source=SOURCE,
          scale_factor=lambda v: v["spatial_compression_ratio"],
          nominal=RunShape(latent_height=2, latent_width=2, latent_frames=1))
def cosmos_vae_decode(config: Config, shape: RunShape) -> Node:
    """``vae.decode(z)`` (``_decode``, :1054-1060): ``post_quant_conv`` and the decoder on the whole latent."""
    common, _, dec = _structure(config)
    z = positive_int(config, "latent_channels")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    h, w = shape.latent_height, shape.latent_width
    decoder, _ = cosmos_decoder(latent=z, out_channels=positive_int(config, "out_channels"), widths=dec, frames=frames,
                                height=h, width=w, **common)
    return Node("vae", children=(Node("post_quant_conv", causal_conv(z, z, 1, frames * h * w)), decoder),
                formula="cosmos_vae_decode")


def encoded_sizes(config: Config, frames: Any, height: Any, width: Any) -> tuple[Any, Any, Any]:
    """The latent ``(T, h, w)`` the encoder makes of ``frames × height × width``."""
    common, enc, _ = _structure(config)
    _, t, h, w = cosmos_encoder(in_channels=positive_int(config, "in_channels"),
                                latent=positive_int(config, "latent_channels"), widths=enc, frames=frames,
                                height=height, width=width, **common)
    return t, h, w


@register(CLASS, role="vae_encoder", call="encode", defaults=DEFAULTS, source=SOURCE,
          scale_factor=lambda v: v["spatial_compression_ratio"], nominal=RunShape(height=16, width=16, frames=1))
def cosmos_vae_encode(config: Config, shape: RunShape) -> Node:
    """``vae.encode(x)`` (``_encode``, :1035-1038): the encoder and ``quant_conv`` on the whole video."""
    common, enc, _ = _structure(config)
    z = positive_int(config, "latent_channels")
    frames = 1 if shape.frames is None else shape.frames
    encoder, t, h, w = cosmos_encoder(in_channels=positive_int(config, "in_channels"), latent=z, widths=enc,
                                      frames=frames, height=shape.height, width=shape.width, **common)
    return Node("vae", children=(encoder, Node("quant_conv", causal_conv(z, z, 1, t * h * w))),
                formula="cosmos_vae_encode")


loading_rules(
    CLASS,
    # CosmosPatchEmbed3d / CosmosUnpatcher3d (:117-118, 197-198): non-persistent wavelets (2 float32) and _arange
    # (2 int64) each
    buffers=lambda c: tuple(Buffer(f"{part}.{name}", 2, dtype) for part in ("encoder.patch_embed",
                                                                              "decoder.unpatch_embed")
                            for name, dtype in (("wavelets", "float32"), ("_arange", "int64"))),
    source="diffusers/models/autoencoders/autoencoder_kl_cosmos.py:117-118, 197-198",
)

