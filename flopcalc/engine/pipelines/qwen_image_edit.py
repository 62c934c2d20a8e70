"""Qwen-Image edit pipelines (diffusers ``pipelines/qwenimage/pipeline_qwenimage_edit.py``,
``pipeline_qwenimage_edit_plus.py``): the condition image goes through Qwen2.5-VL's vision tower into the
prompt, and its VAE latent is appended to the image tokens of every transformer pass.

What ``QwenImageEditPipeline.__call__`` (pipeline_qwenimage_edit.py:506-800) runs, for an input image of
``W × H`` pixels (flopcalc assumes the asked size; a square one by default):

* ``calculate_dimensions(1024², W/H)`` (:155-162): the aspect ratio at 1024² pixels, each side rounded to
  32. The output defaults to it (an asked size is floored to 16, the packed latent); the input image is
  resized to it, both for the VAE (the reference latent) and for the processor (the condition image).
* The processor (``Qwen2VLImageProcessor``) ``smart_resize``-s the condition image to multiples of
  ``patch_size · merge_size`` = 28 within ``[min_pixels, max_pixels]`` (transformers
  ``image_processing_qwen2_vl.py:63-89``), one ``image_grid_thw`` row ``(1, h/14, w/14)``, and expands
  ``<|image_pad|>`` into ``h·w/28²`` tokens. Qwen2.5-VL runs its vision tower on the patches and its language
  model (and ``lm_head``) on the whole templated sequence; the pipeline keeps the hidden states after
  ``prompt_template_encode_start_idx`` = 64 (``drop_idx``, :212-213), padding nothing and truncating
  nothing. flopcalc's text length convention, as for ``QwenImagePipeline`` (where the kept text is
  ``max_sequence_length`` tokens): the kept tokens other than the image's are ``max_sequence_length``
  (512), so the encoder runs on ``64 + image tokens + max_sequence_length`` tokens and the transformer
  sees ``image tokens + max_sequence_length``.
* The transformer runs on the output latent's ``(H/16)(W/16)`` tokens followed by the reference latent's
  (``torch.cat([latents, image_latents], dim=1)``, :749; ``img_shapes`` lists both), 50 steps, true CFG
  (a second forward; the negative prompt is encoded with the same image) only with ``true_cfg_scale > 1``
  and a negative prompt. The VAE encodes the input image once per prompt (``prepare_latents``) and
  decodes each output.

``QwenImageEditPlusPipeline`` (pipeline_qwenimage_edit_plus.py:611-900) takes several images: each is
resized to ``CONDITION_IMAGE_SIZE`` = 384² pixels for the processor and ``VAE_IMAGE_SIZE`` = 1024² for the
VAE (:66-67, :697-705, by its own aspect ratio); the template gets ``Picture i: <|vision_start|><|image_pad|>
<|vision_end|>`` per image (:239-245), the prompt's prefix where Edit's template holds a fixed
``<|vision_start|><|image_pad|><|vision_end|>``: flopcalc counts it beside ``max_sequence_length`` as Edit's
template tokens are (:func:`picture_wrapper_tokens`); every reference latent is appended to the image tokens; one
prompt only (batch 1, :677-681).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    pipeline_options,
    register_pipeline,
)
from flopcalc.engine.pipelines.qwen_image import qwen_image_pipeline, qwen_vae_scale_factor
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, pipeline_option

pipeline_option("input_images", kind=COUNT, bound=(64, "input images"),
                help="multi-image edit pipelines: images given (default 1)",
                refusal="it takes one input image at most, not a list of them")

#: ``calculate_dimensions(1024 * 1024, ...)``: the edit pipelines' target area (pixels).
TARGET_AREA = 1024 * 1024
#: ``QwenImageEditPlusPipeline``: the processor's and the VAE's image areas (pipeline_qwenimage_edit_plus.py:66-67).
CONDITION_IMAGE_SIZE = 384 * 384
VAE_IMAGE_SIZE = 1024 * 1024
#: ``prompt_template_encode_start_idx`` of both edit pipelines: the template tokens dropped after encoding.
DROP_IDX = 64
#: ``calculate_dimensions`` rounds each side to this multiple.
DIMENSION_MULTIPLE = 32
#: The processor's pixel bounds: ``min_pixels`` 56·56 and ``max_pixels`` 28·28·16384, the values of Qwen2.5-VL's
#: own ``preprocessor_config.json`` (model_cards/qwen-image-edit/PROVENANCE.json says where they come from);
#: ``patch_size`` 14 × ``merge_size`` 2 = 28 per merged token side.
PROCESSOR_MIN_PIXELS = 56 * 56
PROCESSOR_MAX_PIXELS = 28 * 28 * 16384
PROCESSOR_FACTOR = 28
#: ``check_inputs``: ``max_sequence_length`` cannot exceed 1024.
MAX_SEQUENCE_LENGTH = 1024
NO_LAW = ("the edit pipelines resize the images by square roots and rounding (calculate_dimensions, smart_resize) "
          "and the vision tower's windows step with the size: no closed-form law; use the numeric estimate")


def calculate_dimensions(target_area: int, ratio: float) -> tuple[int, int]:
    """``calculate_dimensions`` (pipeline_qwenimage_edit.py:155-162): ``(width, height)`` of aspect
    ``ratio`` = width / height at about ``target_area`` pixels, each rounded to a multiple of 32."""
    width = math.sqrt(target_area * ratio)
    height = width / ratio
    return (round(width / DIMENSION_MULTIPLE) * DIMENSION_MULTIPLE,
            round(height / DIMENSION_MULTIPLE) * DIMENSION_MULTIPLE)


def smart_resize(height: int, width: int, factor: int = PROCESSOR_FACTOR, min_pixels: int = PROCESSOR_MIN_PIXELS,
                 max_pixels: int = PROCESSOR_MAX_PIXELS) -> tuple[int, int]:
    """transformers ``models/qwen2_vl/image_processing_qwen2_vl.py:63-89`` ``smart_resize``: both sides
    multiples of ``factor``, the pixel count within ``[min_pixels, max_pixels]``, the aspect ratio kept."""
    if max(height, width) / min(height, width) > 200:
        raise FlopcalcError(f"the processor refuses an aspect ratio above 200 ({height}×{width})")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def condition_image(height: int, width: int, area: int) -> tuple[int, int]:
    """The condition image as the vision tower gets it: an input image of ``height × width`` resized to
    ``area`` pixels (``calculate_dimensions``), then ``smart_resize``-d by the processor: ``(h, w)``."""
    w, h = calculate_dimensions(area, width / height)
    return smart_resize(h, w)


def picture_wrapper_tokens(images: int) -> int:
    """Tokens of ``QwenImageEditPlusPipeline``'s per-image wrappers ``"Picture {i}: <|vision_start|>"`` and
    ``"<|vision_end|>"`` (pipeline_qwenimage_edit_plus.py:239-245), its image tokens aside: ``Picture``, the space,
    each digit of ``i`` (Qwen2's pre-tokenizer splits numbers into single digits: transformers
    ``models/qwen2/tokenization_qwen2.py:33``, ``\\p{N}``), ``:``, the space and the two special tokens: 7 for
    pictures 1-9, 8 for 10-99. Assumed: ``Picture`` is one token of Qwen2's vocabulary (the 7 tokens per image the
    issue's check against the real module found)."""
    return sum(6 + len(str(i)) for i in range(1, images + 1))


