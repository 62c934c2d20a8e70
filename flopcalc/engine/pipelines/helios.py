"""Helios (diffusers ``pipelines/helios/``): ``HeliosPipeline`` and ``HeliosPyramidPipeline``, long videos generated
chunk by chunk by ``HeliosTransformer3DModel`` (:mod:`flopcalc.engine.architectures.helios`), each chunk conditioned on
three histories of the latents generated so far, with the Wan 2.1 text encoder (UMT5) and VAE."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
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
from flopcalc.engine.pipelines.cosmos2_5 import _world_input
from flopcalc.engine.pipelines.hunyuan_video_framepack import sections
from flopcalc.engine.pipelines.wan import _encode_runs, _vae_factors, _vae_runs
from flopcalc.engine.registry import RunShape

#: ``HeliosPipeline.__call__`` / ``HeliosPyramidPipeline.__call__`` defaults (pipeline_helios.py:447-486,
#: pipeline_helios_pyramid.py:511-557): 384×640, 132 frames, ``guidance_scale`` 5.0, 512 UMT5 tokens, chunks of 9
#: latent frames (``num_latent_frames_per_chunk``), 50 steps (pyramid: 10 per stage, three stages).
HEIGHT, WIDTH, NUM_FRAMES, GUIDANCE, MAX_SEQUENCE_LENGTH, CHUNK, STEPS, STAGE_STEPS, STAGES = \
    384, 640, 132, 5.0, 512, 9, 50, 10, 3
#: ``check_inputs``: height and width divisible by 16.
SIZE_MULTIPLE = 16
BASE, PYRAMID = "HeliosPipeline", "HeliosPyramidPipeline"
OPTIONS = ("max_sequence_length", "num_frames", "vae_tiling", "latent_window_size", "world_input")


def _settings(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str, steps: int
              ) -> tuple[Settings, int, int, int, int, int, str, list[str]]:
    """The defaults and checks both pipelines share; returns the settings, the VAE factors, the chunk's latent frames,
    the chunk count, the guidance passes, the world input and the notes."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: it generates every chunk from noise")
    if s.symbolic:
        raise FlopcalcError(f"{name} generates ⌈F / window⌉ chunks: a step function of num_frames with no closed-form "
                            "law; use the numeric estimate")
    if s.num_images_per_prompt != 1:
        raise OptionError(f"{name} draws one latent per prompt but repeats the prompt embeddings per video, so "
                          "num_videos_per_prompt > 1 fails in the real call")
    world = _world_input(s)
    if world == "image" and s.batch_size > 1:
        raise OptionError(f"{name} encodes its one image once: with {s.batch_size} prompts its latent (one row) does "
                          "not concatenate with the batch's histories in the real call; use batch size 1")
    if world == "video":
        raise OptionError(f"{name}: a video input is encoded in chunks set by its own length, which flopcalc does not "
                          "take; use --world-input text or image")
    if "transformer" in components:
        from flopcalc.engine.architectures.helios import check_patches

        check_patches(components["transformer"])
    f, t = _vae_factors(components)
    chunk = s.latent_window_size or CHUNK
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or NUM_FRAMES,
                steps=s.steps or steps, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{name} height and width")
    count = sections(max(s.num_frames, 1), chunk, t)
    passes = cfg_passes(s, s.guidance_scale > 1)
    if s.negative_prompt and passes == 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    window = (chunk - 1) * t + 1
    notes.append(f"{count} chunk(s) of {chunk} latent frames ({window} frames) for {s.num_frames} frames, each "
                 "conditioned on the history sizes 16, 2, 1 and the first-frame prefix (keep_first_frame)")
    return s, f, t, chunk, count, passes, world, notes


def _encode(components: Mapping[str, Mapping[str, Any]], s: Settings, chunk: int, t: int) -> list[ComponentRun]:
    """``prepare_image_latents`` (pipeline_helios.py:355-378): the image encoded alone, and repeated into a fake video of
    ``(chunk − 1)·t + 1`` frames encoded once (its last latent frame joins the history)."""
    if "vae" not in components:
        return []
    cls, vae, tiled = component_class(components, "vae") or "?", components["vae"], bool(s.vae_tiling)
    window = (chunk - 1) * t + 1
    runs = []
    for frames, why in ((1, "the image, once"), (window, f"the image repeated to {window} frames, once")):
        runs += [replace(r, why=why) for r in _encode_runs(cls, vae, replace(s, batch_size=1, num_frames=frames), tiled)]
    return runs


