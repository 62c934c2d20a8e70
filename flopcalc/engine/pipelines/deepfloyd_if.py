"""DeepFloyd IF pipelines (diffusers ``pipelines/deepfloyd_if``): pixel-space cascades of a T5 text encoder
(``text_encoder``, ``T5EncoderModel``) and a ``UNet2DConditionModel`` (``unet``: added-KV blocks,
``addition_embed_type: text``). No VAE: the UNet denoises the image itself.

* stage I, ``IFPipeline`` (text to a ``sample_size``² image, 64² for IF-I), ``IFImg2ImgPipeline`` and
  ``IFInpaintingPipeline`` (the input image resized by the pipeline's ``resize``: short side ``sample_size``,
  long side rounded to a multiple of 8);
* stage II, ``IFSuperResolutionPipeline`` (the image bilinearly upscaled to ``height × width`` and
  concatenated to the noise every step, its noise level the UNet's ``class_labels``),
  ``IFImg2ImgSuperResolutionPipeline`` and ``IFInpaintingSuperResolutionPipeline`` (the size is the
  ``original_image``'s after ``resize``).

Every pipeline encodes the prompt with T5 on 77 tokens (``encode_prompt``: ``max_length = 77``,
``padding="max_length"``) and, under classifier-free guidance (``guidance_scale > 1``), the negative prompt
("" when none is given) too; the UNet then runs on the doubled batch (two passes) every step. The safety
checker and the watermarker are post-hoc filters, not counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    text_runs,
)

#: ``encode_prompt``: ``max_length = 77`` T5 tokens, padded.
TEXT_LEN = 77
#: ``__call__`` defaults: (steps, guidance_scale, strength) of each pipeline (pipeline_if*.py).
DEFAULTS = {
    "IFPipeline": (100, 7.0, None),
    "IFImg2ImgPipeline": (80, 10.0, 0.7),
    "IFInpaintingPipeline": (50, 7.0, 1.0),
    "IFSuperResolutionPipeline": (50, 4.0, None),
    "IFImg2ImgSuperResolutionPipeline": (50, 4.0, 0.8),
    "IFInpaintingSuperResolutionPipeline": (100, 4.0, 0.8),
}
#: The pipelines whose size is an input image's after ``resize`` (the others take ``height``/``width``).
RESIZED = ("IFImg2ImgPipeline", "IFInpaintingPipeline", "IFImg2ImgSuperResolutionPipeline",
           "IFInpaintingSuperResolutionPipeline")


def if_resize(height: int, width: int, img_size: int) -> tuple[int, int]:
    """``resize(image, img_size)`` (pipeline_if_img2img.py:48-62, the same in every IF pipeline that takes a PIL
    image): the short side becomes ``img_size``, the long side ``int(round(img_size / 8 · aspect) · 8)``
    (Python's ``round``, half to even). Returns (height, width)."""
    coef = width / height
    w, h = img_size, img_size
    if coef >= 1:
        w = int(round(img_size / 8 * coef) * 8)
    else:
        h = int(round(img_size / 8 / coef) * 8)
    return h, w


def _sample_size(components: Mapping[str, Any], name: str) -> int | None:
    unet = components.get("unet")
    size = None if unet is None else unet.get("sample_size")
    return size[0] if isinstance(size, (list, tuple)) else size


def _plan(components: Mapping[str, Any], s: Settings, name: str) -> Plan:
    steps, guidance, strength = DEFAULTS[name]
    if strength is None and s.strength is not None:
        variant = name.replace("IF", "IFImg2Img", 1)
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength (image-to-image is "
                          f"{variant}, a folder whose model_index.json names it)")
    s = replace(s, steps=s.steps or steps, guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale,
                strength=s.strength if s.strength is not None else strength)
    size = _sample_size(components, name)
    notes: list[str] = []
    if name in RESIZED:
        if size is None:
            raise FlopcalcError(f"{name} resizes its input image to unet.sample_size, which this UNet config leaves "
                                "null (the real pipeline fails too)")
        if s.symbolic:
            raise FlopcalcError(f"{name} has no closed-form law in H and W: its resize rounds the long side to a "
                                "multiple of 8 (round-half-even); use the numeric estimate")
        image_h, image_w = s.height or size, s.width or size
        height, width = if_resize(image_h, image_w, size)
        notes.append(f"the input image ({image_h}×{image_w}) is resized to {height}×{width} (short side "
                     f"unet.sample_size {size}, long side rounded to a multiple of 8), as the pipeline's resize does "
                     "with a PIL image; --height/--width give the input image's size")
    else:
        if (s.height is None or s.width is None) and size is None:
            raise OptionError(f"{name}: the UNet config sets no sample_size, the pipeline's default size: give "
                              "--height and --width")
        height, width = s.height or size, s.width or size
    s = replace(s, height=height, width=width)
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "unet", s, 1, TEXT_LEN, passes, kept_steps=denoising_steps_floored)
    notes += list(missing_notes(components, ["text_encoder", "unet"]))
    notes.append("pixel-space: the UNet denoises the image itself (no VAE); the safety checker and watermarker "
                 "are not counted")
    if "SuperResolution" in name:
        notes.append("the low-resolution image is upscaled bilinearly (no MACs) and concatenated to the noise every "
                     "step; its noise level is the UNet's class_labels")
    return Plan(name, s, passes, tuple(runs), tuple(notes))


