"""Stable Diffusion x2 latent upscaler (diffusers ``pipelines/stable_diffusion/
pipeline_stable_diffusion_latent_upscale.py``, ``StableDiffusionLatentUpscalePipeline``; stabilityai/sd-x2-latent-upscaler).

The input image (a PIL image, 3 channels) is ``vae.encode``-d at its own size (:588-590; an input that already is a
latent skips it); the latent is doubled (``F.interpolate(scale_factor=2)``, no MACs) and concatenated to the noise
at every step, so the k-diffusion UNet (:func:`flopcalc.engine.architectures.unet_2d_condition.k_unet`) runs on the
*output*'s latent, ``2 H / 8 × 2 W / 8``, with ``timestep_cond`` the noise level and the pooled CLIP embedding. Under
classifier-free guidance (``guidance_scale > 1``) the UNet runs on the doubled batch and the negative prompt ("" by
default) is encoded with the prompt (CLIP on 77 tokens). One ``vae.decode`` of the output latent per image.

``__call__`` defaults (:388-403): 75 steps, guidance 9.0. The pipeline has no default size (it takes the image's):
flopcalc's ``height × width`` is the *output*, twice the input image, by default 1024² (a 512² Stable Diffusion
image, the use the model card describes); the output must be a multiple of 64 (the input of 32, and the UNet's three
downsamplings of its latent).
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
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.registry import RunShape

NAME = "StableDiffusionLatentUpscalePipeline"
STEPS, GUIDANCE = 75, 9.0
#: flopcalc's default output: twice a 512² input.
DEFAULT_OUTPUT = 1024
#: The output side's multiple: its latent (÷ 8) halves three times in the UNet (its input image: a multiple of 32).
OUTPUT_MULTIPLE = 64


@register_pipeline(NAME)
def sd_latent_upscale_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionLatentUpscalePipeline.__call__`` (see the module doc): CLIP on the prompt (and the negative
    prompt under guidance), 75 steps × 2 passes of the k-UNet on the output latent, one encode of the input image and
    one decode of the output per image."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: its __call__ takes no strength (every step runs on "
                          "the noise concatenated with the upscaled latent)")
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or DEFAULT_OUTPUT, width=s.width or DEFAULT_OUTPUT, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, OUTPUT_MULTIPLE, f"{NAME} output height and width (twice the input image)")
    passes = cfg_passes(s, s.guidance_scale > 1)
    images = s.batch_size * s.num_images_per_prompt
    runs = text_runs(components, [("text_encoder", 77)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    if "unet" in components:
        runs.append(ComponentRun("unet", component_class(components, "unet") or "?", "forward", "denoiser",
                                 RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=77),
                                 s.steps * passes * images, f"{s.steps} steps × {passes} pass(es) × {images} image(s)"))
    if "vae" in components:
        cls = component_class(components, "vae") or "?"
        runs.append(ComponentRun("vae", cls, "encode", "vae_encoder",
                                 RunShape(height=s.height // 2, width=s.width // 2), s.batch_size,
                                 f"{s.batch_size} input image(s) of {s.height // 2}×{s.width // 2}"))
        runs.append(ComponentRun("vae", cls, "decode", "vae_decoder",
                                 RunShape(latent_height=s.height // f, latent_width=s.width // f), images,
                                 f"{images} image(s)"))
    notes = list(missing_notes(components, ["text_encoder", "unet", "vae"]))
    notes.append(f"--height/--width are the output ({s.height}×{s.width}); the input image is half of it "
                 f"({s.height // 2}×{s.width // 2}), encoded once (an input given as a latent skips the encode)")
    return Plan(NAME, s, passes, tuple(runs), tuple(notes))
