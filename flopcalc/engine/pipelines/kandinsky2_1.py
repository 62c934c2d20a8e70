"""Kandinsky 2.1 pipelines (diffusers ``pipelines/kandinsky``): the prior ``KandinskyPriorPipeline`` (``prior``
``PriorTransformer``, ``text_encoder`` ``CLIPTextModelWithProjection``, ``image_encoder``
``CLIPVisionModelWithProjection``: as Kandinsky 2.2's, :mod:`.kandinsky2_2`), the decoders ``KandinskyPipeline`` /
``KandinskyImg2ImgPipeline`` / ``KandinskyInpaintPipeline`` and the combined pipelines that run the prior, then the
decoder (the prior's components prefixed ``prior_``).

Unlike 2.2, the 2.1 decoder also reads the text: ``_encode_prompt`` runs ``text_encoder`` (``MultilingualCLIP``, an
XLM-R) on the prompts, and under guidance on the negative prompts ("" by default), padded to 77 tokens; the UNet
(``addition_embed_type: text_image``, ``encoder_hid_dim_type: text_image_proj``) attends to 10 image-embedding
vectors and the 77 projected text states, and adds the pooled text and image embeddings to its time embedding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.vq_model import scale_factor
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
)
from flopcalc.engine.pipelines.kandinsky2_2 import (
    LATENT_MULTIPLE,
    _no_strength,
    _prior_plan,
    _prior_runs,
    _run,
)
from flopcalc.engine.pipelines.kandinsky3 import downscale_height_and_width
from flopcalc.engine.registry import RunShape

#: ``_encode_prompt``: ``padding="max_length"``, ``max_length=77``.
TEXT_LEN = 77
DEFAULT_SIZE, DEFAULT_STEPS, DEFAULT_STRENGTH = 512, 100, 0.3
#: Guidance defaults: 4.0, but 7.0 for ``KandinskyImg2ImgPipeline`` alone (its combined pipeline passes 4.0).
GUIDANCE = {"KandinskyImg2ImgPipeline": 7.0}


def _decoder(components, s: Settings, name: str, images: int, inpaint: bool) -> tuple[Settings, list, list[str]]:
    """The decoders' ``__call__``: text encoding, then as 2.2's (``get_new_h_w`` rounds the text-to-image size up to a
    multiple of 64; image-to-image and inpainting ``movq.encode`` the image at height × width)."""
    s = replace(s, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=GUIDANCE.get(name, 4.0) if s.guidance_scale is None else s.guidance_scale)
    notes: list[str] = []
    height, width = s.height or DEFAULT_SIZE, s.width or DEFAULT_SIZE
    f = scale_factor(components["movq"]) if "movq" in components else 8
    encoded = s.strength is not None or inpaint
    if not encoded:
        latent_h, latent_w = downscale_height_and_width(height, width, f)
        image_h, image_w = latent_h * f, latent_w * f
        if (image_h, image_w) != (height, width):
            notes.append(f"{height}×{width} is generated at {image_h}×{image_w}: {name} rounds the size up to a "
                         f"multiple of {f * f} (get_new_h_w)")
    else:
        if not inpaint and height != width and not s.symbolic:
            # pipeline_kandinsky_img2img.py:413: image_processor.preprocess(i, width, height) passes them as (height,
            # width): the encoded latent is transposed against the noise's and prepare_latents refuses it
            raise OptionError(f"{name}: a non-square size ({height}×{width}) fails in the real pipeline (its "
                              "preprocess(image, width, height) swaps the sides of the encoded image); use height == "
                              "width")
        check_divisible(height, width, f * LATENT_MULTIPLE, f"{name}: the input image (resized to height × width, "
                        "MoVQ-encoded; the UNet's ResNet samplers need a latent divisible by 8)")
        image_h, image_w, latent_h, latent_w = height, width, height // f, width // f
    steps = denoising_steps_floored(s.steps, s.strength) if s.strength is not None else s.steps
    s = replace(s, height=image_h, width=image_w)
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = _run(components, "text_encoder", "forward", "text_encoder", RunShape(seq_len=TEXT_LEN),
                s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += _run(components, "unet", "forward", "denoiser",
                 RunShape(latent_height=latent_h, latent_width=latent_w, text_len=TEXT_LEN),
                 steps * passes * images, f"{steps} steps × {passes} pass(es) × {images} image(s)")
    if encoded:
        runs += _run(components, "movq", "encode", "vae_encoder", RunShape(height=image_h, width=image_w),
                     s.batch_size, f"{s.batch_size} input image(s)" + (" (masked)" if inpaint else ""))
    runs += _run(components, "movq", "decode", "vae_decoder", RunShape(latent_height=latent_h, latent_width=latent_w),
                 images, f"{images} image(s)")
    notes.append(f"the UNet attends to 10 image-embedding vectors and the {TEXT_LEN} projected text states "
                 "(text_image_proj)")
    return s, runs, notes


def _decoder_plan(components, s: Settings, name: str, inpaint: bool = False) -> Plan:
    images = s.batch_size * s.num_images_per_prompt
    s, runs, notes = _decoder(components, s, name, images, inpaint)
    notes += list(missing_notes(components, ["text_encoder", "unet", "movq"]))
    notes.append("the image embeddings come from KandinskyPriorPipeline (not counted here; the combined pipeline "
                 "counts both)")
    return Plan(name, s, cfg_passes(s, s.guidance_scale > 1), tuple(runs), tuple(notes))


def _combined_plan(components, s: Settings, name: str, inpaint: bool = False) -> Plan:
    prior_runs, notes, embeds = _prior_runs(components, s, "prior_")
    images = embeds // (2 if s.negative_prompt else 1)
    s, runs, decoder_notes = _decoder(components, s, name, images, inpaint)
    notes += decoder_notes + list(missing_notes(components, ["prior_text_encoder", "prior_prior", "text_encoder",
                                                             "unet", "movq"]))
    return Plan(name, s, cfg_passes(s, s.guidance_scale > 1), tuple(prior_runs + runs), tuple(notes))


def _text_image(cfg: Mapping[str, Any]) -> bool:
    return cfg.get("addition_embed_type") == "text_image"


@register_pipeline("KandinskyPriorPipeline")
def kandinsky_prior_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyPriorPipeline.__call__`` (pipeline_kandinsky_prior.py:400-545): 25 steps, guidance 4.0, as Kandinsky
    2.2's prior (the prompts and negative prompts through one batch, ``get_zero_embed`` without a negative prompt)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to KandinskyPriorPipeline: Kandinsky 2.1 has no Emb2Emb prior "
                          "(KandinskyV22PriorEmb2EmbPipeline is 2.2's)")
    return _prior_plan(components, s, "KandinskyPriorPipeline")


@register_pipeline("KandinskyPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: _text_image(cfg) and cfg.get("in_channels") != 9)
def kandinsky_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyPipeline.__call__`` (pipeline_kandinsky.py:240-410): 512², 100 steps, guidance 4.0. Given
    ``strength``, planned as ``KandinskyImg2ImgPipeline``."""
    return _decoder_plan(components, s, "KandinskyPipeline" if s.strength is None else "KandinskyImg2ImgPipeline")


