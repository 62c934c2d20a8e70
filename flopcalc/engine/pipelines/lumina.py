"""Lumina pipelines (diffusers ``pipelines/lumina2/pipeline_lumina2.py``, ``pipelines/lumina/pipeline_lumina.py``).

``Lumina2Pipeline`` was added to diffusers as ``Lumina2Text2ImgPipeline`` and ``LuminaPipeline`` as
``LuminaText2ImgPipeline``; Hub ``model_index.json`` files still carry the old names, and both
names of each plan here are the same plan.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError
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
)
from flopcalc.engine.pipelines.vae import image_runs

#: Both pipelines hard-code ``self.vae_scale_factor = 8`` (whatever the VAE config says).
LUMINA_VAE_SCALE_FACTOR = 8
#: ``max_sequence_length`` default of both ``__call__``s (Gemma tokens; padded to it by Lumina2).
LUMINA_TEXT_LEN = 256
#: ``Lumina2Pipeline.check_inputs`` refuses longer text.
LUMINA2_MAX_TEXT_LEN = 512


def _size_multiple(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``check_inputs``: sides divide by ``vae_scale_factor · 2``; the latent must also divide by
    the transformer's patch size (2 for every Lumina checkpoint)."""
    patch = config_value(components, "transformer", "patch_size", 2)
    return LUMINA_VAE_SCALE_FACTOR * math.lcm(2, patch if isinstance(patch, int) and patch > 0 else 2)


def _defaults(components: Mapping[str, Mapping[str, Any]], s: Settings) -> Settings:
    """``height = width = default_sample_size · vae_scale_factor`` (``transformer.sample_size``,
    128: 1024²), 30 steps, ``guidance_scale`` 4.0, 256 text tokens."""
    sample = config_value(components, "transformer", "sample_size", 128)
    size = sample * LUMINA_VAE_SCALE_FACTOR
    return replace(s, height=s.height or size, width=s.width or size, steps=s.steps or 30,
                   guidance_scale=4.0 if s.guidance_scale is None else s.guidance_scale,
                   max_sequence_length=s.max_sequence_length or LUMINA_TEXT_LEN)


def _img2img_note(s: Settings, name: str) -> list[str]:
    if s.strength is None:
        return []
    return [(f"diffusers has no {name} image-to-image pipeline: estimated as the text-to-image pipeline with the "
             "input image VAE-encoded and the last `strength` of the schedule run")]


@register_pipeline("Lumina2Pipeline", guidance="separate", denoisers=("Lumina2Transformer2DModel",),
                   options=("max_sequence_length", "vae_tiling"))
def lumina2_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                     index: Mapping[str, Any] | None = None) -> Plan:
    """``Lumina2Pipeline.__call__`` (``pipelines/lumina2/pipeline_lumina2.py``): 1024² default
    (``transformer.sample_size`` × 8), 30 steps, ``guidance_scale`` 4.0. CFG (``guidance_scale > 1``)
    runs the transformer twice per step, as two separate batch-1 forwards (conditional, then
    unconditional). The unconditional one is skipped on step ``i`` (of ``steps``) only when
    ``(i + 1) / steps > cfg_trunc_ratio``; the default ratio 1.0 (no setting here) skips none, so
    every step runs both.
    Gemma-2 encodes the prompt, prefixed with the pipeline's system prompt, padded
    (``padding="max_length"``) to ``max_sequence_length`` (256, at most 512), and the negative prompt
    ("" unless given, no system prompt) the same way. The transformer's caption refiner sees all 256
    tokens; its joint blocks see the valid ones (the mask's sum) plus the image tokens: flopcalc
    counts all 256 as valid, the upper bound. Sides divide by 16."""
    name = (index or {}).get("_class_name", "Lumina2Pipeline")
    s = _defaults(components, s)
    if s.max_sequence_length > LUMINA2_MAX_TEXT_LEN:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {LUMINA2_MAX_TEXT_LEN} for Lumina2Pipeline, "
                            f"got {s.max_sequence_length}")
    f = LUMINA_VAE_SCALE_FACTOR
    check_divisible(s.height, s.width, _size_multiple(components), "Lumina-Image-2.0 height and width")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    notes = [*missing_notes(components, ["text_encoder", "transformer", "vae"]), *_img2img_note(s, "Lumina2"),
             (f"the transformer's joint blocks count all {s.max_sequence_length} caption tokens as valid (the "
              "upper bound): the pipeline packs only the prompt's real tokens (system prompt + prompt; the "
              "negative prompt has no system prompt) beside the image tokens")]
    return Plan(name, s, passes, tuple(runs), tuple(notes))


register_pipeline("Lumina2Text2ImgPipeline", guidance="separate", options=("max_sequence_length", "vae_tiling"))(lumina2_pipeline)


@register_pipeline("LuminaPipeline", denoisers=("LuminaNextDiT2DModel",), options=("max_sequence_length", "vae_tiling"))
def lumina_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                    index: Mapping[str, Any] | None = None) -> Plan:
    """``LuminaPipeline.__call__`` (``pipelines/lumina/pipeline_lumina.py``, Lumina-Next): 1024²
    default (``transformer.sample_size`` × 8), 30 steps, ``guidance_scale`` 4.0. CFG
    (``guidance_scale > 1``) doubles the batch (``torch.cat([latents] * 2)``, conditional and
    unconditional captions): two passes every step (only the first 3 latent channels of the
    prediction are guided, which changes no compute). Gemma encodes the prompt padded to its own
    longest length (a multiple of 8, truncated at ``self.max_sequence_length`` = 256: the
    ``max_sequence_length`` argument is ignored), and the negative prompt ("" unless given) padded
    to the same length: flopcalc counts 256, the upper bound (give a shorter padded length with
    ``max_sequence_length``). Sides divide by 16."""
    name = (index or {}).get("_class_name", "LuminaPipeline")
    s = _defaults(components, s)
    if s.max_sequence_length > LUMINA_TEXT_LEN:
        raise FlopcalcError(f"LuminaPipeline truncates the prompt at {LUMINA_TEXT_LEN} tokens "
                            f"(self.max_sequence_length); max_sequence_length {s.max_sequence_length} cannot run")
    f = LUMINA_VAE_SCALE_FACTOR
    check_divisible(s.height, s.width, _size_multiple(components), "Lumina-Next height and width")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    notes = [*missing_notes(components, ["text_encoder", "transformer", "vae"]), *_img2img_note(s, "Lumina-Next")]
    return Plan(name, s, passes, tuple(runs), tuple(notes))


register_pipeline("LuminaText2ImgPipeline", options=("max_sequence_length", "vae_tiling"))(lumina_pipeline)
