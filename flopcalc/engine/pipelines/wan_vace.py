"""Wan VACE (diffusers ``pipelines/wan/pipeline_wan_vace.py``, ``WanVACEPipeline``), planned with the Wan
text-to-video pieces (:mod:`flopcalc.engine.pipelines.wan`) and ``WanVACETransformer3DModel``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import Plan, Settings, component_class, register_pipeline, text_runs
from flopcalc.engine.pipelines.wan import _encode_runs, _refuse_unsupported, _vae_runs, denoiser_runs, video_settings

NAME = "WanVACEPipeline"


@register_pipeline(NAME, guidance="separate", denoisers=("WanVACETransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def wan_vace_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                      index: Mapping[str, Any] | None = None) -> Plan:
    """``WanVACEPipeline.__call__`` (pipeline_wan_vace.py:692) at its defaults: ``WanPipeline``'s (480×832, 81
    frames rounded to ``4k + 1``, 50 steps, ``guidance_scale`` 5.0 as two forwards, 512 UMT5 tokens, the
    frame-by-frame decode; two experts split at ``boundary_ratio`` for Wan 2.2), with no ``video``, ``mask`` or
    ``reference_images``:

    * ``preprocess_conditions`` (:415) makes a zero video and an all-ones mask of ``num_frames`` frames, so
      ``prepare_video_latents`` (:515) VAE-encodes the inactive and the reactive video (``video · (1 − mask)``,
      ``video · mask``): two encodes of ``num_frames`` frames;
    * ``prepare_masks`` folds the mask into 64 channels on the latent grid (no MACs) and the control latent
      (32 + 64 = ``vace_in_channels``) enters every transformer forward (``control_hidden_states``): the VACE
      branch runs on the N latent tokens every step and pass.

    Videos, masks and reference images given by the user are not modelled (reference images would add latent
    frames). One video only: ``batch_size`` and ``num_videos_per_prompt`` above 1 are refused, as the pipeline
    raises; no ``strength``."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: its control video conditions every step and the "
                          "whole schedule runs")
    if s.batch_size != 1 or s.num_images_per_prompt != 1:
        raise OptionError(f"{NAME} generates one video (more raise 'not yet supported'): drop --batch-size and "
                          "--num-images-per-prompt")
    _refuse_unsupported(index, components, s, NAME)
    s, f, latent_frames, passes, notes = video_settings(components, s, index, NAME)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    if "vae" in components:
        encodes = _encode_runs(component_class(components, "vae") or "?", components["vae"], s, bool(s.vae_tiling))
        runs += [replace(r, runs=2 * r.runs, why=f"{r.why} × 2 (the inactive and the reactive video)")
                 for r in encodes]
        notes.append("no video, mask or reference image given (the __call__ defaults): a zero video and an all-ones "
                     "mask, so the inactive and reactive videos are VAE-encoded (two encodes of num_frames frames); "
                     "the control latent (latents + 64 mask channels) runs through the VACE blocks every forward")
    expert_runs, expert_notes = denoiser_runs(components, s, f, passes, latent_frames, index)
    decode_runs, vae_notes = _vae_runs(components, s, f, s.batch_size, latent_frames, bool(s.vae_tiling))
    return Plan(NAME, s, passes, tuple(runs + expert_runs + decode_runs), tuple(notes + expert_notes + vae_notes))
