"""PixArt-α / Σ and DiT pipelines (diffusers ``pipelines/pixart_alpha``, ``pipelines/dit``)."""

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
    nearest_aspect_bin,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs


def pixart_binned_size(height: int, width: int, sample_size: int) -> tuple[int, int]:
    """The size PixArt-α/Σ generate at under resolution binning."""
    return nearest_aspect_bin("pixart_aspect_ratio_bins.json", sample_size, height, width, "PixArt")


@register_pipeline("PixArtAlphaPipeline", denoisers=("PixArtTransformer2DModel",),
                   options=("max_sequence_length", "vae_tiling"))
def pixart_alpha_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``PixArtAlphaPipeline.__call__`` (``pipelines/pixart_alpha/pipeline_pixart_alpha.py``):
    default size ``transformer.sample_size × 8``; with ``use_resolution_binning`` (default) the
    size snaps to the nearest aspect-ratio bin and the image is generated there, then resized.
    20 steps, ``guidance_scale`` 4.5, CFG as a doubled batch with the negative prompt ("")
    encoded; T5 on ``max_sequence_length`` 120 tokens."""
    return _pixart(components, s, "PixArtAlphaPipeline", 120)


@register_pipeline("PixArtSigmaPipeline", options=("max_sequence_length", "vae_tiling"))
def pixart_sigma_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``PixArtSigmaPipeline.__call__`` (``pipeline_pixart_sigma.py``): as PixArt-α with T5 on
    300 tokens and a 2048px bin table for ``sample_size`` 256."""
    return _pixart(components, s, "PixArtSigmaPipeline", 300)


def _pixart(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str, text_len: int) -> Plan:
    f = vae_scale_factor(components)
    # diffusers: transformer.config.sample_size / patch_size, 128 / 2 without a transformer
    sample = config_value(components, "transformer", "sample_size", 128)
    patch = config_value(components, "transformer", "patch_size", 2)
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or 20,
                guidance_scale=4.5 if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or text_len)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.resolution_binning:
        binned = pixart_binned_size(s.height, s.width, sample)
        if binned != (s.height, s.width):
            notes.append(f"resolution binning: {s.height}×{s.width} is generated at {binned[0]}×{binned[1]} and "
                         f"resized, as {name} does (turn off with --no-resolution-binning)")
            s = replace(s, height=binned[0], width=binned[1])
    check_divisible(s.height, s.width, f * patch, "PixArt height and width (VAE factor × patch size)")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                      f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("DiTPipeline", denoisers=("DiTTransformer2DModel",))
def dit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``DiTPipeline.__call__`` (``pipelines/dit/pipeline_dit.py``): class-conditional, no text
    encoder; generates at ``transformer.sample_size × 8`` (it takes no size argument: a size
    given here estimates the transformer at that size), 50 steps, ``guidance_scale`` 4.0 with
    the latents doubled (two passes). ``batch_size`` is the number of class labels."""
    f = vae_scale_factor(components)
    sample = config_value(components, "transformer", "sample_size", 32)
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or 50,
                guidance_scale=4.0 if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f * config_value(components, "transformer", "patch_size", 2),
                    "DiT height and width (VAE factor × patch size)")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = denoiser_run(components, "transformer", s, f, 0, passes) + image_runs(components, s, f)
    notes = [] if (s.height, s.width) == (sample * f, sample * f) else [
        f"DiTPipeline itself always generates at {sample * f}×{sample * f}; this estimates the transformer at "
        f"{s.height}×{s.width}"]
    return Plan("DiTPipeline", s, passes, tuple(runs), tuple(notes))
