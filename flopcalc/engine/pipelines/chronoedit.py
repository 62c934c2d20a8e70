"""ChronoEdit (diffusers ``pipelines/chronoedit/pipeline_chronoedit.py``, ``ChronoEditPipeline``): image editing as
a short Wan 2.1 image-to-video generation (the input image first, the edit last), with an optional temporal
reasoning stage that denoises a longer video for the first steps and then keeps only its first and last latent
frames (:mod:`flopcalc.engine.architectures.chronoedit`)."""

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
from flopcalc.engine.pipelines.wan import _encode_runs, _vae_factors, _vae_runs, round_num_frames
from flopcalc.engine.pipelines.wan_i2v import _image_encoder_runs
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import INDEX, pipeline_option

NAME = "ChronoEditPipeline"
#: ``ChronoEditPipeline.__call__`` defaults (pipeline_chronoedit.py:472-496): 480×832, 50 steps, ``guidance_scale``
#: 5.0 (two forwards), 512 UMT5 tokens; 5 frames (2 latent frames) unless ``enable_temporal_reasoning``, then
#: ``num_frames`` (81 by default).
HEIGHT, WIDTH, EDIT_FRAMES, REASONING_FRAMES, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 480, 832, 5, 81, 50, 5.0, 512
#: ``check_inputs`` (:347): height and width divisible by 16.
SIZE_MULTIPLE = 16
#: The latent frames kept after the reasoning steps (``latents[:, :, [0, -1]]``, :669-671).
KEPT_FRAMES = 2

pipeline_option("temporal_reasoning_steps", kind=INDEX, bound=(100_000, "steps"),
                help="ChronoEdit: enable temporal reasoning (enable_temporal_reasoning=True) with this many steps on "
                     "the whole video (num_temporal_reasoning_steps; then the first and last latent frames only)",
                refusal="it has no ChronoEdit temporal reasoning stage", examples=("10", "25"))


