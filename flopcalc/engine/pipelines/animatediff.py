"""AnimateDiff (diffusers ``pipelines/animatediff``): an SD1.5 pipeline whose UNet carries motion modules.

A folder as ``AnimateDiffPipeline.save_pretrained`` writes it: ``unet`` a ``UNetMotionModel`` (the
pipeline's ``__init__`` builds it with ``UNetMotionModel.from_unet2d(unet, motion_adapter)`` from the
base's ``UNet2DConditionModel``: ``validation/compose_motion_unet.py`` writes that config for a base and
an adapter), ``motion_adapter`` (its weights are in the UNet; it runs nothing itself), ``text_encoder``
(CLIP), ``vae`` (``AutoencoderKL``), and for the ControlNet variants a ``controlnet``.

What ``AnimateDiffPipeline.__call__`` (``pipeline_animatediff.py:574``) runs:

* size ``unet.sample_size × vae_scale_factor`` (512² for SD1.5 bases), ``num_frames`` 16 (the motion
  modules' sinusoidal table holds ``motion_max_seq_length`` frames: more fail), 50 steps,
  ``guidance_scale`` 7.5: classifier-free guidance on a doubled batch when > 1, the negative prompt ("")
  encoded; ``num_videos_per_prompt`` is overwritten with 1 (:698).
* CLIP once per prompt (and negative) on 77 tokens; the embeddings are repeated per frame (:765).
* the UNet once per step and pass on ``(1, 4, F, H/8, W/8)`` (one latent frame per frame).
* ``decode_latents`` (:407): the VAE decodes the ``B·F`` frames as images (chunks of ``decode_chunk_size``
  frames in one call: linear in the chunk), so one ``vae.decode`` per frame; ``vae.enable_tiling()``
  (``--vae-tiling``) tiles each frame as the image pipelines do.

``AnimateDiffSparseControlNetPipeline`` (``pipeline_animatediff_sparsectrl.py:714``): AnimateDiffPipeline's
defaults and runs plus SparseCtrl's ``SparseControlNetModel`` every step on the UNet's batch (the doubled CFG batch:
``control_model_input = latent_model_input``, :963; guess mode, from ``global_pool_conditions``, under CFG hands the
UNet residuals of half its batch and fails). The ``conditioning_frames`` images (``--conditioning-frames``, 1 by
default: ``controlnet_frame_indices`` is ``[0]``) are resized to ``height × width`` and, for the simplified
conditioning embedding, VAE-encoded one by one (``prepare_image``, :650); they are placed among ``num_frames`` zero
frames, one conditioning video for the whole batch, which the ControlNet embeds once per call and adds to every row
(flopcalc.engine.architectures.controlnet_sparsectrl). The full embedding takes the images themselves: its output
(``2^(n−1)`` times smaller) must be the latent size, or the addition fails.

``AnimateDiffVideoToVideoPipeline`` (``pipeline_animatediff_video2video.py:745``): the input video's
frames (``--num-frames``, 16 when not given: ``AnimateDiffPipeline``'s default) VAE-encoded one by one
(``encode_video``, :509), ``strength`` 0.8, ``get_timesteps`` (:626) keeps ``int(steps·strength)`` steps.

The ControlNet variants (``pipeline_animatediff_controlnet.py:1063``,
``pipeline_animatediff_video2video_controlnet.py:1301``) run the ``ControlNetModel`` every kept step on the
frames folded into the batch (``control_model_input.reshape(-1, C, h, w)``): per pass and video, once per
frame, on the doubled CFG batch, or the conditional half in guess mode (``global_pool_conditions``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import vae_runs
from flopcalc.engine.pipelines.sd_addons import TEXT_LEN, controlnet_runs
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, pipeline_option

pipeline_option("conditioning_frames", kind=COUNT, bound=(4096, "conditioning frames"),
                help="AnimateDiffSparseControlNetPipeline: sparse conditioning images given (default 1)",
                refusal="it takes no sparse conditioning frames")

#: ``AnimateDiffPipeline.__call__`` defaults.
DEFAULT_FRAMES = 16
DEFAULT_STEPS = 50
DEFAULT_GUIDANCE = 7.5
#: ``AnimateDiffSDXLPipeline.__call__``'s ``guidance_scale``.
SDXL_GUIDANCE = 5.0
#: ``AnimateDiffVideoToVideoPipeline.__call__``'s ``strength``.
V2V_STRENGTH = 0.8


def _check_motion_unet(components: Mapping[str, Any], frames: int) -> None:
    unet = components["unet"]
    if component_class(components, "unet") == "UNet2DConditionModel":
        raise ConfigError(
            "unet: a UNet2DConditionModel: the AnimateDiff pipelines run the UNetMotionModel that "
            "UNetMotionModel.from_unet2d(unet, motion_adapter) builds from it (the layout "
            "AnimateDiffPipeline.save_pretrained writes); write that config into the folder with "
            "validation/compose_motion_unet.py BASE/unet FOLDER, or use the animatediff-v1-5-3 card")
    limit = unet["motion_max_seq_length"]
    if frames > limit:
        raise ResolutionError(f"num_frames {frames} exceeds the motion modules' motion_max_seq_length {limit} (their "
                              f"sinusoidal position table): the UNet fails beyond {limit} frames")


def _video_settings(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings, f: int, guidance: float,
                    strength: float | None, expected: list[str]) -> tuple[Settings, list[str]]:
    """The defaults these pipelines share: ``unet.sample_size × vae_scale_factor``, 16 frames, 50 steps, their
    ``guidance``, ``num_videos_per_prompt`` forced to 1, ``strength`` (video-to-video's default, or None)."""
    notes = list(missing_notes(components, expected))
    if s.num_images_per_prompt != 1:
        notes.append(f"num_videos_per_prompt {s.num_images_per_prompt} is ignored: {name}.__call__ sets it to 1")
    sample = config_value(components, "unet", "sample_size", None)
    if (s.height is None or s.width is None) and sample is None:
        raise ConfigError(f"unet: no sample_size, so {name} has no default size: give --height and --width")
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, num_frames=s.num_frames or DEFAULT_FRAMES,
                steps=s.steps or DEFAULT_STEPS, num_images_per_prompt=1,
                guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale,
                strength=s.strength if s.strength is not None or strength is None else strength)
    check_divisible(s.height, s.width, 8, f"{name} height and width")
    return s, notes


