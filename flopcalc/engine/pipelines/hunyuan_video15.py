"""HunyuanVideo 1.5 text-to-video pipeline (diffusers ``pipelines/hunyuan_video1_5/pipeline_hunyuan_video1_5.py``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures import autoencoder_kl_hunyuan_video15 as hv15_vae
from flopcalc.engine.architectures.siglip import siglip_patches
from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines.hunyuan_image import glyph_runs, guider_class
from flopcalc.engine.registry import RunShape
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    denoiser_run,
    missing_notes,
    register_pipeline,
    require_numeric_tiling,
    text_runs,
    video_decode_runs,
)
from flopcalc.engine.pipelines.vae import vae_runs

#: ``HunyuanVideo15Pipeline.__init__`` (pipeline_hunyuan_video1_5.py:218-238).
SPATIAL, TEMPORAL = 16, 4  # the VAE factors without a VAE
TEXT_TOKENS = 1000  # tokenizer_max_length: the Qwen tokens the transformer sees (padded to it)
TEMPLATE_TOKENS = 108  # prompt_template_encode_start_idx: the system template, encoded then cropped
GLYPH_TOKENS = 256  # tokenizer_2_max_length: byT5 tokens (zeros without quoted text), always passed
IMAGE_TOKENS = 729  # vision_num_semantic_tokens: zero image embeddings for text-to-video, always passed
DEFAULT_ASPECT = (9, 16)  # default_aspect_ratio (16, 9) as (width, height), asked as (height, width)
#: ``__call__`` defaults (line 550).
DEFAULT_FRAMES, DEFAULT_STEPS = 121, 50
#: ``ClassifierFreeGuidance.guidance_scale`` default (guiders/classifier_free_guidance.py:83).
GUIDER_SCALE = 7.5


def crop_sizes(base_size: int, patch: int, max_ratio: float = 4.0) -> list[tuple[int, int]]:
    """``generate_crop_size_list`` (hunyuan_video1_5/image_processor.py:20): ``(w, h)`` buckets of about
    ``(base/patch)²`` patches with aspect at most ``max_ratio``."""
    patches = round((base_size / patch) ** 2)
    out, wp, hp = [], patches, 1
    while wp > 0:
        if max(wp, hp) / min(wp, hp) <= max_ratio:
            out.append((wp * patch, hp * patch))
        if (hp + 1) * wp <= patches:
            hp += 1
        else:
            wp -= 1
    return out


def default_size(target_size: int, patch: int, height: int = DEFAULT_ASPECT[0],
                 width: int = DEFAULT_ASPECT[1]) -> tuple[int, int]:
    """``calculate_default_height_width(height, width, target_size)`` (image_processor.py:97, with
    ``get_closest_ratio``): among the buckets' ``round(first / second, 5)`` ratios, the closest one on the
    same side of ``height / width`` (at or below it for an aspect ≥ 1, at or above it otherwise). The
    bucket's entries are returned in their stored order, as ``(height, width)``; without a size, 9 × 16."""
    buckets = crop_sizes(target_size, patch)
    aspect = height / width
    ratios = [round(a / b, 5) for a, b in buckets]
    candidates = [(i, r - aspect) for i, r in enumerate(ratios) if (r - aspect <= 0 if aspect >= 1 else r - aspect >= 0)]
    best = min(candidates, key=lambda pair: abs(pair[1]))[0]
    return buckets[best]


@register_pipeline("HunyuanVideo15Pipeline", guidance="separate", denoisers=("HunyuanVideo15Transformer3DModel",),
                   options=("num_frames", "glyph_prompts", "vae_tiling"))
