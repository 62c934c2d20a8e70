"""LTX-Video text-to-video pipeline (diffusers ``pipelines/ltx/pipeline_ltx.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.architectures import autoencoder_kl_ltx as ltx_vae
from flopcalc.engine.architectures.autoencoder_kl_ltx import (
    spatial_compression,
    temporal_compression,
)
from flopcalc.engine.architectures.autoencoder_kl_ltx import tile_grid as tiles  # noqa: F401  (the tile grid, by its old name)
from flopcalc.formulas.tiling import extents as tile_sides  # noqa: F401  (the tile sides, by their old name)
from flopcalc.engine.errors import ResolutionError
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
    tile_runs,
    video_decode_runs,
)
from flopcalc.engine.registry import RunShape

#: ``LTXPipeline.__call__`` keyword defaults (diffusers 0.42.1). The docstring recommends 480×704
#: ("set to 480 by default for the best results"), but the signature says ``height=512``.
DEFAULT_HEIGHT, DEFAULT_WIDTH, DEFAULT_FRAMES = 512, 704, 161
DEFAULT_STEPS, DEFAULT_GUIDANCE, DEFAULT_TEXT_LEN = 50, 3.0, 128
#: ``check_inputs``: height and width have to be divisible by 32.
SIZE_MULTIPLE = 32
#: ``LTXPipeline.__init__``'s fallbacks without a VAE: 32× spatial, 8× temporal compression.
FALLBACK_SPATIAL, FALLBACK_TEMPORAL = 32, 8


def compression(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """``(vae_spatial_compression_ratio, vae_temporal_compression_ratio)`` as ``LTXPipeline``
    reads them from its VAE (32 and 8 without one)."""
    vae = components.get("vae")
    if vae is None:
        return FALLBACK_SPATIAL, FALLBACK_TEMPORAL
    return spatial_compression(vae), temporal_compression(vae)


def check_frames(num_frames: int, temporal: int, patch_t: int = 1) -> None:
    """``num_frames − 1`` must divide by the temporal compression (and the latent frames by the
    transformer's ``patch_size_t``); the error names the nearest valid frame counts. (LTXPipeline
    itself floors the latent frames and returns ``8(T − 1) + 1`` frames.)"""
    step = temporal * patch_t
    first = 1 + temporal * (patch_t - 1)  # the fewest frames giving patch_t latent frames
    if num_frames >= first and (num_frames - first) % step == 0:
        return
    lo = first + (num_frames - first) // step * step
    options = [o for o in (lo, lo + step) if o >= first]
    rule = f"{temporal}k + 1" if patch_t == 1 else f"{step}k + {first}"
    raise ResolutionError(f"LTX-Video num_frames must be {rule} (the VAE compresses time {temporal}×"
                          + (f", the transformer patches {patch_t} latent frames" if patch_t > 1 else "")
                          + f"): num_frames {num_frames} → nearest valid: {' or '.join(map(str, options))}.")


def _tiling_text(grid: Mapping[tuple[int, int], int], unit: str) -> str:
    return ", ".join(f"{n}× {h}×{w}" for (h, w), n in grid.items()) + f" {unit}"


def decode_runs(components: Mapping[str, Mapping[str, Any]], videos: int, latent: tuple[int, int, int],
                spatial: int, tiled: bool) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` of each video's ``(frames, h, w)`` latent, split as an LTX-Video or LTX-2 VAE splits it
    (:func:`~flopcalc.engine.architectures.autoencoder_kl_ltx.latent_tile_split` at the VAE's ``spatial``
    compression; untiled: one call over the whole latent; tiled: one decoder call per overlapping spatial tile,
    every tile over all latent frames), one run per tile shape; with the plan note."""
    if "vae" not in components:
        return [], []
    latent_frames, lh, lw = latent
    tile = ltx_vae.TILE_SAMPLE // spatial
    split = ltx_vae.latent_tile_split(lh, lw, spatial, tiled)
    if tiled and split.is_whole:
        note = (f"VAE: tiling is on (vae.enable_tiling()) but the {lh}×{lw} latent fits one {tile}×{tile} tile: "
                f"decoded in one call over all {latent_frames} latent frames, as the VAE does")
    elif tiled:
        note = (f"VAE: tiled as vae.enable_tiling() sets it ({ltx_vae.TILE_SAMPLE}-px tiles at stride "
                f"{ltx_vae.TILE_STRIDE}, overlaps counted in full): decoded in {split.calls} spatial tile(s) per video "
                f"({_tiling_text(split.tiles(), 'latent')}), each over all {latent_frames} latent frames (no temporal "
                "chunks: use_framewise_decoding stays off)")
    else:
        note = (f"VAE: decoded in one call over all {latent_frames} latent frames (no temporal chunks, "
                "use_framewise_decoding is off), untiled: the pipeline's default (--vae-tiling counts "
                "vae.enable_tiling())")
    return video_decode_runs(components, split, videos, latent_frames), [note]