def _is_stage_i(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("addition_embed_type") == "text" and cfg.get("class_embed_type") is None


def _is_stage_ii(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("addition_embed_type") == "text" and cfg.get("class_embed_type") == "timestep"


@register_pipeline("IFPipeline", denoisers=("UNet2DConditionModel",), component="unet", when=_is_stage_i)
def if_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
    """``IFPipeline.__call__`` (pipeline_if.py:549-770): ``unet.sample_size``² (64² for IF-I), 100 steps,
    guidance 7.0; T5 on the prompt and the negative prompt (77 tokens each), the UNet on the doubled batch
    every step."""
    return _plan(components, s, "IFPipeline")


@register_pipeline("IFImg2ImgPipeline")
def if_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``IFImg2ImgPipeline.__call__`` (pipeline_if_img2img.py:668-890): strength 0.7, 80 steps (``get_timesteps``
    keeps ``int(80 · 0.7)`` = 56), guidance 10.0; the image is resized (``resize``) and noised, no encoder."""
    return _plan(components, s, "IFImg2ImgPipeline")


@register_pipeline("IFInpaintingPipeline")
def if_inpainting_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``IFInpaintingPipeline.__call__`` (pipeline_if_inpainting.py): strength 1.0, 50 steps, guidance 7.0; the
    image and the mask resized (``resize``); the mask blends the step's output with the noised image (no MACs)."""
    return _plan(components, s, "IFInpaintingPipeline")


@register_pipeline("IFSuperResolutionPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=_is_stage_ii)
def if_super_resolution_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``IFSuperResolutionPipeline.__call__`` (pipeline_if_superresolution.py:617-840): ``unet.sample_size``²,
    50 steps, guidance 4.0, noise level 250; the UNet on [noise, upscaled image] (``in_channels`` 6) with the
    noise level as ``class_labels``."""
    return _plan(components, s, "IFSuperResolutionPipeline")


@register_pipeline("IFImg2ImgSuperResolutionPipeline")
def if_img2img_super_resolution_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                         index: Mapping[str, Any] | None = None) -> Plan:
    """``IFImg2ImgSuperResolutionPipeline.__call__`` (pipeline_if_img2img_superresolution.py): strength 0.8, 50
    steps (40 run), guidance 4.0; the size is the ``original_image``'s after ``resize``."""
    return _plan(components, s, "IFImg2ImgSuperResolutionPipeline")


@register_pipeline("IFInpaintingSuperResolutionPipeline")
def if_inpainting_super_resolution_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                            index: Mapping[str, Any] | None = None) -> Plan:
    """``IFInpaintingSuperResolutionPipeline.__call__`` (pipeline_if_inpainting_superresolution.py): strength
    0.8, 100 steps (80 run), guidance 4.0, noise level 0; the size is the ``original_image``'s after ``resize``."""
    return _plan(components, s, "IFInpaintingSuperResolutionPipeline")
