"""Kandinsky 5 (diffusers ``pipelines/kandinsky5``): ``Kandinsky5T2VPipeline`` (``pipeline_kandinsky.py``),
``Kandinsky5I2VPipeline`` (``pipeline_kandinsky_i2v.py``), ``Kandinsky5T2IPipeline`` (``pipeline_kandinsky_t2i.py``),
``Kandinsky5I2IPipeline`` (``pipeline_kandinsky_i2i.py``).

Every one encodes the prompt twice: Qwen2.5-VL on the prompt wrapped in a system template whose first
``prompt_template_encode_start_idx`` tokens (128 for video, 40 for images) are dropped from the last hidden state, the
tokenizer truncating the whole to that many + ``max_sequence_length`` tokens and padding to the longest prompt; CLIP on
77 tokens for the pooled vector. Upper bound used here: a prompt (and negative prompt) filling
``max_sequence_length``, so Qwen2.5-VL runs on ``start + max_sequence_length`` tokens and the transformer sees
``max_sequence_length``. Classifier-free guidance (``guidance_scale > 1``) encodes the negative prompt (a fixed
default string unless given) and runs the transformer a second time per step on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun, Plan, Settings, cfg_passes, check_divisible, component_class, config_value, missing_notes,
    register_pipeline, text_runs,
)
from flopcalc.engine.pipelines.hunyuan_video import VAE_MODES, _vae_run
from flopcalc.engine.pipelines.vae import vae_runs
from flopcalc.engine.registry import RunShape

T2V, I2V, T2I = "Kandinsky5T2VPipeline", "Kandinsky5I2VPipeline", "Kandinsky5T2IPipeline"
#: ``prompt_template_encode_start_idx`` of the video and the image pipelines (pipeline_kandinsky.py:201,
#: pipeline_kandinsky_t2i.py:179).
VIDEO_TEMPLATE, IMAGE_TEMPLATE = 128, 40
CLIP_TOKENS = 77
#: ``check_inputs``: ``max_sequence_length`` at most 1024, sides divisible by 16.
MAX_TEXT, SIZE_MULTIPLE = 1024, 16
#: ``Kandinsky5T2IPipeline.resolutions`` (pipeline_kandinsky_t2i.py:183), (width, height).
RESOLUTIONS = ((1024, 1024), (640, 1408), (1408, 640), (768, 1280), (1280, 768), (896, 1152), (1152, 896))


def _text(components: Mapping[str, Mapping[str, Any]], s: Settings, template: int, rows: int) -> list[ComponentRun]:
    """Qwen2.5-VL on ``template + max_sequence_length`` tokens and CLIP on 77, once per prompt and guidance row."""
    why = f"{s.batch_size} prompt(s)" + (" + negative" if rows == 2 else "")
    return text_runs(components, [("text_encoder", template + s.max_sequence_length),
                                  ("text_encoder_2", CLIP_TOKENS)], s.batch_size * rows, why)


def _check(s: Settings) -> None:
    if s.max_sequence_length > MAX_TEXT:
        raise OptionError(f"Kandinsky 5: max_sequence_length must be at most {MAX_TEXT} (check_inputs), got "
                          f"{s.max_sequence_length}")
    check_divisible(s.height, s.width, SIZE_MULTIPLE, "Kandinsky 5 height and width (check_inputs)")


def _transformer(components: Mapping[str, Mapping[str, Any]], s: Settings, rows: int, latent: tuple,
                 video: bool = True) -> list:
    if "transformer" not in components:
        return []
    frames, lh, lw = latent
    patch = config_value(components, "transformer", "patch_size", [1, 2, 2])
    if frames % patch[0] or lh % patch[1] or lw % patch[2]:
        raise ResolutionError(f"Kandinsky 5: the {frames}×{lh}×{lw} latent does not split into the transformer's "
                              f"{tuple(patch)} patches")
    videos = s.batch_size * s.num_images_per_prompt
    return [ComponentRun("transformer", component_class(components, "transformer") or "?", "forward", "denoiser",
                         RunShape(latent_height=lh, latent_width=lw, latent_frames=frames if video else None,
                                  text_len=s.max_sequence_length),
                         s.steps * rows * videos, f"{s.steps} steps × {rows} call(s) × {videos} output(s)")]


def _video_plan(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str, image: bool) -> Plan:
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: it generates from noise"
                          + (" (the image conditions the first latent frame)" if image else ""))
    vae = components.get("vae")
    spatial = config_value(components, "vae", "spatial_compression_ratio", 8)
    temporal = config_value(components, "vae", "temporal_compression_ratio", 4)
    s = replace(s, height=s.height or 512, width=s.width or 768, num_frames=s.num_frames or 121, steps=s.steps or 50,
                guidance_scale=5.0 if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or 512)
    _check(s)
    if (s.num_frames - 1) % temporal:  # __call__ rounds down with a warning
        lo = (s.num_frames - 1) // temporal * temporal + 1
        raise ResolutionError(f"Kandinsky 5 num_frames must be {temporal}k + 1 (the pipeline rounds others down): "
                              f"num_frames {s.num_frames} → nearest valid: {lo} or {lo + temporal}.")
    check_divisible(s.height, s.width, spatial * 2, "Kandinsky 5 height and width (the VAE's compression × the patch)")
    cfg = s.guidance_scale > 1
    rows = cfg_passes(s, cfg)
    latent = ((s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial)
    runs = _text(components, s, VIDEO_TEMPLATE, rows) + _transformer(components, s, rows, latent)
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    notes.append(f"text: Qwen2.5-VL on {VIDEO_TEMPLATE} template + {s.max_sequence_length} prompt tokens (upper bound: "
                 "a prompt filling max_sequence_length; the tokenizer pads to the longest prompt), CLIP on 77")
    if vae is not None:
        cls = component_class(components, "vae") or "?"
        videos = s.batch_size * s.num_images_per_prompt
        if image:  # prepare_latents (pipeline_kandinsky_i2v.py:693-699): the preprocessed image, one frame, once
            runs.insert(next(i for i, r in enumerate(runs) if r.role == "denoiser") if "transformer" in components
                        else len(runs), _vae_run("encode", cls, vae, s, 1, "the image (one frame), encoded once",
                                                 height=s.height, width=s.width, frames=1))
        if image and latent[0] == 1:
            # normalize_first_frame (pipeline_kandinsky_i2v.py:437-438) returns a (latents, message) tuple for one
            # latent frame: the decode fails on it, so only output_type="latent" completes (no decode)
            notes.append(f"no VAE decode: on one latent frame {name} (diffusers 0.42.1) completes only with "
                         "output_type='latent' (normalize_first_frame returns a tuple the decode cannot take)")
        else:
            runs.append(_vae_run("decode", cls, vae, s, videos, f"{videos} video(s)", latent_height=latent[1],
                                 latent_width=latent[2], latent_frames=latent[0]))
            framewise, tiling = VAE_MODES[s.vae_tiling]
            notes.append("VAE: " + ("decoded in temporal chunks (use_framewise_decoding, the VAE's default)"
                                    if framewise else "decoded in one pass")
                         + (", spatially tiled (vae.enable_tiling())" if tiling else ", untiled"))
    if image:
        notes.append("the image is VAE-encoded once as a one-frame video; its latent replaces the first latent frame "
                     "(with visual_cond the transformer also reads the condition channels and a first-frame mask)")
    return Plan(name, s, rows, tuple(runs), tuple(notes))


@register_pipeline(T2V, denoisers=("Kandinsky5Transformer3DModel",),
                   when=lambda cfg: cfg.get("patch_size", [1, 2, 2])[0] == 1,
                   options=("max_sequence_length", "num_frames", "vae_tiling"), guidance="separate")
def kandinsky5_t2v_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``Kandinsky5T2VPipeline.__call__`` (pipeline_kandinsky.py:681): 512×768, 121 frames (``(F − 1)/4 + 1``
    latent frames of ``H/8 × W/8``, patched 1×2×2), 50 steps, ``guidance_scale`` 5.0 (a second transformer call per
    step on the negative prompt), ``max_sequence_length`` 512; the HunyuanVideo VAE decodes each video (in temporal
    chunks: its default ``use_framewise_decoding``)."""
    return _video_plan(components, s, T2V, image=False)