def hunyuan_video15_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanVideo15Pipeline.__call__`` (pipeline_hunyuan_video1_5.py:546): 121 frames, 50 steps
    (``sigmas`` linspace(1, 0, steps + 1)[:-1]); without a size, the 16:9 bucket of the transformer's
    ``target_size`` (640 → 480×848, line 652); the latent ``(F − 1)//4 + 1 × H/16 × W/16``
    (``prepare_latents``), joined with zero condition latents and a zero mask (2C + 1 channels).

    Guidance: the ``guider`` (``ClassifierFreeGuidance`` in the index) runs one transformer forward per
    condition (line 762) and the negative prompt is encoded when it has two (line 684). Its config is not
    read: the class default ``guidance_scale`` 7.5 (or ``guidance_scale``), > 1: two passes. Without a
    guider in the index: one pass.

    Text (``_get_mllm_prompt_embeds``, line 241): ``text_encoder`` (Qwen2.5-VL-7B's language model,
    ``Qwen2_5_VLTextModel``) encodes the prompt in a chat template padded to 1000 + 108 tokens, all its layers
    run (it keeps ``hidden_states[-3]``), and the first 108 are cropped: the transformer sees 1000. byT5
    encodes only quoted text (``_get_byt5_prompt_embeds``, line 289: :func:`~.hunyuan_image.glyph_runs`, 256
    tokens; none by default, ``glyph_prompts`` N for N prompts), and the transformer embeds its 256 glyph tokens
    and 729 zero image tokens either way."""
    f = config_value(components, "vae", "spatial_compression_ratio", SPATIAL)
    ft = config_value(components, "vae", "temporal_compression_ratio", TEMPORAL)
    if (s.height is None) != (s.width is None):
        raise ResolutionError("HunyuanVideo 1.5 needs both height and width, or neither (the default bucket)")
    if s.height is None:
        h, w = default_size(config_value(components, "transformer", "target_size", 640), f)
        s = replace(s, height=h, width=w)
    s = replace(s, steps=s.steps or DEFAULT_STEPS, num_frames=s.num_frames or DEFAULT_FRAMES)
    check_divisible(s.height, s.width, f, "HunyuanVideo 1.5 height and width (the VAE's spatial factor)")
    guider = guider_class(index)
    scale = GUIDER_SCALE if s.guidance_scale is None else s.guidance_scale
    cfg = guider is not None and scale > 1
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if guider is not None:
        notes.append(f"guider {guider}: its config is not read; planned with guidance_scale {scale} (class default "
                     "unless --guidance-scale is given): " + ("two passes per step" if cfg else "one pass"))
    elif s.guidance_scale is not None:
        notes.append("guidance_scale is ignored: no guider in the index")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored without guidance (as in HunyuanVideo15Pipeline)")
    glyph, glyph_note = glyph_runs(components, s, GLYPH_TOKENS, f" and {IMAGE_TOKENS} zero image tokens")
    notes.append(glyph_note)
    if s.strength is not None:
        notes.append("HunyuanVideo15Pipeline has no video-to-video mode: strength is estimated as the image-to-image "
                     "pipelines run it (the input video VAE-encoded once, the last strength of the schedule)")
    passes = cfg_passes(s, cfg)
    frames = (s.num_frames - 1) // ft + 1
    runs = text_runs(components, [("text_encoder", TEXT_TOKENS + TEMPLATE_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else "")) + glyph
    runs += [replace(r, shape=replace(r.shape, text_len_2=GLYPH_TOKENS, image_tokens=IMAGE_TOKENS))
             for r in denoiser_run(components, "transformer", s, f, TEXT_TOKENS, passes, latent_frames=frames)]
    decode, decode_notes = _decode_runs(components, s, s.batch_size * s.num_images_per_prompt, s.height // f,
                                        s.width // f, frames)
    return Plan("HunyuanVideo15Pipeline", s, passes, tuple(runs + decode), tuple(notes + decode_notes))


def _decode_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, videos: int, latent_h: int, latent_w: int,
                 frames: int) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` of each video's latent (line 826): whole, or with ``vae_tiling`` (``pipe.vae.enable_tiling()``)
    one run per distinct tile shape, every overlapping tile decoded in full with all its frames
    (:func:`~flopcalc.engine.architectures.autoencoder_kl_hunyuan_video15.decode_split`)."""
    if not s.vae_tiling or "vae" not in components:
        return vae_runs(components, s, videos, latent_h, latent_w, frames), []
    if s.strength is not None:
        raise OptionError("--vae-tiling with --strength: the tiled encode of the input video is not planned by "
                          "flopcalc (only the tiled decode); leave one of them off")
    split = hv15_vae.decode_split(components["vae"], latent_h, latent_w)
    if split.is_whole:
        return (vae_runs(components, s, videos, latent_h, latent_w, frames),
                ["VAE: tiling asked for, but the latent fits one tile: decoded whole, as the VAE does"])
    require_numeric_tiling(s)
    note = (f"VAE: tiled decode (enable_tiling: {hv15_vae.TILE_SAMPLE_MIN}-pixel tiles overlapping by "
            f"{hv15_vae.TILE_OVERLAP:g}, overlaps counted in full): {split.calls} tiles per video, each decoded with "
            "all its frames")
    return video_decode_runs(components, split, videos, frames), [note]


