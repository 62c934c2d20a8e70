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
from flopcalc.engine.settings import PAIRS, pipeline_option

pipeline_option("ltx2_conditions", kind=PAIRS, bound=(4096, "frames"), flag="--ltx2-condition",
                metavar="FRAMES@LATENT_INDEX",
                help="LTX2ConditionPipeline: a conditioning image (1@0) or video (FRAMES@LATENT_INDEX) placed at a "
                     "latent frame index; repeatable",
                refusal="it takes no LTX-2 conditions (images or videos placed at a latent index)")

IMAGE_TO_VIDEO = "LTX2ImageToVideoPipeline"
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


@register_pipeline(IMAGE_TO_VIDEO, options=LTX2_OPTIONS)
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


@register_pipeline(CONDITION, options=(*LTX2_OPTIONS, "ltx2_conditions"))
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


@register_pipeline(UPSAMPLE, options=("num_frames",))
def ltx2_latent_upsample_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2LatentUpsamplePipeline.__call__`` (pipeline_ltx2_latent_upsample.py:266) given a video: 512×768 (the size
    of the input video, its defaults), ``num_frames`` the video's length (``--num-frames``; 121, the ``__call__``
    default, when not given), ``8k + 1`` (the pipeline truncates others); one video (``batch_size = 1`` with video
    input):

    * ``prepare_latents`` (:128): ``vae.encode`` of the video (``for vid in video``);
    * ``self.latent_upsampler(latents)`` (:375) on the ``T × H/32 × W/32`` latent;
    * ``vae.decode(latents, timestep)`` (:404) on the upsampled latent (``2H/32 × 2W/32`` for the ×2 spatial
      upsampler): the output video is ``2H × 2W``.

    It runs no denoising and encodes no prompt: steps and guidance change nothing (a note says so); ``strength`` and
    a batch are refused."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {UPSAMPLE}: it encodes a video, upsamples its latent and "
                          "decodes it, with no denoising")
    if s.batch_size != 1 or s.num_images_per_prompt != 1:
        raise OptionError(f"{UPSAMPLE} upsamples one video per call (batch_size = 1 with video input, :338): "
                          "estimate one video")
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
    runs = encode_run(components, s, s.num_frames, "the input video, encoded once")
    out = (frames, lh, lw)
    if "latent_upsampler" in components:
        runs.append(ComponentRun("latent_upsampler", component_class(components, "latent_upsampler") or "?", "forward",
                                 "upsampler", RunShape(latent_height=lh, latent_width=lw, latent_frames=frames), 1,
                                 "1 latent video"))
        out = upsampled_grid(components["latent_upsampler"], frames, lh, lw)
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=out[1], latent_width=out[2], latent_frames=out[0]), 1,
                                 "1 call × 1 video"))
    notes.append(f"the input video ({s.num_frames} frames of {s.height}×{s.width}) is encoded once, its "
                 f"{frames}×{lh}×{lw} latent upsampled to {out[0]}×{out[1]}×{out[2]} and decoded (untiled, one call): "
                 f"the output is {out[1] * spatial}×{out[2] * spatial}")
    return Plan(UPSAMPLE, s, 1, tuple(runs), tuple(notes))