@register_pipeline(I2V, options=("max_sequence_length", "num_frames", "vae_tiling"), guidance="separate")
def kandinsky5_i2v_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``Kandinsky5I2VPipeline.__call__`` (pipeline_kandinsky_i2v.py:750): the text-to-video defaults, and the image
    (resized to the output size) VAE-encoded once as a one-frame video (:693-699); its latent replaces the first
    latent frame of every video."""
    return _video_plan(components, s, I2V, image=True)


def image_size(height: int | None, width: int | None) -> tuple[int, int]:
    """``Kandinsky5T2IPipeline.__call__`` (:628-631): a size not in ``resolutions`` becomes the listed one of nearest
    aspect ratio."""
    height, width = height or 1024, width or 1024
    if (width, height) in RESOLUTIONS:
        return height, width
    w, h = min(RESOLUTIONS, key=lambda r: abs(r[0] / r[1] - width / height))
    return h, w


@register_pipeline(T2I, options=("max_sequence_length",), guidance="separate")
def kandinsky5_t2i_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``Kandinsky5T2IPipeline.__call__`` (pipeline_kandinsky_t2i.py:535): 1024² (a size off its ``resolutions`` list
    becomes the listed size of nearest aspect ratio, as the pipeline does), 50 steps, ``guidance_scale`` 3.5 (a second
    transformer call per step), Qwen2.5-VL on 40 template + ``max_sequence_length`` 512 tokens; the latent is one
    frame of ``H/8 × W/8``; the FLUX VAE (``AutoencoderKL``) decodes each image."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {T2I}: it generates from noise (see Kandinsky5I2IPipeline)")
    if s.symbolic:
        raise FlopcalcError(f"{T2I} snaps every size to its list of seven resolutions: no closed-form law in H and W; "
                            "use the numeric estimate")
    height, width = image_size(s.height, s.width)
    notes = []
    if (s.height or 1024, s.width or 1024) != (height, width):
        notes.append(f"{s.height or 1024}×{s.width or 1024} is not one of the pipeline's resolutions: it generates "
                     f"{height}×{width} (the listed size of nearest aspect ratio)")
    s = replace(s, height=height, width=width, steps=s.steps or 50,
                guidance_scale=3.5 if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or 512)
    _check(s)
    f = 8
    if "vae" in components:
        from flopcalc.engine.pipelines.base import vae_scale_factor

        f = vae_scale_factor(components)
    cfg = s.guidance_scale > 1
    rows = cfg_passes(s, cfg)
    runs = _text(components, s, IMAGE_TEMPLATE, rows) + _transformer(
        components, s, rows, (1, s.height // f, s.width // f), video=False)
    images = s.batch_size * s.num_images_per_prompt
    runs += vae_runs(components, s, images, s.height // f, s.width // f)
    notes += list(missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    notes.append(f"text: Qwen2.5-VL on {IMAGE_TEMPLATE} template + {s.max_sequence_length} prompt tokens (upper bound), "
                 "CLIP on 77")
    return Plan(T2I, s, rows, tuple(runs), tuple(notes))


I2I = "Kandinsky5I2IPipeline"
#: ``prompt_template_encode_start_idx`` of the image-to-image pipeline (pipeline_kandinsky_i2i.py:178) and the template
#: tokens after the prompt and the image (``<|vision_start|>``, ``<|vision_end|>``, ``<|im_end|>``, :226).
EDIT_TEMPLATE, EDIT_SUFFIX = 54, 3
NO_EDIT_LAW = ("Kandinsky5I2IPipeline snaps the size to its resolutions and the Qwen2.5-VL processor resizes the "
               "image by rounding (smart_resize): no closed-form law; use the numeric estimate")


@register_pipeline(I2I, options=("max_sequence_length",), guidance="separate")
def kandinsky5_i2i_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``Kandinsky5I2IPipeline.__call__`` (pipeline_kandinsky_i2i.py:570) on an input image of ``height × width``
    (1024² when not given; the pipeline's default size is the image's): the output size is the listed resolution of
    nearest aspect ratio; 50 steps, ``guidance_scale`` 3.5 (a second transformer call per step on the negative prompt,
    "" by default, encoded with the image too), ``max_sequence_length`` 1024.

    * Qwen2.5-VL encodes the prompt with the image halved (``i.resize(size // 2)``, :212) and ``smart_resize``-d by
      the processor: the vision tower runs on it and its merged tokens join the sequence; upper bound: a prompt
      filling the sequence, so the language model runs on ``54 + max_sequence_length`` tokens and the transformer
      sees ``max_sequence_length``;
    * ``prepare_latents`` (:520-540): the image, resized to the output size, VAE-encoded once; its latent and a mask
      are concatenated to the noise (``2C + 1`` channels: the transformer must have ``visual_cond``).

    One output image per call: ``prepare_latents`` concatenates the one image latent to the batch's noise, which
    fails for more than one; a batch is refused."""
    from flopcalc.engine.pipelines.qwen_image_edit import image_tokens, smart_resize

    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {I2I}: every step runs (the image conditions the channels)")
    if s.symbolic:
        raise FlopcalcError(NO_EDIT_LAW)
    if s.batch_size != 1 or s.num_images_per_prompt != 1:
        raise OptionError(f"{I2I} makes one image per call: prepare_latents concatenates the one image latent to the "
                          "batch's noise (torch.cat fails for more rows); estimate one image")
    if "transformer" in components and not components["transformer"]["visual_cond"]:
        raise FlopcalcError(f"transformer: {I2I} feeds the image latent and its mask as channels (2C + 1): the "
                            "transformer must have visual_cond (an image-to-image checkpoint)")
    source_h, source_w = s.height or 1024, s.width or 1024
    height, width = image_size(source_h, source_w)
    s = replace(s, height=height, width=width, steps=s.steps or 50,
                guidance_scale=3.5 if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or 1024)
    _check(s)
    cond_h, cond_w = smart_resize(source_h // 2, source_w // 2)
    tokens = image_tokens(cond_h, cond_w)
    if tokens + EDIT_SUFFIX > s.max_sequence_length:
        raise OptionError(f"{I2I}: the image's {tokens} vision tokens do not fit max_sequence_length "
                          f"{s.max_sequence_length} (the tokenizer truncates to 54 + max_sequence_length)")
    f = 8
    if "vae" in components:
        from flopcalc.engine.pipelines.base import vae_scale_factor

        f = vae_scale_factor(components)
    cfg = s.guidance_scale > 1
    rows = cfg_passes(s, cfg)
    runs = []
    why = "1 prompt" + (" + negative" if cfg else "") + " (with the image)"
    if "text_encoder" in components:
        runs.append(ComponentRun("text_encoder", component_class(components, "text_encoder") or "?", "forward",
                                 "text_encoder", RunShape(seq_len=EDIT_TEMPLATE + s.max_sequence_length, height=cond_h,
                                                          width=cond_w, frames=1), rows, why))
    runs += text_runs(components, [("text_encoder_2", CLIP_TOKENS)], rows, why.replace(" (with the image)", ""))
    vae = {"vae": components["vae"]} if "vae" in components else {}
    # the input image, resized to the output size, encoded once (vae_runs plans an encode when given a strength)
    runs += [replace(r, why="the input image, resized to the output size, encoded once")
             for r in vae_runs(vae, replace(s, strength=1.0), 1, s.height // f, s.width // f) if r.call == "encode"]
    runs += _transformer(components, s, rows, (1, s.height // f, s.width // f), video=False)
    runs += vae_runs(vae, s, 1, s.height // f, s.width // f)
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "transformer", "vae"]))
    if (source_h, source_w) != (height, width):
        notes.append(f"the {source_h}×{source_w} input image gives a {height}×{width} output (the listed resolution of "
                     "nearest aspect ratio)")
    notes.append(f"text: Qwen2.5-VL on the image halved and smart-resized to {cond_h}×{cond_w} ({tokens} vision "
                 f"tokens) and {EDIT_TEMPLATE} template + {s.max_sequence_length} tokens in all (upper bound: a prompt "
                 "filling max_sequence_length, the negative prompt too), CLIP on 77")
    return Plan(I2I, s, rows, tuple(runs), tuple(notes))
