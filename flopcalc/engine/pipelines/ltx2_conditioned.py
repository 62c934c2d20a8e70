"""LTX-2 conditioned on images and videos, planned on top of :mod:`flopcalc.engine.pipelines.ltx2`:
``LTX2ImageToVideoPipeline`` (diffusers ``pipelines/ltx2/pipeline_ltx2_image2video.py``) and
``LTX2ConditionPipeline`` (``pipeline_ltx2_condition.py``); and ``LTX2LatentUpsamplePipeline``
(``pipeline_ltx2_latent_upsample.py``), which encodes a video, upsamples its latent and decodes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.architectures.ltx2 import upsampled_grid
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun, Plan, Settings, check_divisible, component_class, config_value, missing_notes, register_pipeline,
)
from flopcalc.engine.pipelines.ltx2 import LTX2_OPTIONS, base_plan, check_frames, compression
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, NAMES, PAIRS, pipeline_option

pipeline_option("ltx2_conditions", kind=PAIRS, bound=(4096, "frames"), flag="--ltx2-condition",
                metavar="FRAMES@LATENT_INDEX",
                help="LTX2ConditionPipeline: a conditioning image (1@0) or video (FRAMES@LATENT_INDEX) placed at a "
                     "latent frame index; repeatable",
                refusal="it takes no LTX-2 conditions (images or videos placed at a latent index)")

IMAGE_TO_VIDEO = "LTX2ImageToVideoPipeline"
#: ``vae.enable_tiling()`` tiles the encode of these pipelines' input images / videos too (``_encode``,
#: autoencoder_kl_ltx2.py:1232-1233, a side above 512 px); flopcalc plans LTX-2's tiled decode (``LTX2Pipeline``)
#: but not that tiled encode.
NO_TILED_ENCODE = {"vae_tiling": "flopcalc plans LTX-2's tiled decode (LTX2Pipeline) but not the tiled encode of its "
                                 "input images or videos that vae.enable_tiling() also turns on; leave it off"}
CONDITION = "LTX2ConditionPipeline"


def packed_tokens(components: Mapping[str, Mapping[str, Any]], latent_frames: int, latent_height: int,
                  latent_width: int) -> int:
    """``_pack_latents``: ``(T/p_t)(h/p)(w/p)`` tokens (the plan has checked the sizes divide)."""
    p = config_value(components, "transformer", "patch_size", 1) or 1
    p_t = config_value(components, "transformer", "patch_size_t", 1) or 1
    return latent_frames // p_t * (latent_height // p) * (latent_width // p)


def encode_run(components: Mapping[str, Mapping[str, Any]], s: Settings, frames: int, why: str) -> list[ComponentRun]:
    """One ``vae.encode`` of a ``frames``-frame video (an image: one frame) at the output size, untiled."""
    if "vae" not in components:
        return []
    return [ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                         RunShape(height=s.height, width=s.width, frames=frames), 1, why)]


def _with_conditioning(plan: Plan, components: Mapping[str, Mapping[str, Any]], encodes: list[ComponentRun],
                       timestep_tokens: int, extra: int, name: str, note: str) -> Plan:
    """``plan`` with the encodes before the transformer and, on every transformer call, one video timestep per
    token (and ``extra`` appended keyframe tokens)."""
    runs = [replace(r, shape=replace(r.shape, timestep_tokens=timestep_tokens, reference_tokens=extra or None))
            if r.component == "transformer" else r for r in plan.runs]
    at = next((i for i, r in enumerate(runs) if r.component == "transformer"), len(runs))
    runs[at:at] = encodes
    return Plan(name, plan.settings, plan.passes, tuple(runs), plan.notes + (note,))


@register_pipeline(IMAGE_TO_VIDEO, options=LTX2_OPTIONS, refuses=NO_TILED_ENCODE)
def ltx2_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2ImageToVideoPipeline.__call__`` (pipeline_ltx2_image2video.py:985): ``LTX2Pipeline``'s defaults and
    passes, and the image:

    * ``prepare_latents`` (:780): the preprocessed image, a one-frame video at the output size, is VAE-encoded
      once (``for img in image``: the one image passed), its latent replacing the first latent frame;
    * every transformer call gets one video timestep per token (``timestep.unsqueeze(-1) · (1 −
      conditioning_mask)``, :1487): ``time_embed`` runs on all N packed tokens; the audio stream keeps one.

    It takes no ``strength``."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {IMAGE_TO_VIDEO}: the image replaces the first latent frame "
                          "and the whole schedule runs")
    plan, _ = base_plan(components, s, pipeline=IMAGE_TO_VIDEO)
    s = plan.settings
    spatial, temporal = compression(components)
    tokens = packed_tokens(components, (s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial)
    encodes = encode_run(components, s, 1, "the conditioning image (one frame), encoded once")
    return _with_conditioning(plan, components, encodes, tokens, 0, IMAGE_TO_VIDEO,
                              "the image is VAE-encoded once as a one-frame video; its latent replaces the first "
                              "latent frame; one video timestep per latent token (time_embed runs on every token)")


def condition_items(s: Settings, latent_frames: int, temporal: int) -> list[tuple[int, int]]:
    """Each condition kept, as ``(frames encoded, latent index)`` (``preprocess_conditions``,
    pipeline_ltx2_condition.py:846-962): an index past the last latent frame is skipped; a condition is trimmed to
    ``min(frames, num_frames − start) `` floored to ``8k + 1`` frames, ``start = max((index − 1)·8 + 1, 0)``."""
    items = []
    for frames, index in s.ltx2_conditions or ():
        if index >= latent_frames:
            continue
        start = max((index - 1) * temporal + 1, 0)
        kept = (min(frames, s.num_frames - start) - 1) // temporal * temporal + 1
        items.append((kept, index))
    return items


@register_pipeline(CONDITION, options=(*LTX2_OPTIONS, "ltx2_conditions"), refuses=NO_TILED_ENCODE)
def ltx2_condition_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2ConditionPipeline.__call__`` (pipeline_ltx2_condition.py:1350): ``LTX2Pipeline``'s defaults and passes;
    every transformer call gets one video timestep per token (``timestep.unsqueeze(-1) · (1 − conditioning_mask)``,
    :1839), conditions or not. ``ltx2_conditions`` (``--ltx2-condition FRAMES@LATENT_INDEX``; an image is
    ``1@INDEX``): each kept condition is VAE-encoded once (:1147, batch 1); at latent index 0 its latent overwrites
    the first tokens, elsewhere its packed latent (``(F − 1)/8 + 1`` latent frames) is appended to the sequence
    (:1218-1223) and every token-wise layer runs on it; the appended tokens are dropped before the decode. It takes
    no ``strength`` (a condition's strength only scales its noise)."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {CONDITION}: a condition's strength scales its noise (no "
                          "effect on the count)")
    plan, _ = base_plan(components, s, pipeline=CONDITION)
    s = plan.settings
    spatial, temporal = compression(components)
    latent = ((s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial)
    items = condition_items(s, latent[0], temporal)
    extra = sum(packed_tokens(components, (f - 1) // temporal + 1, latent[1], latent[2]) for f, i in items if i)
    encodes = [run for n, (frames, at) in enumerate(items)
               for run in encode_run(components, s, frames, f"condition #{n + 1} ({frames} frame(s) at latent "
                                                            f"index {at}), encoded once")]
    if len(encodes) > 1:  # one run of each distinct shape: merge equal ones
        merged: dict[RunShape, ComponentRun] = {}
        for r in encodes:
            merged[r.shape] = replace(r, runs=merged[r.shape].runs + 1, why=merged[r.shape].why + "; " + r.why) \
                if r.shape in merged else r
        encodes = list(merged.values())
    skipped = len(s.ltx2_conditions or ()) - len(items)
    words = ", ".join(f"{f} frame(s) at latent index {i}" for f, i in items) or "none"
    note = (f"conditions: {words}" + (f" ({skipped} past the last latent frame: skipped)" if skipped else "")
            + f"; {extra} keyframe token(s) appended; one video timestep per token")
    return _with_conditioning(plan, components, encodes, packed_tokens(components, *latent) + extra, extra, CONDITION,
                              note)


UPSAMPLE = "LTX2LatentUpsamplePipeline"


@register_pipeline(UPSAMPLE, options=("num_frames",), refuses=NO_TILED_ENCODE)
def ltx2_latent_upsample_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2LatentUpsamplePipeline.__call__`` (pipeline_ltx2_latent_upsample.py:266) given a video: 512×768 (the size
    of the input video, its defaults), ``num_frames`` the video's length (``--num-frames``; 121, the ``__call__``
    default, when not given), ``8k + 1`` (the pipeline truncates others); one video (``batch_size = 1`` with video
    input: a batch of B videos is B calls):

    * ``prepare_latents`` (:128): ``vae.encode`` of the video (``for vid in video``);
    * ``self.latent_upsampler(latents)`` (:375) on the ``T × H/32 × W/32`` latent;
    * ``vae.decode(latents, timestep)`` (:404) on the upsampled latent (``2H/32 × 2W/32`` for the ×2 spatial
      upsampler): the output video is ``2H × 2W``.

    It runs no denoising and encodes no prompt: steps and guidance change nothing (a note says so); ``strength`` is
    refused."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {UPSAMPLE}: it encodes a video, upsamples its latent and "
                          "decodes it, with no denoising")
    ignored = [flag for given, flag in ((s.steps, "steps"), (s.guidance_scale, "guidance_scale"),
                                        (s.negative_prompt or None, "negative prompt")) if given is not None]
    spatial, temporal = compression(components)
    s = replace(s, height=s.height or 512, width=s.width or 768, num_frames=s.num_frames or 121)
    check_divisible(s.height, s.width, spatial, "LTX-2 height and width (check_inputs: the VAE's spatial compression)")
    check_frames(s.num_frames, temporal)
    frames, lh, lw = (s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial
    notes = list(missing_notes(components, ["latent_upsampler", "vae"]))
    if ignored:
        notes.append(f"{', '.join(ignored)} ignored: {UPSAMPLE} runs no denoising and encodes no prompt")
    videos = s.batch_size * s.num_images_per_prompt
    runs = [replace(r, runs=videos, why=f"each input video, encoded once × {videos} video(s)")
            for r in encode_run(components, s, s.num_frames, "")]
    out = (frames, lh, lw)
    if "latent_upsampler" in components:
        runs.append(ComponentRun("latent_upsampler", component_class(components, "latent_upsampler") or "?", "forward",
                                 "upsampler", RunShape(latent_height=lh, latent_width=lw, latent_frames=frames), videos,
                                 f"{videos} latent video(s)"))
        out = upsampled_grid(components["latent_upsampler"], frames, lh, lw)
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=out[1], latent_width=out[2], latent_frames=out[0]), videos,
                                 f"1 call × {videos} video(s)"))
    if videos > 1:
        notes.append(f"{videos} videos: {UPSAMPLE} takes one video per call (batch_size = 1 with video input, :338), "
                     f"so this is {videos} calls")
    notes.append(f"the input video ({s.num_frames} frames of {s.height}×{s.width}) is encoded once, its "
                 f"{frames}×{lh}×{lw} latent upsampled to {out[0]}×{out[1]}×{out[2]} and decoded (untiled, one call): "
                 f"the output is {out[1] * spatial}×{out[2] * spatial}")
    return Plan(UPSAMPLE, s, 1, tuple(runs), tuple(notes))


IN_CONTEXT = "LTX2InContextPipeline"
HDR = "LTX2HDRPipeline"

pipeline_option("ltx2_references", kind=NAMES, metavar="FRAMES",
                help="LTX-2 IC-LoRA / HDR pipelines: the frame count of each reference video (encoded at the size / "
                     "reference_downscale_factor and appended to the tokens); repeatable as a list",
                refusal="it takes no IC-LoRA reference videos", examples=("9", "121"))
pipeline_option("reference_downscale_factor", kind=COUNT, bound=(64, "times"),
                help="LTX-2 IC-LoRA / HDR pipelines: the reference videos' downscale (default 1)",
                refusal="it takes no IC-LoRA reference videos")


def reference_items(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str) -> tuple[list[int], int]:
    """The reference videos' encoded frame counts (each trimmed to ``num_frames``, ``ref_pixels[:, :, :num_frames]``)
    and the factor: each is encoded at ``(H/f) × (W/f)``, which the VAE needs divisible by its compression."""
    spatial, temporal = compression(components)
    factor = s.reference_downscale_factor or 1
    frames = []
    for text in s.ltx2_references or ():
        if not text.isdigit() or int(text) < 1:
            raise OptionError(f"--ltx2-references takes frame counts (1, 9, 17, ...), got {text!r}")
        kept = min(int(text), s.num_frames)
        if (kept - 1) % temporal:
            raise OptionError(f"{name}: a reference video of {kept} frame(s) (after trimming to num_frames) cannot be "
                              f"VAE-encoded: its length must be {temporal}k + 1")
        frames.append(kept)
    if frames:
        check_divisible(s.height // factor, s.width // factor, spatial,
                        f"{name}: the reference size (height and width / reference_downscale_factor {factor}; the "
                        "VAE's spatial compression)")
        if s.height % factor or s.width % factor:
            raise OptionError(f"{name}: height and width must divide by reference_downscale_factor {factor}")
    return frames, factor


def _references(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str
                ) -> tuple[list[ComponentRun], int, str]:
    """Each reference video's encode and the tokens the references append."""
    spatial, temporal = compression(components)
    frames, factor = reference_items(components, s, name)
    h, w = s.height // factor, s.width // factor
    runs, tokens = [], 0
    for n, f in enumerate(frames):
        tokens += packed_tokens(components, (f - 1) // temporal + 1, h // spatial, w // spatial)
        if "vae" in components:
            runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                     RunShape(height=h, width=w, frames=f), 1,
                                     f"reference #{n + 1} ({f} frame(s) at {h}×{w}), encoded once"))
    words = ", ".join(f"{f} frame(s)" for f in frames)
    return runs, tokens, (f"reference videos: {words} at {h}×{w} (downscale {factor}); {tokens} token(s) appended"
                          if frames else "no reference videos (the __call__ default)")


