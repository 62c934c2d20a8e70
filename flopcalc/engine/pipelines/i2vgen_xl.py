"""I2VGen-XL image-to-video (diffusers ``pipelines/deprecated/i2vgen_xl/pipeline_i2vgen_xl.py``, deprecated in
0.42.1 but exported): ``I2VGenXLPipeline`` on an ``I2VGenXLUNet``.

``I2VGenXLPipeline.__call__`` (:512): ``height`` 704, ``width`` 1280, ``num_frames`` 16, 50 steps,
``guidance_scale`` 9.0 (CFG on a doubled batch when > 1: the negative prompt "" encoded, zero image embeddings and
the image latents doubled), ``decode_chunk_size`` 1. Per generation of ``B`` prompts (and images), each repeated for
``num_videos_per_prompt`` videos (the pipeline keeps that option):

* CLIP text once per prompt (and negative) on 77 tokens (``clip_skip`` 1 reads the penultimate layer: every layer
  still runs);
* the CLIP vision ``image_encoder`` once per input image (``_encode_image`` :331), on its ``image_size`` (the image
  is centre-cropped and resized to the feature extractor's 224² crop);
* the VAE encoder once per input image at ``height × width`` (``prepare_image_latents`` :452; the latent is then
  repeated with per-frame position masks);
* the UNet once per step and pass on ``(1, 4, F, H/8, W/8)`` noise and image latents;
* ``decode_latents`` in chunks of ``decode_chunk_size`` (1) frames: one image decode per frame.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import vae_runs
from flopcalc.engine.pipelines.sd_addons import TEXT_LEN
from flopcalc.engine.registry import RunShape

NAME = "I2VGenXLPipeline"
#: ``I2VGenXLPipeline.__call__`` defaults.
DEFAULT_HEIGHT, DEFAULT_WIDTH = 704, 1280
DEFAULT_FRAMES = 16
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 9.0


@register_pipeline(NAME, denoisers=("I2VGenXLUNet",), component="unet", options=("num_frames", "vae_tiling"))
def i2vgen_xl_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``I2VGenXLPipeline.__call__``: see the module docstring."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions every step (VAE-encoded once, "
                          "its latent repeated with per-frame position masks) and every step runs")
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or DEFAULT_HEIGHT, width=s.width or DEFAULT_WIDTH,
                num_frames=s.num_frames or DEFAULT_FRAMES, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, 8, f"{NAME} height and width")
    frames = s.num_frames
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    runs = text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    if "image_encoder" in components:
        size = components["image_encoder"]["image_size"]
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(height=size, width=size), s.batch_size,
                                 f"{s.batch_size} input image(s)"))
    encode = [r for r in vae_runs(components, replace(s, strength=1.0), s.batch_size, s.height // f, s.width // f)
              if r.call == "encode"]
    runs += [replace(r, why=r.why.replace("input image(s)", "input image(s) (prepare_image_latents)"))
             for r in encode]
    runs += denoiser_run(components, "unet", s, f, TEXT_LEN, passes, latent_frames=frames)
    videos = s.batch_size * s.num_images_per_prompt
    runs += [replace(r, runs=r.runs * frames, why=f"{r.why.replace('image(s)', 'video(s)')} × {frames} frames")
             for r in vae_runs(components, s, videos, s.height // f, s.width // f) if r.call == "decode"]
    return Plan(NAME, s, passes, tuple(runs),
                missing_notes(components, ["text_encoder", "image_encoder", "unet", "vae"]))
