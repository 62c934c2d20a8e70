"""LTX-Video beyond text-to-video, planned on top of :func:`flopcalc.engine.pipelines.ltx.ltx_pipeline`:
``LTXImageToVideoPipeline`` (diffusers ``pipelines/ltx/pipeline_ltx_image2video.py``), ``LTXConditionPipeline``
at its ``__call__`` defaults (``pipeline_ltx_condition.py``) and ``LTXLatentUpsamplePipeline``
(``pipeline_ltx_latent_upsample.py``, with ``LTXLatentUpsamplerModel``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.architectures import autoencoder_kl_ltx as ltx_vae
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun, Plan, Settings, check_divisible, component_class, config_value, missing_notes, register_pipeline,
    tile_runs,
)
from flopcalc.engine.pipelines.ltx import (
    DEFAULT_FRAMES, DEFAULT_HEIGHT, DEFAULT_WIDTH, check_frames, compression, ltx_pipeline, vae_runs,
)
from flopcalc.engine.settings import PAIRS, pipeline_option
from flopcalc.engine.registry import RunShape

pipeline_option("conditions", kind=PAIRS, bound=(4096, "frames"), flag="--condition", metavar="FRAMES@INDEX",
                help="LTXConditionPipeline: a conditioning image (1@0) or video (FRAMES@INDEX) placed at a frame "
                     "index; repeatable",
                refusal="it takes no conditioning items (images or videos placed at a frame index)")

IMAGE_TO_VIDEO = "LTXImageToVideoPipeline"


def packed_tokens(components: Mapping[str, Mapping[str, Any]], s: Settings, latent_frames: Any) -> Any:
    """``_pack_latents``: ``(T / p_t)(h / p)(w / p)`` tokens of the latent (the plan has checked the sizes
    divide)."""
    spatial, _ = compression(components)
    p = config_value(components, "transformer", "patch_size", 1) or 1
    p_t = config_value(components, "transformer", "patch_size_t", 1) or 1
    return latent_frames // p_t * (s.height // spatial // p) * (s.width // spatial // p)


def image_encode_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, images: int,
                      why: str, frames: Any = 1) -> list[ComponentRun]:
    """``vae.encode`` of ``images`` videos of ``frames`` frames (an image: one, ``image.unsqueeze(2)``) at the
    run's size, tiled as the VAE would when ``vae_tiling``."""
    vae = components.get("vae")
    if vae is None:
        return []
    split = ltx_vae.encode_split(vae, s.height, s.width, bool(s.vae_tiling))
    return tile_runs("vae", component_class(components, "vae") or "?", "encode", "vae_encoder", split, images,
                     lambda h, w: RunShape(height=h, width=w, frames=frames),
                     lambda n, h, w: f"{images} {why}" if split.is_whole else f"{n} tile(s) of {h}×{w} px × {images} {why}")


@register_pipeline(IMAGE_TO_VIDEO, options=("max_sequence_length", "num_frames", "vae_tiling"))
def ltx_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``LTXImageToVideoPipeline.__call__`` (pipeline_ltx_image2video.py:598): ``LTXPipeline``'s defaults
    (512×704, 161 frames, 50 steps, ``guidance_scale`` 3.0 on a doubled batch, 128 T5 tokens, the decode),
    and the image:

    * ``prepare_latents`` (:502): the image, as a one-frame video at the output size, is VAE-encoded
      (``self.vae.encode(img.unsqueeze(0).unsqueeze(2))`` for each input image: one per prompt here), and
      its latent replaces the first latent frame (a mask, no channels added);
    * every step, the transformer gets one timestep per token: ``t.unsqueeze(-1) · (1 − conditioning_mask)``
      (:841), a ``(batch, N)`` tensor the model flattens, so ``time_embed`` runs on all N packed tokens.

    It takes no ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {IMAGE_TO_VIDEO}: the image replaces the first latent frame "
                          "and the whole schedule runs")
    base = ltx_pipeline(components, s, index=index)
    s = base.settings
    runs = list(base.runs)
    transformer = [i for i, r in enumerate(runs) if r.component == "transformer"]
    for i in transformer:
        tokens = packed_tokens(components, s, runs[i].shape.latent_frames)
        runs[i] = replace(runs[i], shape=replace(runs[i].shape, timestep_tokens=tokens))
    encode = image_encode_runs(components, s, s.batch_size, "input image(s) (one per prompt)")
    at = transformer[0] if transformer else len(runs)
    runs[at:at] = encode
    notes = list(base.notes)
    if encode:
        notes.append("the image is VAE-encoded as a one-frame video, one per prompt; its latent replaces the first "
                     "latent frame (a conditioning mask: no channels added)")
    if transformer:
        notes.append("one timestep per latent token (t · (1 − conditioning_mask)): the transformer's time_embed runs "
                     "on every token")
    return Plan(IMAGE_TO_VIDEO, s, base.passes, tuple(runs), tuple(notes))