def image_tokens(height: int, width: int) -> int:
    """Merged vision tokens of a processor image of ``height × width`` pixels (multiples of 28)."""
    return (height // PROCESSOR_FACTOR) * (width // PROCESSOR_FACTOR)


def _edit_plan(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings, *, images: int,
               condition_area: int, vae_area: int, inpaint: bool = False, wrapper: int = 0) -> Plan:
    """The edit plans (module doc); ``wrapper``: the kept template tokens around the images beside
    ``max_sequence_length`` that are not in the template Edit's convention already counts (Edit Plus's
    per-image ``Picture i:`` wrappers)."""
    if not inpaint and s.strength is not None and s.strength < 1:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength (every step runs; "
                          "the input image is the reference), only 1 means that")
    if s.symbolic:
        raise FlopcalcError(NO_LAW)
    f = qwen_vae_scale_factor(components)
    multiple = 2 * f
    in_h, in_w = s.height or TARGET_AREA_SIDE, s.width or TARGET_AREA_SIDE  # the input image flopcalc assumes
    calc_w, calc_h = calculate_dimensions(TARGET_AREA, in_w / in_h)
    out_h = (calc_h if inpaint else s.height or calc_h) // multiple * multiple  # inpaint: always calculated
    out_w = (calc_w if inpaint else s.width or calc_w) // multiple * multiple
    if out_h == 0 or out_w == 0:
        raise FlopcalcError(f"{name}: {s.height}×{s.width} floors to no {multiple}-pixel latent patch")
    vae_w, vae_h = calculate_dimensions(vae_area, in_w / in_h)
    cond_h, cond_w = condition_image(in_h, in_w, condition_area)
    msl = s.max_sequence_length or 512
    if msl > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH} for Qwen-Image, "
                            f"got {msl}")
    kept = images * image_tokens(cond_h, cond_w) + wrapper + msl
    strength = s.strength if inpaint else None
    base = qwen_image_pipeline(components, replace(s, height=out_h, width=out_w, strength=strength,
                                                   max_sequence_length=msl), index=None)
    reference = images * (vae_h // multiple) * (vae_w // multiple)
    runs = []
    for r in base.runs:
        if r.role == "text_encoder":
            r = replace(r, shape=RunShape(seq_len=DROP_IDX + kept, height=cond_h, width=cond_w, frames=images),
                        why=r.why + f" with {images} condition image(s)")
        elif r.role == "denoiser":
            r = replace(r, shape=replace(r.shape, text_len=kept, reference_tokens=reference))
        elif r.role == "vae_encoder":  # inpaint: the image (prepare_latents) and the masked image
            r = replace(r, runs=2 * r.runs, why=f"{r.runs} input image(s) + {r.runs} masked image(s)")
        runs.append(r)
    if "vae" in components and not inpaint:
        runs.insert(next(i for i, r in enumerate(runs) if r.role == "vae_decoder"),
                    ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=vae_h, width=vae_w), s.batch_size * images,
                                 f"{s.batch_size * images} input image(s) at {vae_h}×{vae_w}"))
    notes = [*base.notes,
        f"input image assumed {in_h}×{in_w}: the reference latent is encoded at {vae_h}×{vae_w}, the condition "
        f"image reaches the vision tower at {cond_h}×{cond_w} ({image_tokens(cond_h, cond_w)} tokens each)",
        f"text: {DROP_IDX} template tokens dropped after encoding, then the image tokens"
        f"{f', {wrapper} tokens of the Picture i: wrappers' if wrapper else ''} and max_sequence_length "
        f"({msl}) other tokens kept (the edit pipelines neither pad nor truncate the prompt)",
             ]
    settings = replace(base.settings, strength=s.strength, height=out_h, width=out_w)
    return Plan(name, settings, base.passes, tuple(runs), tuple(notes))


