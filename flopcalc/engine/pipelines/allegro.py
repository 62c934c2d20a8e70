"""Allegro text-to-video (diffusers ``pipelines/allegro/pipeline_allegro.py``, ``AllegroPipeline``): T5, the Allegro
transformer and its VAE (:mod:`flopcalc.engine.architectures.allegro`)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.allegro import decode_tiles, spatial_factor
from flopcalc.engine.config import Config
from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.registry import RunShape

NAME = "AllegroPipeline"
#: ``AllegroPipeline.__call__`` defaults (pipeline_allegro.py:683-708): 100 steps, ``guidance_scale`` 7.5, 512 T5
#: tokens; frames and size from the transformer's ``sample_frames`` / ``sample_height`` / ``sample_width`` times the
#: VAE factors (88 frames, 720×1280 for the released config).
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 100, 7.5, 512
#: ``check_inputs`` (:383): height and width divisible by 8.
SIZE_MULTIPLE = 8


def latent_frames(num_frames: int, temporal: int) -> int:
    """``prepare_latents`` (:586-589): ``⌈F / t⌉`` for an even ``F``, ``⌈(F − 1) / t⌉ + 1`` for an odd one."""
    if num_frames % 2 == 0:
        return math.ceil(num_frames / temporal)
    return math.ceil((num_frames - 1) / temporal) + 1


@register_pipeline(NAME, denoisers=("AllegroTransformer3DModel",), options=("max_sequence_length", "num_frames"),
                   refuses={"vae_tiling": "its VAE decodes only in tiles (the untiled _decode raises, "
                                          "autoencoder_kl_allegro.py:835-842), and the tiled decode is what flopcalc "
                                          "counts by default"})
def allegro_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                     index: Mapping[str, Any] | None = None) -> Plan:
    """``AllegroPipeline.__call__`` (pipeline_allegro.py:683-936): 88 frames (22 latent frames), 720×1280, 100 steps,
    ``guidance_scale`` 7.5 (classifier-free guidance on a doubled batch), 512 T5 tokens per prompt (padded; the
    negative prompt "" too under guidance); ``num_videos_per_prompt`` forced to 1.

    * The VAE decodes only tiled (the pipeline's example calls ``vae.enable_tiling()``; without it diffusers raises):
      ``⌊(T − 6)/4⌋ + 1`` × ``⌊(h − 40)/25⌋ + 1`` × ``⌊(w − 40)/30⌋ + 1`` decoder calls on 6 × 40 × 40 latent tiles (75 at
      the defaults); parts of the latent no tile covers are not decoded.
    * One prompt: the tiled decode writes each tile into a batch-1 buffer (the real call fails for more videos).
    The tile count steps with the size: no closed-form law."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: it generates from noise")
    if s.batch_size != 1:
        raise OptionError(f"{NAME} decodes tiles through a batch-1 buffer (AutoencoderKLAllegro.tiled_decode), so more "
                          "than one video fails in diffusers; estimate one prompt")
    if s.symbolic:
        raise FlopcalcError(f"{NAME}'s VAE decodes in tiles whose count steps with the size (⌊(h − 40)/25⌋ + 1 ...): no "
                            "closed-form law; use the numeric estimate")
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    vae = components.get("vae")
    f = 8 if vae is None else spatial_factor(vae.values if isinstance(vae, Config) else vae)
    t = 4 if vae is None else int(vae["temporal_compression_ratio"])
    frames = config_value(components, "transformer", "sample_frames", 22) * t
    s = replace(s, num_frames=s.num_frames or frames,
                height=s.height or config_value(components, "transformer", "sample_height", 90) * f,
                width=s.width or config_value(components, "transformer", "sample_width", 160) * f,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.num_images_per_prompt != 1:
        notes.append(f"{NAME} forces num_videos_per_prompt = 1")
        s = replace(s, num_images_per_prompt=1)
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{NAME} height and width")
    patch = config_value(components, "transformer", "patch_size", 1)
    if (s.height // f) % patch or (s.width // f) % patch:
        raise ResolutionError(f"{NAME}: the {s.height // f}×{s.width // f} latent of {s.height}×{s.width} does not split "
                              f"into the transformer's {patch}×{patch} patches (its output reshape fails in diffusers): "
                              f"use sizes that are multiples of {f * patch}")
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent = latent_frames(s.num_frames, t)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], passes,
                     "1 prompt" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes, latent_frames=latent)
    if vae is not None:
        h, w = s.height // f, s.width // f
        tiles = decode_tiles(vae, latent, h, w)
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=h, latent_width=w, latent_frames=latent), 1, "1 video"))
        notes.append(f"VAE: decoded in {tiles} tile(s) of 6 × 40 × 40 latent frames × rows × columns (tiled_decode, the "
                     "only decode AutoencoderKLAllegro has: the pipeline's example enables tiling)")
    return Plan(NAME, s, passes, tuple(runs), tuple(notes))