def vae_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, videos: int, latent_frames: int,
             spatial: int, tiled: bool) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` once per video (:func:`decode_runs`) and, given ``strength``, ``vae.encode`` once per input
    video (``encode_split``: tiled alike, on pixel tiles); with the plan notes."""
    runs, notes = decode_runs(components, videos, (latent_frames, s.height // spatial, s.width // spatial), spatial,
                              tiled)
    if runs and s.strength is not None:
        cls = component_class(components, "vae") or "?"
        pixels = ltx_vae.encode_split(components["vae"], s.height, s.width, tiled)
        encode = tile_runs("vae", cls, "encode", "vae_encoder", pixels, s.batch_size,
                           lambda h, w: RunShape(height=h, width=w, frames=s.num_frames),
                           lambda n, h, w: f"{s.batch_size} input video(s)" if pixels.is_whole
                           else f"{n} tile(s) of {h}×{w} px × {s.batch_size} input video(s)")
        runs = encode + runs
    return runs, notes


@register_pipeline("LTXPipeline", denoisers=("LTXVideoTransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def ltx_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``LTXPipeline.__call__`` (diffusers ``pipelines/ltx/pipeline_ltx.py``): 512×704 (height ×
    width, the signature's defaults), 161 frames, 50 steps, ``guidance_scale`` 3.0: classifier-free
    guidance on a doubled batch (``guidance_scale > 1``) with the negative prompt ("" unless given)
    encoded by T5 on ``max_sequence_length`` 128 tokens, as the prompt.

    Latents: ``(num_frames − 1) // 8 + 1`` frames of ``height/32 × width/32`` (the VAE's
    compression ratios), packed by ``_pack_latents`` into tokens (1×1×1 patches for the released
    transformers); one timestep per video. ``check_inputs`` requires sides divisible by 32; flopcalc
    also asks for ``num_frames = 8k + 1`` (the pipeline floors others) and names the nearest valid
    values. The VAE decodes each video once, untiled unless ``vae_tiling`` (``vae.enable_tiling()``)."""
    spatial, temporal = compression(components)
    patch = config_value(components, "transformer", "patch_size", 1) or 1
    patch_t = config_value(components, "transformer", "patch_size_t", 1) or 1
    s = replace(s, height=s.height or DEFAULT_HEIGHT, width=s.width or DEFAULT_WIDTH,
                num_frames=s.num_frames or DEFAULT_FRAMES, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or DEFAULT_TEXT_LEN)
    check_divisible(s.height, s.width, math.lcm(SIZE_MULTIPLE, spatial * patch),
                    "LTX-Video height and width (check_inputs: 32; the VAE's spatial compression × patch size)")
    check_frames(s.num_frames, temporal, patch_t)
    latent_frames = (s.num_frames - 1) // temporal + 1
    passes = cfg_passes(s, s.guidance_scale > 1)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.strength is not None:
        notes.append("LTXPipeline takes no strength (no video-to-video): estimated as the text-to-video pipeline with "
                     "the input video VAE-encoded and the last `strength` of the schedule run")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, spatial, s.max_sequence_length, passes,
                         latent_frames=latent_frames)
    vae, vae_notes = vae_runs(components, s, s.batch_size * s.num_images_per_prompt, latent_frames, spatial,
                              tiled=bool(s.vae_tiling))
    return Plan("LTXPipeline", s, passes, tuple(runs + vae), tuple(notes + vae_notes))