@register_pipeline("HunyuanVideo15ImageToVideoPipeline", guidance="separate", options=("num_frames", "glyph_prompts"))
def hunyuan_video15_i2v_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``HunyuanVideo15ImageToVideoPipeline.__call__`` (pipeline_hunyuan_video1_5_image2video.py:652): as the
    text-to-video plan, but the video's size is always the bucket of ``target_size`` nearest the input
    image's aspect (line 756: ``calculate_default_height_width`` of the image's size; ``height`` / ``width``
    here are the input image's, 16:9 without them), the image is VAE-encoded once as one frame
    (``prepare_cond_latents_and_mask`` → ``_get_image_latents``, line 386), and the ``image_encoder``
    (``SiglipVisionModel``, FLUX.1-Redux-dev's in the original release) encodes it once per call
    (``encode_image``, line 776 → ``_get_image_embeds``, line 391: the ``feature_extractor`` resizes it to the
    encoder's ``image_size``², and ``last_hidden_state`` is repeated over the batch): its
    ``(image_size / patch_size)²`` states (729 for SigLIP so400m-patch14-384) replace the zero image tokens
    the transformer embeds.

    The bucket is a step function of the image's height and width: no closed-form law in H and W."""
    if s.symbolic:
        raise FlopcalcError("HunyuanVideo15ImageToVideoPipeline sizes the video as the target_size bucket nearest the "
                            "input image's aspect, a step function of its height and width: no closed-form law in H "
                            "and W; use the numeric estimate")
    f = config_value(components, "vae", "spatial_compression_ratio", SPATIAL)
    target = config_value(components, "transformer", "target_size", 640)
    h, w = default_size(target, f, s.height, s.width) if s.height and s.width else default_size(target, f)
    plan = hunyuan_video15_pipeline(components, replace(s, height=h, width=w), index=index)
    runs = list(plan.runs)
    if "vae" in components:
        encode = ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                              RunShape(height=h, width=w, frames=1), 1, "1 input image (one frame)")
        runs.insert(next(i for i, r in enumerate(runs) if r.component == "vae"), encode)
    notes = [n for n in plan.notes if not n.startswith("text_encoder_2 (byT5)")]
    notes.append(glyph_runs(components, plan.settings, GLYPH_TOKENS)[1])
    given = f"{s.height}×{s.width}" if s.height and s.width else "of unknown size: 16:9 assumed"
    notes.append(f"the input image ({given}) is resized to the {h}×{w} bucket of target_size {target}")
    notes += missing_notes(components, ["image_encoder"])
    if "image_encoder" in components:
        cfg = components["image_encoder"]
        size, tokens = cfg["image_size"], siglip_patches(cfg)
        runs.insert(0, ComponentRun("image_encoder", component_class(components, "image_encoder") or "?", "forward",
                                    "image_encoder", RunShape(seq_len=tokens, height=size, width=size), 1,
                                    f"1 input image at {size}×{size} (encode_image)"))
        runs = [replace(r, shape=replace(r.shape, image_tokens=tokens)) if r.role == "denoiser" else r for r in runs]
    return Plan("HunyuanVideo15ImageToVideoPipeline", plan.settings, plan.passes, tuple(runs), tuple(notes))