CONDITION = "LTXConditionPipeline"
#: ``LTXConditionPipeline.__call__``: ``max_sequence_length`` 256 (pipeline_ltx_condition.py:883).
CONDITION_TEXT_LEN = 256


#: ``prepare_latents``' ``num_prefix_latent_frames``: a video placed away from frame 0 adds this many latent frames.
PREFIX_LATENT_FRAMES = 2


def _condition_items(components: Mapping[str, Mapping[str, Any]], s: Settings, temporal: int
                     ) -> list[tuple[int, int, int]]:
    """Each conditioning item as ``(frames encoded, frame_index, latent frames appended as tokens)``:
    an image (1 frame) is encoded as is; a video is trimmed to ``min(frames, num_frames − frame_index)`` floored
    to ``8k + 1`` (``trim_conditioning_sequence``; a video trimmed to one frame then counts as an image); at frame 0 its latent blends into the first latent frames (no
    tokens), elsewhere an image adds its 1 latent frame and a video its first 2 (``num_prefix_latent_frames``;
    the rest blends in) as extra tokens (``prepare_latents``, pipeline_ltx_condition.py:716)."""
    items = []
    for frames, index in s.conditions or ():
        if frames > 1:
            if index >= s.num_frames:
                raise ResolutionError(f"a conditioning video at frame_index {index} lies past the {s.num_frames} "
                                      "generated frames: nothing of it is kept")
            frames = (min(frames, s.num_frames - index) - 1) // temporal * temporal + 1
        latent = (frames - 1) // temporal + 1
        extra = 0
        if index:  # a trimmed video of more than one frame has 8k + 1 ≥ 9 frames: at least 2 latent frames
            extra = latent if frames == 1 else PREFIX_LATENT_FRAMES
            p_t = config_value(components, "transformer", "patch_size_t", 1) or 1
            if extra % p_t:
                raise ResolutionError(f"{extra} conditioning latent frame(s) do not pack into the transformer's "
                                      f"patch_size_t {p_t}")
        items.append((frames, index, extra))
    return items


