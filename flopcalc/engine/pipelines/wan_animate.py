"""Wan-Animate (diffusers ``pipelines/wan/pipeline_wan_animate.py``, ``WanAnimatePipeline``): a character image
animated by a pose video and a face video, generated in overlapping segments
(:mod:`flopcalc.engine.architectures.wan_animate`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.wan import _encode_runs, _vae_factors, _vae_runs
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, pipeline_option

NAME = "WanAnimatePipeline"
#: ``WanAnimatePipeline.__call__`` defaults (pipeline_wan_animate.py:765-795): 720×1280, segments of 77 frames
#: overlapping by ``prev_segment_conditioning_frames`` = 1, 20 steps, ``guidance_scale`` 1.0 (no CFG), 512 tokens.
#: The driving videos have no default length; flopcalc takes one segment's, 77.
HEIGHT, WIDTH, SEGMENT, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH, OVERLAP = 720, 1280, 77, 20, 1.0, 512, 1
SIZE_MULTIPLE = 16

pipeline_option("segment_frames", kind=COUNT, bound=(4096, "frames"),
                help="Wan-Animate: frames per inference segment (segment_frame_length, default 77)",
                refusal="it generates no Wan-Animate segments", examples=("49", "77"))


def segment_count(frames: int, segment: int, overlap: int = OVERLAP) -> int:
    """``num_segments`` (:938-947): the driving video padded up to ``k·(segment − overlap) + overlap`` frames."""
    effective = segment - overlap
    last = (frames - overlap) % effective
    target = frames + (0 if last == 0 else effective - last)
    return target // effective


def _segment(s: Settings, t: int, notes: list[str]) -> int:
    """``segment_frame_length`` rounded to ``t·k + 1`` with a warning (:916-923), kept above the overlap."""
    segment = s.segment_frames or SEGMENT
    if segment % t != 1:
        rounded = max(segment // t * t + 1, 1)
        notes.append(f"segment_frames {segment} is rounded to {rounded} (segment_frame_length − 1 must divide by {t}), "
                     f"as {NAME} does with a warning")
        segment = rounded
    if segment <= OVERLAP:
        raise OptionError(f"{NAME} segments of {segment} frame(s) are no longer than the {OVERLAP} conditioning "
                          "frame(s) they start with: no segment advances (the real call fails)")
    return segment


@register_pipeline(NAME, guidance="separate", denoisers=("WanAnimateTransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling", "segment_frames"))
def wan_animate_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``WanAnimatePipeline.__call__`` (pipeline_wan_animate.py:765-1205): 720×1280, ``num_frames`` the pose video's
    frames (77 here by default: one segment), segments of 77 frames overlapping by one, 20 steps, ``guidance_scale``
    1.0 (one pass; above 1 a second pass on the negative prompt with the face blanked), 512 UMT5 tokens.

    * Once: the prompt (and the negative prompt under CFG), the reference image through the CLIP image encoder
      (``hidden_states[-2]``, :278-289) and, as one frame, through the VAE encoder (:491-539).
    * Each segment: the pose video's segment VAE-encoded once (:656-686), the previous segment's conditioning video
      (zeros, or the background in replace mode; the last generated frame after the first segment) padded to the
      segment and VAE-encoded once per video (:541-654); ``steps`` transformer calls per pass and video on the
      segment's latent plus the reference frame, with the pose latent, the CLIP tokens and the face frames; the
      segment's latent decoded (the reference frame dropped, :1181). ``mode`` "replace" encodes the background
      segment in place of the zeros: the same work.
    """
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the reference image and the driving videos condition "
                          "every segment, and every step runs")
    f, t = _vae_factors(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or SEGMENT,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.symbolic:
        raise FlopcalcError(f"{NAME} generates ⌈(F − 1) / (segment − 1)⌉ segments: a step function of num_frames with "
                            "no closed-form law; use the numeric estimate")
    notes = list(missing_notes(components, ["text_encoder", "image_encoder", "transformer", "vae"]))
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{NAME} height and width")
    segment = _segment(s, t, notes)
    if s.num_frames <= OVERLAP:
        raise OptionError(f"{NAME} needs more driving frames than the {OVERLAP} conditioning frame(s) (the real call "
                          "generates no segment)")
    count = segment_count(s.num_frames, segment)
    passes = cfg_passes(s, s.guidance_scale > 1)
    videos = s.batch_size * s.num_images_per_prompt
    latent_frames = (segment - 1) // t + 1
    notes.append(f"{count} segment(s) of {segment} frames ({latent_frames} latent frames + the reference frame) for "
                 f"{s.num_frames} driving frame(s), overlapping by {OVERLAP}")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    image_tokens = None
    encoder = components.get("image_encoder")
    if encoder is not None:
        from flopcalc.engine.architectures.clip import vision_tokens

        size = encoder["image_size"]
        runs.append(ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                 "image_encoder", RunShape(height=size, width=size), 1, "the reference image, once"))
        image_tokens = vision_tokens(encoder)
    if "vae" in components:
        cls, vae = component_class(components, "vae") or "?", components["vae"]
        encode = [("the reference image (one frame), once", replace(s, batch_size=1, num_frames=1)),
                  (f"{count} segment(s): the pose video", replace(s, batch_size=count, num_frames=segment)),
                  (f"{count} segment(s) × {videos} video(s): the previous segment's conditioning frames",
                   replace(s, batch_size=count * videos, num_frames=segment))]
        for why, shape in encode:
            runs += [replace(r, why=why) for r in _encode_runs(cls, vae, shape, bool(s.vae_tiling))]
    if "transformer" in components:
        if image_tokens is None:
            raise FlopcalcError(f"the Wan-Animate transformer takes CLIP image tokens but {NAME} has no image_encoder "
                                "config to say how many: give the pipeline folder with image_encoder/config.json")
        runs.append(ComponentRun(
            "transformer", component_class(components, "transformer") or "?", "forward", "denoiser",
            RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=s.max_sequence_length,
                     latent_frames=latent_frames + 1, image_tokens=image_tokens, frames=segment),
            count * s.steps * passes * videos,
            f"{count} segment(s) × {s.steps} steps × {passes} pass(es) × {videos} video(s)"))
    decode, vae_notes = _vae_runs(components, s, f, count * videos, latent_frames, bool(s.vae_tiling))
    return Plan(NAME, s, passes, tuple(runs + decode), tuple(notes + vae_notes))
