"""Latte (diffusers ``pipelines/latte/pipeline_latte.py``, ``LattePipeline``): text-to-video with
``LatteTransformer3DModel`` (:mod:`flopcalc.engine.architectures.latte`) on the latents of a 2D VAE (one per frame),
T5 text states."""

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
from flopcalc.engine.pipelines.vae import vae_runs

NAME = "LattePipeline"
#: ``LattePipeline.__call__`` defaults (pipeline_latte.py:616-638): 16 frames, 50 steps, ``guidance_scale`` 7.5, the
#: size ``transformer.sample_size × vae_scale_factor``; ``encode_prompt`` pads T5 to a hard-coded 120 tokens (:257).
NUM_FRAMES, STEPS, GUIDANCE, T5_TOKENS = 16, 50, 7.5, 120


@register_pipeline(NAME, denoisers=("LatteTransformer3DModel",), options=("max_sequence_length", "num_frames",
                                                                         "vae_tiling"))
def latte_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                   index: Mapping[str, Any] | None = None) -> Plan:
    """``LattePipeline.__call__`` (pipeline_latte.py:616-893): ``sample_size × 8`` (512×512), 16 frames
    (``video_length``), 50 steps, ``guidance_scale`` 7.5 as a doubled batch (the negative prompt "" encoded too).

    * T5 on 120 tokens per prompt (and negative prompt), padded (counted in full).
    * ``mask_feature`` (on by default, :343-350): with one video in the batch the transformer sees the prompt's own
      tokens only (``keep_index = mask.sum()``); ``max_sequence_length`` is that count here (120 by default: a prompt
      that fills the tokenizer's 120); with more videos the masked 120 tokens are kept.
    * Each step: the transformer on the ``F × H/8 × W/8`` latent (spatial blocks per frame, temporal blocks per
      position) per row of the doubled batch.
    * ``decode_latents`` (:895-914): every frame's latent decoded by the 2D VAE (chunks of ``decode_chunk_size`` 14
      frames: the same per-frame work), ``F`` decodes per video."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: it generates from noise")
    f = vae_scale_factor(components)
    sample = config_value(components, "transformer", "sample_size", 64)
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, num_frames=s.num_frames or NUM_FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    check_divisible(s.height, s.width, 8, f"{NAME} height and width")
    if s.max_sequence_length is not None and not 1 <= s.max_sequence_length <= T5_TOKENS:
        raise OptionError(f"{NAME}: --max-sequence-length is the prompt's T5 token count (mask_feature), at most the "
                          f"{T5_TOKENS} tokens the pipeline pads to")
    videos = s.batch_size * s.num_images_per_prompt
    # the prompt's token count applies with one video only (a law holds at the count given, not in L)
    prompt = int(s.max_sequence_length or T5_TOKENS) if videos == 1 else T5_TOKENS
    if videos > 1 and s.max_sequence_length not in (None, T5_TOKENS):
        notes.append(f"with {videos} videos in the batch mask_feature keeps all {T5_TOKENS} (masked) text tokens: "
                     "max_sequence_length does not apply")
    s = replace(s, max_sequence_length=prompt)
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", T5_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    frames = int(s.num_frames)  # the transformer's video_length fixes it: a law holds at that count, not in F
    runs += denoiser_run(components, "transformer", s, f, prompt, passes, latent_frames=frames)
    runs += vae_runs(components, s, videos * frames, s.height // f, s.width // f)
    notes.append(f"VAE: every frame decoded by the 2D VAE ({s.num_frames} per video)")
    return Plan(NAME, s, passes, tuple(runs), tuple(notes))
