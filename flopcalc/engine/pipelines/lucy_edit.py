"""Lucy Edit (diffusers ``pipelines/lucy/pipeline_lucy_edit.py``, ``LucyEditPipeline``): Wan 2.2 video editing,
planned with the Wan pieces (:mod:`flopcalc.engine.pipelines.wan`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import Plan, Settings, component_class, config_value, register_pipeline, text_runs
from flopcalc.engine.pipelines.wan import _encode_runs, _refuse_unsupported, _vae_runs, denoiser_runs, video_settings

NAME = "LucyEditPipeline"


@register_pipeline(NAME, guidance="separate", options=("max_sequence_length", "num_frames", "vae_tiling"))
def lucy_edit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``LucyEditPipeline.__call__`` (pipeline_lucy_edit.py:453): ``WanPipeline``'s defaults (480×832, 81 frames
    rounded to ``4k + 1``, 50 steps, ``guidance_scale`` 5.0 as two forwards, 512 UMT5 tokens; two experts at
    ``boundary_ratio``; one timestep per token with ``expand_timesteps``, as Wan 2.2 TI2V), and the video to
    edit (``num_frames`` frames): ``prepare_latents`` (:370) VAE-encodes each video once
    (``[self.vae.encode(vid.unsqueeze(0)) for vid in video]``, one per generated video: the shapes must match)
    and concatenates its latent to the noise latent on channels every step (``in_channels`` = ``out_channels``
    + the VAE's ``z_dim``). The decode is Wan's. No ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the video to edit conditions every step (its latent "
                          "concatenated on channels) and the whole schedule runs")
    z_dim = config_value(components, "vae", "z_dim", None)
    for name in ("transformer", "transformer_2"):
        if name in components and z_dim is not None:
            cfg = components[name]
            out = cfg["out_channels"] or cfg["in_channels"]
            if cfg["in_channels"] != out + z_dim:
                raise FlopcalcError(f"{name}: in_channels {cfg['in_channels']} ≠ out_channels {out} + the VAE's z_dim "
                                    f"{z_dim} (the noise and the edited video's latent, concatenated on channels by "
                                    f"{NAME})")
    _refuse_unsupported(index, components, s, NAME)
    s, f, latent_frames, passes, notes = video_settings(components, s, index, NAME)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    videos = s.batch_size * s.num_images_per_prompt
    if "vae" in components:
        runs += [replace(r, why=f"{r.why}: the video(s) to edit, one per generated video")
                 for r in _encode_runs(component_class(components, "vae") or "?", components["vae"],
                                       replace(s, batch_size=videos), bool(s.vae_tiling))]
    expert_runs, expert_notes = denoiser_runs(components, s, f, passes, latent_frames, index)
    decode_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan(NAME, s, passes, tuple(runs + expert_runs + decode_runs), tuple(notes + expert_notes + vae_notes))