@register_pipeline("KandinskyImg2ImgPipeline")
def kandinsky_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyImg2ImgPipeline.__call__`` (pipeline_kandinsky_img2img.py): strength 0.3, 100 steps (``int(100 ·
    0.3)`` = 30 run), guidance 7.0, 512²; the image ``movq.encode``-d once per prompt."""
    return _decoder_plan(components, replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength),
                         "KandinskyImg2ImgPipeline")


@register_pipeline("KandinskyInpaintPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: _text_image(cfg) and cfg.get("in_channels") == 9)
def kandinsky_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyInpaintPipeline.__call__`` (pipeline_kandinsky_inpaint.py): 512², 100 steps, guidance 4.0; the
    masked image ``movq.encode``-d; the 9-channel UNet takes [latent, masked-image latent, mask] every step."""
    _no_strength(s, "KandinskyInpaintPipeline")
    return _decoder_plan(components, s, "KandinskyInpaintPipeline", inpaint=True)


@register_pipeline("KandinskyCombinedPipeline")
def kandinsky_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyCombinedPipeline.__call__`` (pipeline_kandinsky_combined.py:210-320; what
    ``AutoPipelineForText2Image`` loads for kandinsky-community/kandinsky-2-1): the prior (25 steps, guidance 4.0),
    then ``KandinskyPipeline`` (512², 100 steps, guidance 4.0). Given ``strength``, planned as
    ``KandinskyImg2ImgCombinedPipeline``."""
    return _combined_plan(components, s, "KandinskyCombinedPipeline" if s.strength is None
                          else "KandinskyImg2ImgCombinedPipeline")


@register_pipeline("KandinskyImg2ImgCombinedPipeline")
def kandinsky_img2img_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                        index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyImg2ImgCombinedPipeline.__call__``: the prior, then ``KandinskyImg2ImgPipeline`` with the combined
    pipeline's defaults (strength 0.3, 100 steps, guidance 4.0)."""
    return _combined_plan(components, replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength,
                                              guidance_scale=4.0 if s.guidance_scale is None else s.guidance_scale),
                          "KandinskyImg2ImgCombinedPipeline")


@register_pipeline("KandinskyInpaintCombinedPipeline")
def kandinsky_inpaint_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                        index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyInpaintCombinedPipeline.__call__``: the prior, then ``KandinskyInpaintPipeline`` (512², 100 steps,
    guidance 4.0) on the 9-channel UNet."""
    _no_strength(s, "KandinskyInpaintCombinedPipeline")
    return _combined_plan(components, s, "KandinskyInpaintCombinedPipeline", inpaint=True)
