"""Stable Diffusion image variations (diffusers ``pipelines/stable_diffusion/
pipeline_stable_diffusion_image_variation.py``, ``StableDiffusionImageVariationPipeline``;
lambdalabs/sd-image-variations-diffusers): an SD UNet conditioned on a CLIP image embedding instead of text.

* ``_encode_image`` (:145-165): the ``CLIPVisionModelWithProjection`` ``image_encoder`` once per input image
  on the feature extractor's ``image_size²`` pixels; its ``image_embeds`` (the projected class token) become
  one context token (``unsqueeze(1)``), repeated per image; under guidance the negative is
  ``zeros_like`` (no second encode).
* The UNet cross-attends to that single token: every step × pass (2 under ``guidance_scale > 1``, the doubled
  batch, :105, :135) × image.
* Defaults (``__call__``, :263-266, :88-89): 50 steps, guidance 7.5, ``unet.sample_size × vae_scale_factor``
  (512²); one decode per image, no encode of the input image (it only conditions).
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.pipelines.stable_diffusion import _unet_defaults
from flopcalc.engine.registry import RunShape

NAME = "StableDiffusionImageVariationPipeline"
#: Context tokens the UNet sees: the one image embedding (``image_embeddings.unsqueeze(1)``).
IMAGE_TOKENS = 1


@register_pipeline(NAME, options=("vae_tiling",))
def sd_image_variation_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionImageVariationPipeline.__call__`` (see the module doc): the CLIP vision encoder once per
    input image, 50 steps × 2 passes of the UNet on one image-embedding token, one decode per image."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: its __call__ takes no strength (the image only "
                          "conditions; every step runs from noise)")
    if s.negative_prompt:
        raise OptionError(f"--negative-prompt does not apply to {NAME}: it takes no prompt (the negative is a zero "
                          "image embedding)")
    s, f = _unet_defaults(components, s, 50, 7.5)
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs: list[ComponentRun] = []
    if "image_encoder" in components:
        size = components["image_encoder"]["image_size"]
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(height=size, width=size), s.batch_size,
                                 f"{s.batch_size} input image(s) (_encode_image)"))
    runs += denoiser_run(components, "unet", s, f, IMAGE_TOKENS, passes)
    runs += image_runs(components, s, f)
    return Plan(NAME, s, passes, tuple(runs), missing_notes(components, ["image_encoder", "unet", "vae"]))