@register_pipeline(NAME, guidance="separate", denoisers=("ChronoEditTransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling", "temporal_reasoning_steps"))
def chronoedit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``ChronoEditPipeline.__call__`` (pipeline_chronoedit.py:472-759): 480×832, 50 steps, ``guidance_scale`` 5.0
    (cond and uncond as two forwards), 512 UMT5 tokens, one input image.

    * ``num_frames`` is forced to 5 without temporal reasoning (:593), so the latent has 2 frames: the image and the
      edit; ``temporal_reasoning_steps`` k (``enable_temporal_reasoning=True, num_temporal_reasoning_steps=k``) takes
      ``num_frames`` (81 by default, rounded to ``4j + 1`` with a warning, :595-600).
    * Once: the prompt (and the negative prompt under CFG); the image through the CLIP image encoder
      (``hidden_states[-2]``, repeated over the prompts, :635-637); the image followed by ``num_frames − 1`` zero
      frames VAE-encoded once (``prepare_latents``, :408-430), its latent and 4 mask channels concatenated to the
      noise latent (the transformer's 36 ``in_channels``).
    * Each step: the transformer once per guidance pass and video, on ``(num_frames − 1) // 4 + 1`` latent frames
      for the first k steps, then (from step k on, :669-678) on the first and last latent frames only.
    * Decode (:736-742): with temporal reasoning and more than 2 latent frames left (k ≥ steps), the first and last
      frames, then every frame but the last (two decodes per video); else one decode of the latent.

    Temporal reasoning that prunes (k < steps) with ``FlowMatchEulerDiscreteScheduler``, the scheduler class the
    pipeline annotates, fails in diffusers 0.42.1 (:673 reads ``scheduler.model_outputs``): refused when
    ``model_index.json`` names it; ``num_videos_per_prompt > 1`` fails too (the CLIP tokens are repeated per prompt
    only, :637) and is refused.
    """
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: the image conditions every step and the whole "
                          "schedule runs")
    reasoning = s.temporal_reasoning_steps
    if reasoning is None and s.num_frames not in (None, EDIT_FRAMES) and not s.symbolic:  # a law re-plans the 5
        raise OptionError(f"{NAME} generates {EDIT_FRAMES} frames (the image and the edit) and ignores num_frames "
                          "unless temporal reasoning is on: give --temporal-reasoning-steps with --num-frames")
    if s.symbolic and reasoning is not None:
        raise FlopcalcError(f"{NAME}'s temporal reasoning runs min(k, S) steps on the whole video and the rest on two "
                            "latent frames: piecewise in S, no closed-form law; use the numeric estimate")
    if s.num_images_per_prompt != 1:
        raise OptionError(f"{NAME} runs one video per prompt: it repeats the CLIP image tokens per prompt only "
                          "(image_embeds.repeat(batch_size, ...)), so num_videos_per_prompt > 1 fails in the real call")
    f, t = _vae_factors(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH,
                num_frames=EDIT_FRAMES if reasoning is None else (s.num_frames or REASONING_FRAMES),
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    notes = list(missing_notes(components, ["text_encoder", "image_encoder", "transformer", "vae"]))
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{NAME} height and width")
    frames = round_num_frames(s.num_frames, t)
    if frames != s.num_frames:
        notes.append(f"num_frames {s.num_frames} is rounded to {frames} (num_frames − 1 must divide by {t}), as "
                     f"{NAME} does with a warning")
        s = replace(s, num_frames=frames)
    latent_frames = (s.num_frames - 1) // t + 1
    full = s.steps if reasoning is None else min(reasoning, s.steps)
    if reasoning is not None and reasoning < s.steps and _scheduler(index) == "FlowMatchEulerDiscreteScheduler":
        raise FlopcalcError(f"{NAME}'s temporal reasoning prunes scheduler.model_outputs at step {reasoning}, which "
                            "FlowMatchEulerDiscreteScheduler (the class the pipeline annotates) does not have: the "
                            "real call fails; use a multistep scheduler (UniPCMultistepScheduler, as the Wan repos) or "
                            "temporal_reasoning_steps >= steps")
    passes = cfg_passes(s, s.guidance_scale > 1)
    if s.negative_prompt and passes == 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    videos = s.batch_size
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    image_runs, image_tokens = _image_encoder_runs(components, s)
    runs += image_runs
    if "vae" in components:
        runs += [replace(r, why=f"1 conditioning video: the image + {s.num_frames - 1} zero frame(s)")
                 for r in _encode_runs(component_class(components, "vae") or "?", components["vae"],
                                       replace(s, batch_size=1), bool(s.vae_tiling))]
        notes.append(f"the image is VAE-encoded once with {s.num_frames - 1} zero frames after it, and its latent "
                     "repeated over the batch")
    if "transformer" in components:
        if components["transformer"]["image_dim"] is None:
            raise FlopcalcError(f"{NAME} passes CLIP image tokens to the transformer, which has no image_dim to embed "
                                "them (the real call fails): give a ChronoEdit transformer config with image_dim")
        # the reasoning stage runs while i < k; from step k on the latent keeps frames [0, -1] (2 frames, even from 1)
        split = [(full, latent_frames), (s.steps - full, KEPT_FRAMES)]
        if reasoning is not None:
            notes.append(f"temporal reasoning: {full} step(s) on {latent_frames} latent frames ({s.num_frames} "
                         f"frames), then {s.steps - full} on the first and last latent frames")
        for steps, frames_ in split:
            if steps == 0:
                continue
            runs.append(ComponentRun(
                "transformer", component_class(components, "transformer") or "?", "forward", "denoiser",
                RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=s.max_sequence_length,
                         latent_frames=frames_, image_tokens=image_tokens),
                steps * passes * videos, f"{steps} steps × {passes} pass(es) × {videos} video(s) on {frames_} latent "
                                         "frame(s)"))
    final = latent_frames if full == s.steps else KEPT_FRAMES
    if reasoning is not None and final > KEPT_FRAMES:
        # the edit (frames [0, -1]) and the reasoning video without its last frame, each decoded whole
        decode, vae_notes = _vae_runs(components, s, f, videos, KEPT_FRAMES, bool(s.vae_tiling))
        more, more_notes = _vae_runs(components, s, f, videos, final - 1, bool(s.vae_tiling))
        decode, vae_notes = decode + more, vae_notes + more_notes
    else:
        decode, vae_notes = _vae_runs(components, s, f, videos, final, bool(s.vae_tiling))
    return Plan(NAME, s, passes, tuple(runs + decode), tuple(notes + vae_notes))


def _scheduler(index: Mapping[str, Any] | None) -> str | None:
    entry = (index or {}).get("scheduler")
    return entry[1] if isinstance(entry, list) and len(entry) == 2 else None
