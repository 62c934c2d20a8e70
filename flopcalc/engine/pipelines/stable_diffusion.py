"""Stable Diffusion 1.x / 2.x and SDXL pipelines (diffusers ``pipelines/stable_diffusion``,
``pipelines/stable_diffusion_xl``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.pipelines.ip_adapter import with_ip_adapter  # declares the ip_adapter option


def _unet_cfg_passes(components, s: Settings) -> int:
    """``do_classifier_free_guidance``: ``guidance_scale > 1`` and no ``time_cond_proj_dim`` (LCM)."""
    return cfg_passes(s, s.guidance_scale > 1 and components.get("unet", {}).get("time_cond_proj_dim") is None)


def _unet_defaults(components, s: Settings, steps: int, guidance: float) -> tuple[Settings, int]:
    f = vae_scale_factor(components)
    sample = components.get("unet", {}).get("sample_size", 64)
    sample = sample if isinstance(sample, int) else sample[0]
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or steps,
                guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, 8, "Stable Diffusion height and width")
    return s, f


@register_pipeline("StableDiffusionPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   options=("vae_tiling", "ip_adapter"),
                   when=lambda cfg: cfg.get("addition_embed_type") is None)  # text: IF, text_image: Kandinsky 2.1
def sd_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionPipeline.__call__`` (diffusers ``pipelines/stable_diffusion/
    pipeline_stable_diffusion.py``): default size ``unet.sample_size × vae_scale_factor`` (512²
    for SD1.5 and SD2.1-base), 50 steps, ``guidance_scale`` 7.5; with CFG the UNet runs on the
    concatenated [uncond, cond] batch (two passes) and the negative prompt ("" by default) is
    encoded. CLIP on 77 tokens."""
    s, f = _unet_defaults(components, s, 50, 7.5)
    passes = _unet_cfg_passes(components, s)
    runs = text_runs(components, [("text_encoder", 77)], s.batch_size * passes,
                      f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "unet", s, f, 77, passes, kept_steps=denoising_steps_floored)
    runs += image_runs(components, s, f)
    return with_ip_adapter(Plan("StableDiffusionPipeline", s, passes, tuple(runs),
                                missing_notes(components, ["text_encoder", "unet", "vae"])), components)


@register_pipeline("StableDiffusionXLPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   options=("vae_tiling", "ip_adapter"), when=lambda cfg: cfg.get("addition_embed_type") == "text_time"
                   and cfg.get("encoder_hid_dim_type") != "text_proj")  # text_proj: KolorsPipeline
def sdxl_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionXLPipeline.__call__`` (``pipelines/stable_diffusion_xl/
    pipeline_stable_diffusion_xl.py``): 1024² default (``unet.sample_size`` 128 × 8), 50 steps,
    ``guidance_scale`` 5.0, CFG as a doubled UNet batch. Both CLIP encoders run on 77 tokens per
    prompt; the negative prompt is encoded only when one is given: without it,
    ``force_zeros_for_empty_prompt`` (the default) uses zero embeddings instead."""
    s, f = _unet_defaults(components, s, 50, 5.0)
    passes = _unet_cfg_passes(components, s)
    force_zeros_for_empty_prompt = (index or {}).get("force_zeros_for_empty_prompt", True)
    encode_negative = passes == 2 and (s.negative_prompt or not force_zeros_for_empty_prompt)
    runs = text_runs(components, [("text_encoder", 77), ("text_encoder_2", 77)],
                      s.batch_size * (2 if encode_negative else 1),
                      f"{s.batch_size} prompt(s)" + (" + negative" if encode_negative else ""))
    runs += denoiser_run(components, "unet", s, f, 77, passes, kept_steps=denoising_steps_floored)
    runs += image_runs(components, s, f)
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "unet", "vae"]))
    if passes == 2 and not encode_negative:
        notes.append("no negative prompt: SDXL uses zero negative embeddings (force_zeros_for_empty_prompt), "
                     "so the text encoders run once per prompt")
    return with_ip_adapter(Plan("StableDiffusionXLPipeline", s, passes, tuple(runs), tuple(notes)), components)