def _merged(runs: list[ComponentRun]) -> list[ComponentRun]:
    """Runs of one call with equal shapes merged (consecutive runs of one component call form one report row)."""
    merged: dict[RunShape, ComponentRun] = {}
    for r in runs:
        merged[r.shape] = replace(r, runs=merged[r.shape].runs + 1, why=merged[r.shape].why + "; " + r.why) \
            if r.shape in merged else r
    return list(merged.values())


@register_pipeline(IN_CONTEXT, options=(*LTX2_OPTIONS, "ltx2_conditions", "ltx2_references",
                                        "reference_downscale_factor"), refuses=NO_TILED_ENCODE)
def ltx2_in_context_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2InContextPipeline.__call__`` (pipeline_ltx2_ic_lora.py:1780, IC-LoRA): ``LTX2Pipeline``'s defaults and
    passes (121 frames), the conditions of ``LTX2ConditionPipeline`` (``--ltx2-condition``) and reference videos
    (``--ltx2-references``, downscaled by ``--reference-downscale-factor``): each trimmed to ``num_frames``,
    VAE-encoded once (:1433) and appended to the token sequence after the keyframes (:1313). Every transformer call
    gets one video timestep per token (:2244-2247, conditions or not). The video self-attention mask a reference's
    strength builds is an additive bias: no MAC changes. It takes no ``strength``."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {IN_CONTEXT}: a condition's or reference's strength scales "
                          "its noise (no effect on the count)")
    plan, _ = base_plan(components, s, pipeline=IN_CONTEXT)
    s = plan.settings
    spatial, temporal = compression(components)
    latent = ((s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial)
    items = condition_items(s, latent[0], temporal)
    keyframes = sum(packed_tokens(components, (f - 1) // temporal + 1, latent[1], latent[2]) for f, i in items if i)
    encodes = [run for n, (frames, at) in enumerate(items)
               for run in encode_run(components, s, frames, f"condition #{n + 1} ({frames} frame(s) at latent "
                                                            f"index {at}), encoded once")]
    references, ref_tokens, ref_note = _references(components, s, IN_CONTEXT)
    extra = keyframes + ref_tokens
    note = (f"conditions: {', '.join(f'{f} frame(s) at latent index {i}' for f, i in items) or 'none'}; {ref_note}; "
            f"{extra} token(s) appended in all; one video timestep per token")
    return _with_conditioning(plan, components, _merged(encodes + references),
                              packed_tokens(components, *latent) + extra, extra, IN_CONTEXT, note)


@register_pipeline(HDR, options=("max_sequence_length", "num_frames", "stg_scale", "modality_scale", "stg_blocks",
                                 "frame_rate", "ltx2_references", "reference_downscale_factor"),
                   refuses=NO_TILED_ENCODE)
def ltx2_hdr_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                      index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2HDRPipeline.__call__`` (pipeline_ltx2_hdr_lora.py:1046, the HDR IC-LoRA): 512×768, 121 frames, 8 steps,
    ``guidance_scale`` 1 / ``stg_scale`` 0 / ``modality_scale`` 1 (one call per step; one scale per guidance for both
    streams), ``use_cross_timestep`` False: the video cross-modal modulation reads the video timesteps, one per token
    (:1368-1371); reference videos (``--ltx2-references``, downscale ``--reference-downscale-factor``) encoded and
    appended as IC-LoRA's. A video-only pipeline: the audio stream runs in the transformer, but no audio VAE or
    vocoder decode (``audio`` is None, :1611). It takes no ``strength``."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {HDR}: a reference's strength scales its noise")
    plan, g = base_plan(components, s, pipeline=HDR, steps=8, audio_out=False, audio_scales=False,
                        guidance_defaults={"guidance_scale": 1.0, "stg_scale": 0.0, "modality_scale": 1.0,
                                           "audio_guidance_scale": None, "audio_stg_scale": None,
                                           "audio_modality_scale": None, "stg_blocks": ()})
    s = plan.settings
    spatial, temporal = compression(components)
    latent = ((s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial)
    references, ref_tokens, ref_note = _references(components, s, HDR)
    plan = _with_conditioning(plan, components, _merged(references), packed_tokens(components, *latent) + ref_tokens,
                              ref_tokens, HDR, f"{ref_note}; one video timestep per token; use_cross_timestep False")
    runs = tuple(replace(r, shape=replace(r.shape, perturbed=replace(r.shape.perturbed, cross_timestep=False)))
                 if r.component == "transformer" else r for r in plan.runs)
    return replace(plan, runs=runs)