#: The input image flopcalc assumes without a size: square, at the target area.
TARGET_AREA_SIDE = 1024
#: QwenImagePipeline's options less ``vae_tiling``: the edit pipelines encode the input image, whose tiled encode
#: flopcalc does not plan.
_OPTIONS = tuple(o for o in pipeline_options("QwenImagePipeline") if o != "vae_tiling")


@register_pipeline("QwenImageEditPipeline", guidance="separate", options=_OPTIONS)
def qwen_image_edit_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageEditPipeline.__call__`` (module doc): one input image, condition and VAE image both at
    ``calculate_dimensions(1024², W/H)``."""
    return _edit_plan("QwenImageEditPipeline", components, s, images=1, condition_area=TARGET_AREA,
                      vae_area=TARGET_AREA)


@register_pipeline("QwenImageEditPlusPipeline", guidance="separate", options=(*_OPTIONS, "input_images"))
def qwen_image_edit_plus_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageEditPlusPipeline.__call__`` (module doc): ``input_images`` images (default 1, all assumed
    of the asked size), each at ``CONDITION_IMAGE_SIZE`` for the vision tower and ``VAE_IMAGE_SIZE`` for
    the reference latent; one prompt."""
    if s.batch_size > 1:
        raise FlopcalcError("QwenImageEditPlusPipeline only supports batch_size=1 (it raises for more prompts); "
                            "use --num-images-per-prompt")
    images = s.input_images or 1
    return _edit_plan("QwenImageEditPlusPipeline", components, s, images=images,
                      condition_area=CONDITION_IMAGE_SIZE, vae_area=VAE_IMAGE_SIZE,
                      wrapper=picture_wrapper_tokens(images))


@register_pipeline("QwenImageEditInpaintPipeline", guidance="separate", options=_OPTIONS)
def qwen_image_edit_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                     index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageEditInpaintPipeline.__call__`` (pipeline_qwenimage_edit_inpaint.py:640-1010): the edit plan with
    the output always at ``calculate_dimensions(1024², W/H)`` of the image (``height = calculated_height``, :787;
    the asked size is the image's), ``strength`` 0.6 (``get_timesteps``: the last 30 of 50 steps), and the VAE
    encoding the image (``prepare_latents``, :512) and the masked image ``image · (mask < 0.5)``
    (``prepare_mask_latents``, :577) once each per prompt; the image latent still follows the output's tokens in
    every pass (:981) and the mask blends latents after each step (no channels)."""
    s = replace(s, strength=0.6 if s.strength is None else s.strength)
    return _edit_plan("QwenImageEditInpaintPipeline", components, s, images=1, condition_area=TARGET_AREA,
                      vae_area=TARGET_AREA, inpaint=True)
