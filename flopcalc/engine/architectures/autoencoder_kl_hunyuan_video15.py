"""``AutoencoderKLHunyuanVideo15`` (diffusers ``models/autoencoders/autoencoder_kl_hunyuanvideo15.py``), HunyuanVideo
1.5's causal 3-D VAE (16× space, 4× time); block formulas in ``formulas/hunyuan_video15_vae.py``.

``decode`` runs the ``HunyuanVideo15Decoder3D`` on the whole latent and ``encode`` the encoder on the whole
video: tiling and slicing are off by default. With ``vae.enable_tiling()`` (``vae_tiling`` in the text-to-video
pipeline) a decode runs the decoder on overlapping latent tiles, each with all its frames (:func:`decode_split`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from flopcalc.engine.config import FLAG, LAYERS, SIZE, SIZES, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas.hunyuan_video15_vae import decoder, encoder, resamplers
from flopcalc.formulas.tiling import CallSplit, spatial_split
from flopcalc.engine.registry import RunShape, register

#: ``AutoencoderKLHunyuanVideo15.__init__`` keyword defaults (autoencoder_kl_hunyuanvideo15.py:664).
DEFAULTS = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 32,
    "block_out_channels": (128, 256, 512, 1024, 1024),
    "layers_per_block": 2,
    "spatial_compression_ratio": 16,
    "temporal_compression_ratio": 4,
    "downsample_match_channel": True,
    "upsample_match_channel": True,
    "scaling_factor": 1.03682,
}
SOURCE = "diffusers/models/autoencoders/autoencoder_kl_hunyuanvideo15.py"

declare_keys("AutoencoderKLHunyuanVideo15", {
    "in_channels": SIZE, "out_channels": SIZE, "latent_channels": SIZE, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "spatial_compression_ratio": SIZE, "temporal_compression_ratio": SIZE,
    "downsample_match_channel": FLAG, "upsample_match_channel": FLAG,
})


def scale_factor(values: Mapping[str, Any]) -> int:
    """``vae_scale_factor_spatial``: ``spatial_compression_ratio`` (pipeline_hunyuan_video1_5.py:219)."""
    return int(values.get("spatial_compression_ratio", DEFAULTS["spatial_compression_ratio"]))


#: ``enable_tiling()`` defaults (autoencoder_kl_hunyuanvideo15.py:694-700): tiles of 256 px, overlap factor 1/4.
TILE_SAMPLE_MIN = 256
TILE_OVERLAP = 0.25


def decode_split(values: Mapping[str, Any], latent_h: Any, latent_w: Any) -> CallSplit:
    """How ``vae.decode`` runs with ``enable_tiling()`` (autoencoder_kl_hunyuanvideo15.py:769-777): when a latent
    side exceeds ``tile_latent_min = 256 // spatial_compression_ratio``, ``tiled_decode`` (:888-909) runs the decoder
    on the latent tiles ``z[..., i : i + tile, j : j + tile]`` for ``i`` in ``range(0, side, int(tile × (1 −
    0.25)))``, each with all the latent frames; else one call on the whole latent."""
    tile = TILE_SAMPLE_MIN // scale_factor(values)
    if tile < 1:
        raise ConfigError(f"vae/config.json: spatial_compression_ratio {scale_factor(values)} leaves enable_tiling()'s "
                          f"{TILE_SAMPLE_MIN}-px tiles under one latent pixel")
    return spatial_split(latent_h, latent_w, tile, int(tile * (1 - TILE_OVERLAP)))


def _blocks(config: Config) -> dict:
    channels = [int(c) for c in config["block_out_channels"]]
    z = positive_int(config, "latent_channels")
    spatial = positive_int(config, "spatial_compression_ratio")
    temporal = positive_int(config, "temporal_compression_ratio")
    if math.log2(spatial) > len(channels) - 1 or math.log2(temporal) > len(channels) - 1 or temporal > spatial:
        raise ConfigError(f"{config.component}/config.json: {len(channels)} levels cannot make a {spatial}× spatial and "
                          f"{temporal}× temporal compression (AutoencoderKLHunyuanVideo15 indexes past "
                          "block_out_channels)")
    if channels[-1] % (2 * z) or channels[0] % z:
        raise ConfigError(f"{config.component}/config.json: block_out_channels {channels} must end with a multiple of "
                          f"2 × latent_channels ({2 * z}) and start with a multiple of {z}")
    for half, chans, key in (("encoder", channels, "downsample_match_channel"),
                             ("decoder", channels[::-1], "upsample_match_channel")):
        for step in resamplers(chans, spatial, temporal, bool(config[key]), decoder=half == "decoder"):
            if step is not None and not _resample_runs(half, *step):
                raise ConfigError(f"{config.component}/config.json: a {half} resampler from {step[0]} to {step[1]} "
                                  "channels cannot run in AutoencoderKLHunyuanVideo15 (its pixel shuffle and shortcut "
                                  "need the channel counts to divide as lines 140-245 reshape them)")
    return {"latent_channels": z, "block_out_channels": channels, "layers_per_block": count_int(config, "layers_per_block"),
            "spatial": spatial, "temporal": temporal}


def _resample_runs(half: str, c_in: int, c_out: int, with_time: bool) -> bool:
    """Whether ``HunyuanVideo15Downsample`` / ``Upsample`` can reshape these channels: down, ``C_out/r`` conv
    channels and a grouped mean of ``r C_in / C_out`` (halved for the first frame); up, ``r C_out / C_in``
    repeats (halved for the first frame); ``r`` = 8 with a temporal step, else 4."""
    r = 8 if with_time else 4
    if half == "encoder":
        group, rest = divmod(r * c_in, c_out)
        return c_out % r == 0 and rest == 0 and (not with_time or group % 2 == 0)
    repeats, rest = divmod(r * c_out, c_in)
    return rest == 0 and (not with_time or repeats % 2 == 0)


@register("AutoencoderKLHunyuanVideo15", call="decode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor,
          nominal=RunShape(latent_height=4, latent_width=4, latent_frames=2))
def hunyuan_video15_vae_decode(config: Config, shape: RunShape) -> Node:
    kw = _blocks(config)
    kw["block_out_channels"] = kw["block_out_channels"][::-1]
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    dec = decoder(out_channels=positive_int(config, "out_channels"), match_channel=bool(config["upsample_match_channel"]),
                  frames=frames, height=shape.latent_height, width=shape.latent_width, **kw)
    return Node("vae", children=(dec,), formula="hunyuan_video15_vae_decode")


@register("AutoencoderKLHunyuanVideo15", call="encode", role="vae", defaults=DEFAULTS, source=SOURCE,
          scale_factor=scale_factor, nominal=RunShape(height=64, width=64, frames=5))
def hunyuan_video15_vae_encode(config: Config, shape: RunShape) -> Node:
    frames = 1 if shape.frames is None else shape.frames
    enc = encoder(in_channels=positive_int(config, "in_channels"),
                  match_channel=bool(config["downsample_match_channel"]), frames=frames, height=shape.height,
                  width=shape.width, **_blocks(config))
    return Node("vae", children=(enc,), formula="hunyuan_video15_vae_encode")
