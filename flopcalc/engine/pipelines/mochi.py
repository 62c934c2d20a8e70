"""Mochi text-to-video (diffusers ``pipelines/mochi/pipeline_mochi.py``, ``MochiPipeline``): T5
(``T5EncoderModel``), ``MochiTransformer3DModel`` and ``AutoencoderKLMochi`` (its decoder)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures import autoencoder_kl_mochi as mochi_vae
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    require_numeric_tiling,
    text_runs,
    video_decode_runs,
)

#: ``MochiPipeline.__call__`` defaults (pipeline_mochi.py:446-468) and ``default_height``/``default_width``
#: (lines 192-193).
HEIGHT, WIDTH, NUM_FRAMES, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 480, 848, 19, 64, 4.5, 256
#: ``vae_spatial_scale_factor`` and ``vae_temporal_scale_factor`` (pipeline_mochi.py:185-186): fixed in the pipeline,
#: not read from the VAE.
VAE_SPATIAL, VAE_TEMPORAL = 8, 6
#: ``check_inputs`` (line 348): height and width must divide by 8.
SIZE_MULTIPLE = 8
TEXT_NOTE = ("every text token counted as valid: the transformer's joint attention keeps only a prompt's non-padding "
             "tokens (attention_processor.py:1066-1083), so a shorter prompt costs less there (projections run on "
             "all max_sequence_length tokens)")


@register_pipeline("MochiPipeline", denoisers=("MochiTransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def mochi_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                   index: Mapping[str, Any] | None = None) -> Plan:
    """``MochiPipeline.__call__`` (pipeline_mochi.py:446-720): 480×848, 19 frames (``(19 − 1) // 6 + 1 = 4`` latent
    frames, lines 402-404), 64 steps, ``guidance_scale`` 4.5, 256 T5 tokens per prompt (padded to ``max_length``).

    * Under guidance (``guidance_scale > 1``) the negative prompt ("" by default) is encoded too (line 311) and the
      transformer runs once per step on the doubled batch (``torch.cat([latents] * 2)``, line 647): two passes.
    * The sigmas are ``linear_quadratic_schedule(steps, 0.025)`` (line 618): ``steps`` values, every one a
      timestep (none trimmed). Fewer than 2 steps divide by zero there (``linear_steps = steps // 2``).
    * ``vae.decode`` once per video on the whole latent (line 713): tiling and framewise decoding are off unless
      enabled on the VAE; ``vae_tiling`` (``pipe.vae.enable_tiling()``, as the pipeline's docstring example does)
      decodes overlapping latent tiles (:func:`_decode_runs`)."""
    name = "MochiPipeline"
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: it generates from noise")
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or NUM_FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if not s.symbolic and s.steps < 2:
        raise OptionError(f"{name} needs at least 2 steps: linear_quadratic_schedule divides by steps // 2")
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{name} height and width")
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"])) + [TEXT_NOTE]
    passes = cfg_passes(s, s.guidance_scale > 1)
    if s.negative_prompt and s.guidance_scale <= 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    latent_frames = (s.num_frames - 1) // VAE_TEMPORAL + 1
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, VAE_SPATIAL, s.max_sequence_length, passes,
                         latent_frames=latent_frames)
    decode, decode_notes = _decode_runs(components, s, s.batch_size * s.num_images_per_prompt, latent_frames)
    return Plan(name, s, passes, tuple(runs + decode), tuple(notes + decode_notes))


def _decode_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, videos: int,
                 latent_frames: Any) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` of each video's latent: whole, or with ``vae_tiling`` one run per distinct tile shape (every
    overlapping tile decoded in full, all frames at once), as ``AutoencoderKLMochi.decode_split`` says."""
    if "vae" not in components:
        return [], []
    h, w = s.height // VAE_SPATIAL, s.width // VAE_SPATIAL
    split = mochi_vae.decode_split(components["vae"], h, w, bool(s.vae_tiling))
    runs = video_decode_runs(components, split, videos, latent_frames)
    if split.is_whole:
        why = "the pipeline's default" if s.vae_tiling is None else (
            "tiling asked for, but the latent fits one tile" if s.vae_tiling else "as asked")
        return runs, [f"VAE: the whole latent in one decode ({why})"]
    require_numeric_tiling(s)
    return runs, [f"VAE: tiled decode (enable_tiling: {mochi_vae.TILE_SAMPLE_MIN}-pixel tiles every "
                  f"{mochi_vae.TILE_SAMPLE_STRIDE}, overlaps counted in full): {split.calls} tiles per video, each "
                  "decoded with all its frames"]