def _transformer_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, f: int, chunk: int, calls: int,
                      latent: tuple[Any, Any], what: str) -> list[ComponentRun]:
    """The transformer's ``calls`` batched calls on the chunk (``latent`` grid) packed after the full-resolution
    histories: each call's first row embeds the histories' zero timestep, the later rows do not
    (``RunShape.split`` ``LATER_ROWS``)."""
    if "transformer" not in components:
        return []
    from flopcalc.engine.architectures.helios import LATER_ROWS

    cls = component_class(components, "transformer") or "?"
    full = (s.height // f, s.width // f)
    shape = RunShape(latent_height=latent[0], latent_width=latent[1], latent_frames=chunk,
                     text_len=s.max_sequence_length, height=None if latent == full else full[0],
                     width=None if latent == full else full[1])
    first = f"{what}: the first row of each call" if s.batch_size > 1 else f"{what} × 1 video"
    runs = [ComponentRun("transformer", cls, "forward", "denoiser", shape, calls, first)]
    if s.batch_size > 1:
        runs.append(ComponentRun("transformer", cls, "forward", "denoiser", replace(shape, split=LATER_ROWS),
                                 calls * (s.batch_size - 1),
                                 f"{what}: {s.batch_size - 1} more row(s) per call (the histories' zero timestep is "
                                 "embedded once per call)"))
    return runs


def _plan(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str, pyramid: bool) -> Plan:
    s, f, t, chunk, count, passes, world, notes = _settings(components, s, name, STAGE_STEPS if pyramid else STEPS)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    if world == "image":
        runs += _encode(components, s, chunk, t)
        notes.append("the image is VAE-encoded once, and once more repeated to a chunk's frames (its last latent frame "
                     "starts the history)")
    h, w = s.height // f, s.width // f
    if not pyramid:
        runs += _transformer_runs(components, s, f, chunk, count * s.steps * passes, (h, w),
                                  f"{count} chunk(s) × {s.steps} steps × {passes} pass(es)")
    else:
        scale = 2 ** (STAGES - 1)
        if h % (2 * scale) or w % (2 * scale):
            raise ResolutionError(f"{name}: a {h}×{w} latent halved {STAGES - 1} times must stay whole and patchable "
                                  f"(the stages' latents are (h // {scale}) · 2^i, 1×2×2 patches): use a height and "
                                  f"width divisible by {2 * scale * f}")
        for stage in range(STAGES):
            k = 2 ** (STAGES - 1 - stage)
            runs += _transformer_runs(components, s, f, chunk, count * s.steps * passes, (h // k, w // k),
                                      f"{count} chunk(s) × stage {stage} ({h // k}×{w // k} latent) × {s.steps} steps "
                                      f"× {passes} pass(es)")
        notes.append(f"pyramid: {STAGES} stages of {s.steps} steps each (pyramid_num_inference_steps_list "
                     f"[{s.steps}] × {STAGES}), the chunk denoised at 1/{scale}, 1/{scale // 2} and the full latent "
                     "resolution, the histories at the full one")
    decode, vae_notes = _vae_runs(components, s, f, count * s.batch_size, chunk, bool(s.vae_tiling))
    if decode:
        notes.append(f"VAE: each chunk's {chunk} latent frames decoded once per video ({count} decode(s) per video)")
    return Plan(name, s, passes, tuple(runs + decode), tuple(notes + vae_notes))


@register_pipeline(BASE, guidance="separate", denoisers=("HeliosTransformer3DModel",), options=OPTIONS)
def helios_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                    index: Mapping[str, Any] | None = None) -> Plan:
    """``HeliosPipeline.__call__`` (pipeline_helios.py:447-951): 384×640, 132 frames, 50 steps, ``guidance_scale`` 5.0
    (cond and uncond as two forwards), 512 UMT5 tokens, chunks of 9 latent frames (33 frames:
    ``max(1, ⌈132 / 33⌉) = 4`` chunks).

    * Once: the prompt (and the negative prompt under CFG); with an image (``world_input`` image), the image
      VAE-encoded alone and repeated to a chunk's 33 frames (``prepare_image_latents``).
    * Each chunk: ``steps`` transformer calls per pass on the chunk's noise latent packed after the histories of the
      latents generated so far (zeros at first: 16, 2 and 1 + 1 latent frames; :780-877), then ``vae.decode`` of the
      chunk's 9 latent frames per video (:921-926).
    * The histories' zero timestep is embedded once per batched call (:793), counted with its first row.

    ``num_videos_per_prompt`` > 1 fails in the real call (the latents are drawn per prompt, the prompt embeddings per
    video) and is refused, as is an image with more than one prompt (its one-row latent joins every history); a
    video input (V2V) is encoded in chunks set by its own length and is not planned."""
    return _plan(components, s, BASE, pyramid=False)


@register_pipeline(PYRAMID, guidance="separate", options=OPTIONS)
def helios_pyramid_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``HeliosPyramidPipeline.__call__`` (pipeline_helios_pyramid.py:511-1131): the ``HeliosPipeline`` chunks and
    histories, each chunk denoised in three pyramid stages (``pyramid_num_inference_steps_list`` [10, 10, 10]; the
    ``steps`` setting is each stage's count): the noise latent bilinearly halved twice, stage ``i`` at
    ``(h // 4)·2^i × (w // 4)·2^i`` (nearest-upsampled between stages, :397-492), the histories always at the full
    latent. CFG-Zero* (``is_cfg_zero_star``) and its zero-init steps still run both forwards; the distilled DMD schedule
    (``is_distilled``) takes the same step counts unless ``is_amplify_first_chunk`` (off by default) doubles the first
    chunk's."""
    return _plan(components, s, PYRAMID, pyramid=True)
