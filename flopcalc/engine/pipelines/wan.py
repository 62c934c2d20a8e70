"""Wan 2.1 text-to-video pipeline (diffusers ``pipelines/wan/pipeline_wan.py``, ``WanPipeline``) and
its video-to-video sibling (``pipeline_wan_video2video.py``, ``WanVideoToVideoPipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures import autoencoder_kl_wan as wan_vae
from flopcalc.engine.architectures.autoencoder_kl_wan import (
    scale_factor,
    temporal_scale_factor,
)
from flopcalc.engine.architectures.wan import patch_size
from flopcalc.engine.config import Config
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    require_numeric_tiling,
    text_runs,
    tile_runs,
    video_decode_runs,
)
from flopcalc.engine.registry import RunShape

#: ``WanPipeline.__call__`` defaults.
HEIGHT, WIDTH, NUM_FRAMES, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 480, 832, 81, 50, 5.0, 512
#: ``check_inputs``: ``height`` and ``width`` have to be divisible by 16.
SIZE_MULTIPLE = 16
#: ``WanVideoToVideoPipeline.__call__``: ``strength`` default.
V2V_STRENGTH = 0.8


def _vae_factors(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """``(vae_scale_factor_spatial, vae_scale_factor_temporal)``: the VAE config's
    ``scale_factor_spatial`` / ``scale_factor_temporal``, or 8 and 4 without a VAE (as the pipeline)."""
    vae = components.get("vae")
    if vae is None:
        return 8, 4
    return scale_factor(vae), temporal_scale_factor(vae)


def _transformer_patch(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int, int]:
    from flopcalc.engine.architectures.wan import DEFAULTS

    name = "transformer" if "transformer" in components else "transformer_2"
    cfg = components.get(name)
    return patch_size(Config(name, cfg, DEFAULTS)) if cfg is not None else (1, 2, 2)


def round_num_frames(num_frames: int, temporal: int) -> int:
    """``WanPipeline.__call__``: ``num_frames − 1`` must divide by the temporal factor; otherwise it is
    rounded to ``num_frames // t · t + 1`` with a warning (80 → 81, 79 → 77), then kept ≥ 1."""
    if num_frames % temporal == 1:
        return num_frames
    return max(num_frames // temporal * temporal + 1, 1)


#: The scheduler every Wan Hub repo is saved with (diffusers ``scripts/convert_wan_to_diffusers.py``,
#: ``__main__``, commit 7d568273): ``UniPCMultistepScheduler(prediction_type="flow_prediction",
#: use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=...)``, flow_shift 3.0 for the T2V and
#: I2V repos (Wan 2.2 A14B included), 5.0 for TI2V; every other setting is the class default.
NUM_TRAIN_TIMESTEPS = 1000
FLOW_SHIFT = 3.0


def flow_unipc_timesteps(steps: int, shift: float, num_train_timesteps: int = NUM_TRAIN_TIMESTEPS) -> list[int]:
    """``UniPCMultistepScheduler.set_timesteps`` with ``use_flow_sigmas`` (diffusers
    ``schedulers/scheduling_unipc_multistep.py``, the ``elif self.config.use_flow_sigmas`` branch), in the
    same float64 numpy arithmetic: ``σ = linspace(1, 1/N, S + 1)[:-1]``, shifted ``shift·σ / (1 + (shift − 1)·σ)``,
    the first nudged by −1e-6 when it is 1, timesteps ``σ·N`` cast to int64 (truncated)."""
    import numpy as np

    sigmas = np.linspace(1, 1 / num_train_timesteps, steps + 1)[:-1]
    sigmas = shift * sigmas / (1 + (shift - 1) * sigmas)
    if np.fabs(sigmas[0] - 1) < 1e-6:
        sigmas[0] -= 1e-6
    return [int(t) for t in (sigmas * num_train_timesteps).astype(np.int64)]


def expert_steps(timesteps: list[int], boundary_ratio: float,
                 num_train_timesteps: int = NUM_TRAIN_TIMESTEPS) -> tuple[int, int]:
    """``WanPipeline.__call__``'s switch: ``boundary_timestep = boundary_ratio · num_train_timesteps``;
    a step whose (int64) timestep ``t >= boundary_timestep`` runs ``transformer`` (high noise), the
    others ``transformer_2``. The comparison promotes to float32 (an int64 tensor against a Python
    float), so the boundary is compared as float32. Returns ``(high, low)`` step counts."""
    import numpy as np

    boundary = float(np.float32(boundary_ratio * num_train_timesteps))
    high = sum(1 for t in timesteps if t >= boundary)
    return high, len(timesteps) - high


def _refuse_unsupported(index: Mapping[str, Any] | None, components: Mapping[str, Mapping[str, Any]],
                        s: Settings, pipeline: str = "WanPipeline") -> None:
    """Two experts need both a ``boundary_ratio`` and a ``transformer_2`` (listed; its config may be absent,
    then it is named as not counted); their step split has no closed-form law. Expanded timesteps need the
    1×2×2 patches diffusers' ``mask[0][0][:, ::2, ::2]`` assumes."""
    index = index or {}
    if index.get("boundary_ratio") is not None:
        if s.symbolic:
            raise FlopcalcError("the split of the steps between the two experts (boundary_ratio) comes from the "
                                "scheduler's floating-point timesteps: no closed-form law in S; use the numeric "
                                "estimate")
        if "transformer_2" not in components and not _listed(index, "transformer_2"):
            raise FlopcalcError("this WanPipeline has a boundary_ratio but no transformer_2: diffusers runs "
                                "transformer_2 below the boundary and fails without it")
    elif "transformer_2" in components:
        raise FlopcalcError("this WanPipeline has a transformer_2 but no boundary_ratio in model_index.json: "
                            "diffusers never runs transformer_2 then; remove it or set boundary_ratio")
    if any(components[name]["image_dim"] is not None for name in ("transformer", "transformer_2") if name in components) \
            and pipeline == "WanPipeline":
        raise ConfigError("the transformer has an image_dim: an image-to-video Wan transformer (CLIP image tokens, "
                          "36 input channels), run by WanImageToVideoPipeline; estimate that pipeline's folder")
    if index.get("expand_timesteps") and _transformer_patch(components) != (1, 2, 2):
        raise ConfigError(f"expand_timesteps (one timestep per token) needs 1×2×2 patches, as diffusers builds the "
                          f"per-token timesteps from every second latent row and column; the transformer has "
                          f"patch_size {list(_transformer_patch(components))}")


def _listed(index: Mapping[str, Any], name: str) -> bool:
    entry = index.get(name)
    return isinstance(entry, list) and len(entry) == 2 and entry[1] is not None


def _vae_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, f: int, videos: int,
              latent_frames: int, tiled: bool) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` of each video's latent (and, video-to-video, ``vae.encode`` of each input video),
    split as the VAE says (``decode_split`` / ``encode_split``): untiled one call per video; tiled one run
    per distinct tile shape, every overlapping tile counted in full (``tiled_decode`` / ``tiled_encode``)."""
    if "vae" not in components:
        return [], []
    cls = component_class(components, "vae") or "?"
    vae = components["vae"]
    h, w = s.height // f, s.width // f
    notes = []
    split = wan_vae.decode_split(vae, h, w, tiled)
    runs = video_decode_runs(components, split, videos, latent_frames)
    if not split.is_whole:
        require_numeric_tiling(s)
        notes.append(f"VAE: tiled decode (enable_tiling: {wan_vae.TILE_SAMPLE_MIN}-pixel tiles every "
                     f"{wan_vae.TILE_SAMPLE_STRIDE}, overlaps counted in full): {split.calls} tiles per video, each "
                     f"decoded frame by frame ({latent_frames} latent frames, one decoder call each, causal feature "
                     "cache)")
    else:
        why = "the pipeline's default" if s.vae_tiling is None else (
            "tiling asked for, but the latent fits one tile" if tiled else "as asked")
        notes.append(f"VAE: decoded frame by frame ({latent_frames} latent frames, one decoder call each, the causal "
                     f"feature cache standing in for the frames before), untiled ({why})")
    if s.strength is not None:
        runs[:0] = _encode_runs(cls, vae, s, tiled)
    return runs, notes


def _encode_runs(cls: str, vae: Mapping[str, Any], s: Settings, tiled: bool) -> list[ComponentRun]:
    """``vae.encode`` of each input video (``_encode``: patchify, first frame then chunks of 4; tiled in
    patchified pixels when ``use_tiling`` and a side exceeds 256)."""
    split = wan_vae.encode_split(vae, s.height, s.width, tiled)
    if split.is_whole:
        return [ComponentRun("vae", cls, "encode", "vae_encoder",
                             RunShape(height=s.height, width=s.width, frames=s.num_frames), s.batch_size,
                             f"{s.batch_size} input video(s)")]
    require_numeric_tiling(s)
    return tile_runs("vae", cls, "encode", "vae_encoder", split, s.batch_size,
                     lambda th, tw: RunShape(height=th, width=tw, frames=s.num_frames),
                     lambda k, th, tw: f"{k} tile(s) of {th}×{tw} × {s.batch_size} input video(s)")


@register_pipeline("WanPipeline", guidance="separate", denoisers=("WanTransformer3DModel",), when=lambda cfg: cfg.get("image_dim") is None,
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def wan_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``WanPipeline.__call__``: 480×832, 81 frames, 50 steps, ``guidance_scale`` 5.0,
    ``max_sequence_length`` 512.

    * Frames: ``num_frames − 1`` must divide by ``vae.config.scale_factor_temporal`` (4); diffusers
      rounds any other count to ``num_frames // 4 · 4 + 1`` with a warning, and flopcalc mirrors it
      (with a note). Latent frames ``(num_frames − 1) // 4 + 1`` (81 → 21). Video-to-video keeps the
      input's frame count (``_encode`` drops the frames past the last full chunk of 4).
    * Size: ``check_inputs`` raises unless height and width divide by 16 (the same error here, naming
      the nearest valid sizes); they are then floored to multiples of ``scale_factor_spatial × patch``
      (16 for the 8× VAE and 2×2 patches: a no-op then).
    * Text: UMT5 on ``max_sequence_length`` tokens per prompt, padded (padding counts in full); under
      classifier-free guidance (``guidance_scale > 1``) the negative prompt ("" by default) is encoded
      too and the transformer runs twice per step (two separate forwards, cond and uncond).
    * VAE: ``vae.decode`` on each video's latent, untiled (``AutoencoderKLWan.use_tiling`` is off and
      the pipeline leaves it so), one decoder call per latent frame; ``vae_tiling=True`` counts the
      tiled decode (256-pixel tiles every 192, overlaps in full).

    * Wan 2.2 A14B (``boundary_ratio`` in ``model_index.json``, two experts): ``transformer`` runs the
      steps whose timestep ``t ≥ boundary_ratio · 1000`` (high noise), ``transformer_2`` the rest, both with
      the guidance passes above; the split is counted from the scheduler's own timesteps
      (:func:`flow_unipc_timesteps`, :func:`expert_steps`), e.g. 50 steps at boundary 0.875: 16 + 34. It
      has no closed-form law in S (a symbolic law is refused).
    * Wan 2.2 TI2V (``expand_timesteps``): the transformer gets one timestep per latent token
      (``mask[0][0][:, ::2, ::2] · t``), so its timestep embedder and ``time_proj`` run on every token; the
      VAE is the 16× one (``scale_factor_spatial`` 16, ``patch_size`` 2, z_dim 48): sizes floor to
      multiples of 32.

    ``strength`` (which ``WanPipeline`` does not take) plans the video-to-video run of
    ``WanVideoToVideoPipeline``: the input video VAE-encoded once, ``int(steps · strength)`` steps (two
    experts: the kept last timesteps, split at the boundary)."""
    _refuse_unsupported(index, components, s)
    s, f, latent_frames, passes, notes = video_settings(components, s, index, "WanPipeline")
    if s.strength is not None:
        notes.append("video-to-video (strength given): the input video is VAE-encoded once and "
                     "int(steps · strength) steps run, as WanVideoToVideoPipeline does")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    expert_runs, expert_notes = denoiser_runs(components, s, f, passes, latent_frames, index)
    runs += expert_runs
    notes += expert_notes
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan("WanPipeline", s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


def video_settings(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                   pipeline: str) -> tuple[Settings, int, Any, int, list[str]]:
    """The ``__call__`` defaults and checks ``WanPipeline`` and ``WanImageToVideoPipeline`` share: 480×832, 81
    frames, 50 steps, ``guidance_scale`` 5.0, 512 tokens; frames rounded to ``4k + 1`` (video-to-video: kept),
    sizes checked against 16 and floored to the VAE factor × patch. Returns the resolved settings, the
    spatial factor, the latent frames, the guidance passes and the notes."""
    f, t = _vae_factors(components)
    _, ph, pw = _transformer_patch(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or NUM_FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    experts = ["transformer", "transformer_2"] if (index or {}).get("boundary_ratio") is not None else ["transformer"]
    notes = list(missing_notes(components, ["text_encoder", *experts, "vae"]))
    check_divisible(s.height, s.width, SIZE_MULTIPLE, "Wan height and width")
    # video-to-video takes the input video's frames as they are (its latent: (F − 1) // t + 1 frames)
    frames = round_num_frames(s.num_frames, t) if s.strength is None else s.num_frames
    if frames != s.num_frames:
        notes.append(f"num_frames {s.num_frames} is rounded to {frames} (num_frames − 1 must divide by {t}), as "
                     f"{pipeline} does with a warning")
    height, width = s.height // (f * ph) * (f * ph), s.width // (f * pw) * (f * pw)
    if (height, width) != (s.height, s.width):
        notes.append(f"{s.height}×{s.width} is floored to {height}×{width} (multiples of VAE factor × patch), "
                     f"as {pipeline} does with a warning")
    s = replace(s, num_frames=frames, height=height, width=width)
    passes = cfg_passes(s, s.guidance_scale > 1)
    if s.negative_prompt and passes == 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    return s, f, (s.num_frames - 1) // t + 1, passes, notes


def denoiser_runs(components, s: Settings, f: int, passes: int, latent_frames: int,
                   index: Mapping[str, Any] | None) -> tuple[list[ComponentRun], list[str]]:
    """The transformer once per kept step and guidance pass, per video; with ``boundary_ratio`` (Wan 2.2
    A14B) ``transformer`` on the steps whose timestep is at or above the boundary and ``transformer_2`` on
    the rest, both with the same passes (``do_classifier_free_guidance`` reads ``guidance_scale`` only:
    ``guidance_scale_2`` changes the mix, not the passes); with ``expand_timesteps`` (Wan 2.2 TI2V) each
    forward gets one timestep per token."""
    index = index or {}
    kept = denoising_steps_floored(s.steps, s.strength)  # WanVideoToVideoPipeline.get_timesteps floors first
    videos = s.batch_size * s.num_images_per_prompt
    shape = dict(text_len=s.max_sequence_length, latent_frames=latent_frames)
    notes = []
    if index.get("expand_timesteps"):
        shape["timestep_tokens"] = _timestep_tokens(s, f, latent_frames)
        notes.append("expand_timesteps (Wan 2.2 TI2V): one timestep per latent token "
                     f"({latent_frames} × {s.height // f // 2} × {s.width // f // 2}), so the timestep embedder and "
                     "time_proj run on every token")
    split = [("transformer", kept)]
    boundary = index.get("boundary_ratio")
    if boundary is not None:
        timesteps = flow_unipc_timesteps(s.steps, FLOW_SHIFT)[s.steps - kept:]
        high, low = expert_steps(timesteps, boundary)
        split = [("transformer", high), ("transformer_2", low)]
        notes.append(f"two experts (boundary_ratio {boundary}): transformer on the {high} step(s) with timestep ≥ "
                     f"{boundary} × {NUM_TRAIN_TIMESTEPS}, transformer_2 on the other {low}, from the scheduler's "
                     f"timesteps (UniPCMultistepScheduler, flow sigmas, flow_shift {FLOW_SHIFT}, as the Hub repos "
                     "are saved by convert_wan_to_diffusers.py; a scheduler config you changed is not read)")
    runs = []
    for name, steps in split:
        if name not in components or steps == 0:
            continue
        base = denoiser_run(components, name, replace(s, strength=None, steps=steps), f, s.max_sequence_length,
                            passes, latent_frames=latent_frames)
        runs += [replace(r, shape=replace(r.shape, **shape),
                         why=f"{steps} steps × {passes} pass(es) × {videos} video(s)") for r in base]
    return runs, notes


def _timestep_tokens(s: Settings, f: int, latent_frames: int) -> Any:
    """``expand_timesteps``: ``mask[0][0][:, ::2, ::2]`` of the ``T × H/f × W/f`` latent, flattened:
    ``T · ⌈h/2⌉ · ⌈w/2⌉`` timesteps (h, w are even here: the size is floored to multiples of f × 2)."""
    return latent_frames * (s.height // f // 2) * (s.width // f // 2)


@register_pipeline("WanVideoToVideoPipeline", guidance="separate", options=("max_sequence_length", "num_frames", "vae_tiling"))
def wan_video_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``WanVideoToVideoPipeline.__call__``: the text-to-video defaults with ``strength`` 0.8: the input
    video (``num_frames`` frames, 81 by default here) is VAE-encoded once per prompt and
    ``int(50 · 0.8) = 40`` steps run; ``num_videos_per_prompt`` is forced to 1."""
    notes = []
    if s.num_images_per_prompt != 1:
        notes.append("WanVideoToVideoPipeline forces num_videos_per_prompt = 1")
    s = replace(s, strength=V2V_STRENGTH if s.strength is None else s.strength, num_images_per_prompt=1)
    plan = wan_pipeline(components, s, index=index)
    return replace(plan, pipeline="WanVideoToVideoPipeline", notes=tuple(notes) + plan.notes)
