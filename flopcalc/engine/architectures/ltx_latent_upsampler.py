"""``LTXLatentUpsamplerModel`` (diffusers ``pipelines/ltx/modeling_latent_upsampler.py``), LTX-Video 0.9.7's
spatial latent upsampler, run by ``LTXLatentUpsamplePipeline`` on one VAE latent ``C × T × h × w``
(``RunShape.latent_frames`` / ``latent_height`` / ``latent_width``); block formulas in
``formulas/ltx_latent_upsampler.py``."""

from __future__ import annotations

from flopcalc.engine.config import COUNT, FLAG, SIZE, Choice, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas.ltx_latent_upsampler import GROUPS, latent_upsampler
from flopcalc.engine.registry import RunShape, register

#: ``LTXLatentUpsamplerModel.__init__`` keyword defaults (modeling_latent_upsampler.py).
DEFAULTS = {
    "in_channels": 128,
    "mid_channels": 512,
    "num_blocks_per_stage": 4,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
}
SOURCE = "diffusers/pipelines/ltx/modeling_latent_upsampler.py"
#: A valid shape for parameter counts: 2 latent frames of 4×4.
NOMINAL = RunShape(latent_height=4, latent_width=4, latent_frames=2)

declare_keys("LTXLatentUpsamplerModel", {
    "in_channels": SIZE, "mid_channels": SIZE, "num_blocks_per_stage": COUNT, "dims": Choice(2, 3),
    "spatial_upsample": FLAG, "temporal_upsample": FLAG,
})


@register("LTXLatentUpsamplerModel", role="upsampler", defaults=DEFAULTS, nominal=NOMINAL, source=SOURCE)
def ltx_latent_upsampler(config: Config, shape: RunShape) -> Node:
    spatial, temporal = bool(config["spatial_upsample"]), bool(config["temporal_upsample"])
    dims = config["dims"]
    if not spatial and not temporal:
        raise ConfigError(f"{config.component}/config.json: LTXLatentUpsamplerModel needs spatial_upsample or "
                          "temporal_upsample")
    if dims == 2 and temporal:
        raise ConfigError(f"{config.component}/config.json: dims 2 with temporal_upsample feeds a Conv3d per-frame "
                          "maps, which LTXLatentUpsamplerModel.forward cannot run")
    mid = positive_int(config, "mid_channels")
    if mid % GROUPS:
        raise ConfigError(f"{config.component}/config.json: mid_channels {mid} must divide into GroupNorm's "
                          f"{GROUPS} groups")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    return latent_upsampler(in_channels=positive_int(config, "in_channels"), mid_channels=mid,
                            blocks=count_int(config, "num_blocks_per_stage"), dims=dims, spatial=spatial,
                            temporal=temporal, frames=frames, height=shape.latent_height, width=shape.latent_width)