def video_unet_plan(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings, *, guidance: float,
                    strength: float | None, controlnet: bool = False) -> Plan:
    """The plan shared by the SD-style video pipelines whose UNet folds the frames into its batch (AnimateDiff,
    ModelScope): ``unet.sample_size × vae_scale_factor``, ``num_frames`` 16, 50 steps, CFG at ``guidance`` on
    a doubled batch, CLIP on 77 tokens, ``num_videos_per_prompt`` forced to 1; ``strength`` (video-to-video's
    default, None for text-to-video) keeps ``int(steps·strength)`` steps and encodes every input frame; the VAE
    decodes every frame as an image."""
    f = vae_scale_factor(components)
    s, notes = _video_settings(name, components, s, f, guidance, strength,
                               ["text_encoder", "unet", "vae"] + (["controlnet"] if controlnet else []))
    if component_class(components, "unet") in ("UNetMotionModel", "UNet2DConditionModel"):
        _check_motion_unet(components, s.num_frames)
    frames = s.num_frames
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if s.guidance_scale > 1 else ""))
    runs += denoiser_run(components, "unet", s, f, TEXT_LEN, passes, latent_frames=frames,
                         kept_steps=denoising_steps_floored)
    runs += [replace(r, runs=r.runs * frames, why=f"{r.why} × {frames} frames")
             for r in (controlnet_runs(components, s, passes) if controlnet else [])]
    # the frames decode (and encode) as images: one call per frame of each video
    runs += [replace(r, runs=r.runs * frames, why=f"{r.why.replace('image(s)', 'video(s)')} × {frames} frames")
             for r in vae_runs(components, s, s.batch_size, s.height // f, s.width // f)]
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("AnimateDiffPipeline", denoisers=("UNetMotionModel",), component="unet",
                   options=("num_frames", "vae_tiling"))
def animatediff_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``AnimateDiffPipeline.__call__``: see the module docstring."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to AnimateDiffPipeline: its __call__ takes no strength (it "
                          "generates from noise; AnimateDiffVideoToVideoPipeline takes a video)")
    return video_unet_plan("AnimateDiffPipeline", components, s, guidance=DEFAULT_GUIDANCE, strength=None)


@register_pipeline("AnimateDiffVideoToVideoPipeline", options=("num_frames", "vae_tiling"))
def animatediff_v2v_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``AnimateDiffVideoToVideoPipeline.__call__``: see the module docstring."""
    return video_unet_plan("AnimateDiffVideoToVideoPipeline", components, s, guidance=DEFAULT_GUIDANCE, strength=V2V_STRENGTH)


@register_pipeline("AnimateDiffControlNetPipeline", options=("num_frames", "vae_tiling"))
def animatediff_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``AnimateDiffControlNetPipeline.__call__``: see the module docstring."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to AnimateDiffControlNetPipeline: its __call__ takes no "
                          "strength (AnimateDiffVideoToVideoControlNetPipeline takes a video)")
    return video_unet_plan("AnimateDiffControlNetPipeline", components, s, guidance=DEFAULT_GUIDANCE, strength=None, controlnet=True)


@register_pipeline("AnimateDiffVideoToVideoControlNetPipeline", options=("num_frames", "vae_tiling"))
def animatediff_v2v_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                        index: Mapping[str, Any] | None = None) -> Plan:
    """``AnimateDiffVideoToVideoControlNetPipeline.__call__``: see the module docstring."""
    return video_unet_plan("AnimateDiffVideoToVideoControlNetPipeline", components, s, guidance=DEFAULT_GUIDANCE, strength=V2V_STRENGTH, controlnet=True)



@register_pipeline("AnimateDiffSDXLPipeline", options=("num_frames", "vae_tiling"))
def animatediff_sdxl_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``AnimateDiffSDXLPipeline.__call__`` (``pipeline_animatediff_sdxl.py:872``): SDXL's text side on an SDXL
    ``UNetMotionModel``: ``default_sample_size × vae_scale_factor`` (1024²), 16 frames, 50 steps,
    ``guidance_scale`` 5.0 (CFG unless the UNet has ``time_cond_proj_dim``, :850); both CLIP encoders on 77 tokens
    per prompt, the negative prompt encoded only when given or without ``force_zeros_for_empty_prompt`` (:468);
    the text states repeated per frame (:1179), the pooled text and time ids once per video; ``decode_latents``
    (:639) decodes all frames in one call: one image decode per frame; ``num_videos_per_prompt`` forced to 1."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to AnimateDiffSDXLPipeline: its __call__ takes no strength")
    name = "AnimateDiffSDXLPipeline"
    f = vae_scale_factor(components)
    s, notes = _video_settings(name, components, s, f, SDXL_GUIDANCE, None,
                               ["text_encoder", "text_encoder_2", "unet", "vae"])
    if "unet" in components:
        _check_motion_unet(components, s.num_frames)
    cfg = s.guidance_scale > 1 and config_value(components, "unet", "time_cond_proj_dim", None) is None
    passes = cfg_passes(s, cfg)
    encode_negative = cfg and (s.negative_prompt or not (index or {}).get("force_zeros_for_empty_prompt", True))
    runs = text_runs(components, [("text_encoder", TEXT_LEN), ("text_encoder_2", TEXT_LEN)],
                     s.batch_size * (2 if encode_negative else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if encode_negative else ""))
    runs += denoiser_run(components, "unet", s, f, TEXT_LEN, passes, latent_frames=s.num_frames)
    runs += [replace(r, runs=r.runs * s.num_frames,
                     why=f"{r.why.replace('image(s)', 'video(s)')} × {s.num_frames} frames")
             for r in vae_runs(components, s, s.batch_size, s.height // f, s.width // f)]
    if cfg and not encode_negative:
        notes.append("no negative prompt: zero negative embeddings (force_zeros_for_empty_prompt), so the text "
                     "encoders run once per prompt")
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("AnimateDiffSparseControlNetPipeline", options=("num_frames", "vae_tiling", "conditioning_frames"))
def animatediff_sparsectrl_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``AnimateDiffSparseControlNetPipeline.__call__``: see the module docstring."""
    name = "AnimateDiffSparseControlNetPipeline"
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength")
    p = video_unet_plan(name, components, s, guidance=DEFAULT_GUIDANCE, strength=None)
    s = p.settings
    images = 1 if s.conditioning_frames is None else s.conditioning_frames
    if images > s.num_frames:  # prepare_sparse_control_conditioning places them at frame indices
        raise OptionError(f"{name}: {images} conditioning frames for {s.num_frames} frames: each takes a frame index")
    s = s.with_options(conditioning_frames=images)
    f = vae_scale_factor(components)
    runs, notes = list(p.runs), list(p.notes)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    if "controlnet" not in components:
        notes.append("controlnet is absent from this pipeline and was not counted")
        return replace(p, settings=s, notes=tuple(notes))
    cn = components["controlnet"]
    cls = component_class(components, "controlnet") or "?"
    if cn["global_pool_conditions"] and p.passes != 1:
        raise ConfigError(f"{name}: this ControlNet's global_pool_conditions turns on guess mode, which fails in "
                          "diffusers under classifier-free guidance (the ControlNet runs on the conditional half and "
                          "its residuals are added to the UNet's whole batch); estimate it with --guidance-scale 1")
    added = []
    if cn["use_simplified_condition_embedding"]:  # the images VAE-encoded one by one (prepare_image)
        added += [replace(r, why=r.why.replace("input image(s)", "conditioning frame(s)"))
                  for r in vae_runs(components, replace(s, strength=1.0, batch_size=images), images,
                                    s.height // f, s.width // f) if r.call == "encode"]
    else:
        from flopcalc.engine.architectures.controlnet_sparsectrl import cond_embedding_factor
        from flopcalc.engine.config import Config
        from flopcalc.engine.architectures.controlnet_sparsectrl import DEFAULTS as SPARSE_DEFAULTS

        factor = cond_embedding_factor(Config("controlnet", cn, SPARSE_DEFAULTS))
        if factor != f:
            raise ResolutionError(f"controlnet: its conditioning embedding makes the {s.height}×{s.width} images "
                                  f"{factor}× smaller, but the latent is {f}× smaller: the sizes differ and the "
                                  "ControlNet's addition fails in diffusers")
    rows = s.batch_size * p.passes
    shape = RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=TEXT_LEN,
                     latent_frames=s.num_frames)
    added.append(ComponentRun("controlnet", cls, "forward", "controlnet", replace(shape, frames=s.num_frames), s.steps,
                              f"{s.steps} steps × 1 row embedding the conditioning video ({s.num_frames} frames)"))
    if rows > 1:
        added.append(ComponentRun("controlnet", cls, "forward", "controlnet", replace(shape, frames=0),
                                  s.steps * (rows - 1), f"{s.steps} steps × {rows - 1} more row(s) of the batch "
                                  "(the conditioning added by broadcasting)"))
    runs[at:at] = added
    return replace(p, settings=s, runs=tuple(runs), notes=tuple(notes))
