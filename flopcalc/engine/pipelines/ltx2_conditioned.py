"""LTX-2 conditioned on images and videos, planned on top of :mod:`flopcalc.engine.pipelines.ltx2`:
``LTX2ImageToVideoPipeline`` (diffusers ``pipelines/ltx2/pipeline_ltx2_image2video.py``) and
``LTX2ConditionPipeline`` (``pipeline_ltx2_condition.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import ComponentRun, Plan, Settings, component_class, config_value, register_pipeline
from flopcalc.engine.pipelines.ltx2 import LTX2_OPTIONS, base_plan, compression
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
