"""FLUX.1 pipelines (diffusers ``pipelines/flux``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs


@register_pipeline("FluxPipeline", guidance="separate", denoisers=("FluxTransformer2DModel",),
                   options=("true_cfg_scale", "max_sequence_length", "vae_tiling"))
def flux_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxPipeline.__call__`` (diffusers ``pipelines/flux/pipeline_flux.py``): 1024² default
    (``default_sample_size`` 128 × ``vae_scale_factor``), 28 steps, ``guidance_scale`` 3.5 as an
    embedding (guidance-distilled: one pass), true CFG (two passes, the negative prompt encoded
    too) only when ``true_cfg_scale > 1`` and a negative prompt is given. CLIP runs on 77 tokens
    for its pooled output, T5 on ``max_sequence_length`` (512, at most 512). Latents are packed
    2×2, so each side must divide by ``vae_scale_factor · 2``."""
    f = vae_scale_factor(components)
    s = replace(
        s,
        height=s.height or 128 * f,
        width=s.width or 128 * f,
        steps=s.steps or 28,
        guidance_scale=3.5 if s.guidance_scale is None else s.guidance_scale,
        true_cfg_scale=1.0 if s.true_cfg_scale is None else s.true_cfg_scale,
        max_sequence_length=s.max_sequence_length or 512,
    )
    if s.max_sequence_length > 512:
        raise FlopcalcError(f"max_sequence_length cannot be greater than 512 for FLUX, got {s.max_sequence_length}")
    check_divisible(s.height, s.width, f * 2, "FLUX height and width (packed 2×2 latents)")
    true_cfg = s.true_cfg_scale > 1 and s.negative_prompt
    passes = cfg_passes(s, true_cfg)
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    if s.true_cfg_scale > 1 and not s.negative_prompt:
        notes.append("true_cfg_scale > 1 has no effect without a negative prompt (as in FluxPipeline): one pass")
    runs = text_runs(components, [("text_encoder", 77), ("text_encoder_2", s.max_sequence_length)],
                      s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if true_cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("FluxPipeline", s, passes, tuple(runs), tuple(notes))
