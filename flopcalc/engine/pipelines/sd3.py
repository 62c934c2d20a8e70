"""Stable Diffusion 3 / 3.5 pipelines (diffusers ``pipelines/stable_diffusion_3``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

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


@register_pipeline("StableDiffusion3Pipeline", denoisers=("SD3Transformer2DModel",),
                   options=("max_sequence_length", "vae_tiling"))
def sd3_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusion3Pipeline.__call__`` (diffusers ``pipelines/stable_diffusion_3/
    pipeline_stable_diffusion_3.py``): default size ``transformer.sample_size × vae_scale_factor``
    (1024²), 28 steps, ``guidance_scale`` 7.0; CFG when ``guidance_scale > 1`` runs the
    transformer on a doubled batch (two passes) and encodes the negative prompt ("" by default)
    with all three encoders. CLIP-L and CLIP-G on 77 tokens, T5 on ``max_sequence_length`` (256);
    the transformer sees 77 + 256 = 333 text tokens. Sides must divide by
    ``vae_scale_factor · patch_size``."""
    f = vae_scale_factor(components)
    # diffusers: transformer.config.patch_size / sample_size, 2 / 128 without a transformer
    patch = config_value(components, "transformer", "patch_size", 2)
    sample = config_value(components, "transformer", "sample_size", 128)
    s = replace(
        s,
        height=s.height or sample * f,
        width=s.width or sample * f,
        steps=s.steps or 28,
        guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale,
        max_sequence_length=s.max_sequence_length or 256,
    )
    check_divisible(s.height, s.width, f * patch, "SD3 height and width (VAE factor × patch size)")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    runs = text_runs(
        components,
        [("text_encoder", 77), ("text_encoder_2", 77), ("text_encoder_3", s.max_sequence_length)],
        s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""),
    )
    runs += denoiser_run(components, "transformer", s, f, 77 + s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    notes = missing_notes(components, ["text_encoder", "text_encoder_2", "text_encoder_3", "transformer", "vae"])
    return Plan("StableDiffusion3Pipeline", s, passes, tuple(runs), notes)