@register_pipeline(CONDITION, options=("max_sequence_length", "num_frames", "vae_tiling", "conditions"))
def ltx_condition_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``LTXConditionPipeline.__call__`` (pipeline_ltx_condition.py:850): 512×704, 161 frames, 50 steps
    (``linear_quadratic_schedule`` gives one timestep per step), ``guidance_scale`` 3.0 on a doubled batch, T5
    on 256 tokens, the decode as ``LTXPipeline`` (``decode_timestep`` 0.0 into a timestep-conditioned decoder).

    At its defaults (``conditions``, ``image`` and ``video`` None) nothing is encoded and the transformer gets one
    timestep per video. ``conditions`` (``--condition FRAMES@INDEX``: an image is ``1@INDEX``) lists the
    conditioning items: each is VAE-encoded once (``self.vae.encode(data)``, one call per item, whatever the
    batch), items away from frame 0 append their packed latent frames to the token sequence (see
    :func:`_condition_items`), and the transformer then gets one timestep per token
    (``torch.min(t, (1 − conditioning_mask) · 1000)``, :1199) over the latent and the appended tokens, which
    are dropped before decoding. ``strength`` is refused: in this pipeline it is each item's conditioning
    strength (FLOP-free), and ``denoise_strength`` starts from latents passed in (no encode)."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {CONDITION}: its strength is a conditioning item's (no "
                          "effect on the count), and its denoise_strength starts from latents passed in")
    base = ltx_pipeline(components, replace(s, max_sequence_length=s.max_sequence_length or CONDITION_TEXT_LEN),
                        index=index)
    s = base.settings
    if not s.conditions:
        return replace(base, pipeline=CONDITION, notes=base.notes + (
            "no conditioning items (the __call__ default): text-to-video, one timestep per video",))
    spatial, temporal = compression(components)
    items = _condition_items(components, s, temporal)
    p = config_value(components, "transformer", "patch_size", 1) or 1
    p_t = config_value(components, "transformer", "patch_size_t", 1) or 1
    extra = sum(e // p_t for _, _, e in items) * (s.height // spatial // p) * (s.width // spatial // p)
    runs = list(base.runs)
    transformer = [i for i, r in enumerate(runs) if r.component == "transformer"]
    for i in transformer:
        tokens = packed_tokens(components, s, runs[i].shape.latent_frames) + extra
        runs[i] = replace(runs[i], shape=replace(runs[i].shape, timestep_tokens=tokens,
                                                 reference_tokens=extra or None))
    encodes = []
    for n, (frames, at, _) in enumerate(items):
        encodes += image_encode_runs(components, s, 1, f"conditioning {'image' if frames == 1 else 'video'} "
                                     f"#{n + 1} (frame_index {at})", frames=frames)
    cut = transformer[0] if transformer else len(runs)
    runs[cut:cut] = encodes
    words = ", ".join(f"{frames} frame(s) at {at}" + (f" (+{e} latent frame(s) of tokens)" if e else "")
                      for frames, at, e in items)
    notes = base.notes + (f"conditioning items: {words}; each VAE-encoded once; {extra} conditioning token(s) "
                          "appended to the sequence; one timestep per token",)
    return Plan(CONDITION, s, base.passes, tuple(runs), notes)


UPSAMPLE = "LTXLatentUpsamplePipeline"


@register_pipeline(UPSAMPLE, options=("num_frames", "vae_tiling"))
def ltx_latent_upsample_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``LTXLatentUpsamplePipeline.__call__`` (pipeline_ltx_latent_upsample.py:189) given video: 512×704 (its
    defaults); ``num_frames`` is the videos' length (``--num-frames``; 161, ``LTXPipeline``'s default, when not
    given), ``8k + 1`` (the pipeline truncates others); ``batch_size`` videos (one by default):

    * ``prepare_latents`` (:64): ``vae.encode`` of each video (``for vid in video``);
    * ``self.latent_upsampler(latents)`` (:277) on the ``T × H/32 × W/32`` latents;
    * ``vae.decode(latents, timestep)`` (:310) on the upsampled latents (``2H/32 × 2W/32`` for a spatial
      upsampler): the output videos are ``2H × 2W``.

    It runs no denoising and encodes no prompt: steps and guidance change nothing (a note says so);
    ``strength`` is refused."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {UPSAMPLE}: it encodes a video, upsamples its latent and "
                          "decodes it, with no denoising")
    ignored = [flag for given, flag in ((s.steps, "steps"), (s.guidance_scale, "guidance_scale"),
                                        (s.negative_prompt or None, "negative prompt")) if given is not None]
    videos = s.batch_size * s.num_images_per_prompt
    spatial, temporal = compression(components)
    s = replace(s, height=s.height or DEFAULT_HEIGHT, width=s.width or DEFAULT_WIDTH,
                num_frames=s.num_frames or DEFAULT_FRAMES)
    check_divisible(s.height, s.width, spatial, "LTX-Video height and width (the VAE's spatial compression)")
    check_frames(s.num_frames, temporal)
    frames = (s.num_frames - 1) // temporal + 1
    notes = list(missing_notes(components, ["latent_upsampler", "vae"]))
    if ignored:
        notes.append(f"{', '.join(ignored)} ignored: {UPSAMPLE} runs no denoising and encodes no prompt")
    runs = image_encode_runs(components, s, videos, "input video(s)", frames=s.num_frames)
    upsampler = components.get("latent_upsampler")
    out_h, out_w, out_frames = s.height // spatial, s.width // spatial, frames
    if upsampler is not None:
        runs.append(ComponentRun("latent_upsampler", component_class(components, "latent_upsampler") or "?", "forward",
                                 "upsampler", RunShape(latent_height=out_h, latent_width=out_w, latent_frames=frames),
                                 videos, f"{videos} latent video(s)"))
        if upsampler["spatial_upsample"]:
            out_h, out_w = 2 * out_h, 2 * out_w
        if upsampler["temporal_upsample"]:
            out_frames = 2 * frames - 1
    decode, vae_notes = vae_runs(components, replace(s, height=out_h * spatial, width=out_w * spatial), videos,
                                 out_frames, spatial, tiled=bool(s.vae_tiling))
    notes += vae_notes
    notes.append(f"each input video ({s.num_frames} frames; its length sets num_frames) is encoded once, its "
                 f"{frames}×{s.height // spatial}×{s.width // spatial} latent upsampled to "
                 f"{out_frames}×{out_h}×{out_w} and decoded: the output is {out_h * spatial}×{out_w * spatial}")
    return Plan(UPSAMPLE, s, 1, tuple(runs + decode), tuple(notes))
