"""Stable Diffusion x4 upscaler (diffusers ``pipelines/stable_diffusion/pipeline_stable_diffusion_upscale.py``,
``StableDiffusionUpscalePipeline``; stabilityai/stable-diffusion-x4-upscaler).

The low-resolution image is not encoded: its pixels (3 channels) are concatenated to the latents, which
have the image's own size (``prepare_latents`` at ``image.shape[2:]``, :179-181), so the UNet sees
``4 + 3 = in_channels`` (7) channels (:193-194) and ``class_labels=noise_level`` (:223, its
``num_class_embeds`` table: a lookup, no MACs). The VAE (three levels: ``vae_scale_factor`` 4, its own
config) decodes the latents to 4× the input size (:254). Under classifier-free guidance
(``guidance_scale > 1``, :138) the UNet runs on the doubled batch (:211) and the negative prompt ("" unless
given) is encoded with the prompt (CLIP on 77 tokens).

Defaults (``__call__``, :540-542): 75 steps, guidance 9.0, ``noise_level`` 20 (no FLOPs depend on it). The
size flopcalc takes is the *output* (``height × width``, a multiple of the VAE's factor); the input image is
``height / 4 × width / 4``, by default the UNet's ``sample_size`` (128², the 512² output of the model card).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    config_value,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``StableDiffusionUpscalePipeline.__call__`` defaults.
STEPS, GUIDANCE = 75, 9.0
NAME = "StableDiffusionUpscalePipeline"


@register_pipeline(NAME, options=("vae_tiling",))
def sd_upscale_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionUpscalePipeline.__call__`` (see the module doc): the prompt (and negative prompt under
    CFG) encoded once, 75 steps × 2 passes on the input image's grid, one decode to 4× per image."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: its __call__ takes no strength (every step runs; "
                          "the low-resolution image is concatenated, not encoded)")
    f = vae_scale_factor(components)
    if s.height is None or s.width is None:
        sample = config_value(components, "unet", "sample_size", None)
        if sample is None:
            raise OptionError(f"{NAME} without a unet config has no default size: give --height and --width "
                              "(the output size)")
        sample = sample if isinstance(sample, int) else sample[0]
        s = replace(s, height=s.height or sample * f, width=s.width or sample * f)
    s = replace(s, steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f, f"{NAME} output height and width (4× the input image, the VAE's factor)")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", 77)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "unet", s, f, 77, passes)
    runs += image_runs(components, s, f)
    return Plan(NAME, s, passes, tuple(runs), missing_notes(components, ["text_encoder", "unet", "vae"]))
