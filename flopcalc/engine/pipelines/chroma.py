"""Chroma pipelines (diffusers ``pipelines/chroma``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``ChromaPipeline.default_sample_size``: 128 latent pixels → 1024² with the 8× VAE.
DEFAULT_SAMPLE_SIZE = 128
#: ``check_inputs``: ``max_sequence_length`` cannot be greater than 512.
MAX_SEQUENCE_LENGTH = 512
#: ``ChromaImg2ImgPipeline.__call__``'s default ``strength``.
IMG2IMG_STRENGTH = 0.9


#: ``true_cfg_scale``: ChromaPipeline's own reason for refusing it.
NO_TRUE_CFG = {"true_cfg_scale": "its __call__ takes no true_cfg_scale: guidance_scale > 1 already runs "
                                 "classifier-free guidance as a second forward on the negative prompt"}
#: The optional options ChromaPipeline applies.
OPTIONS = ("max_sequence_length",)


@register_pipeline("ChromaPipeline", guidance="separate", denoisers=("ChromaTransformer2DModel",), options=OPTIONS, refuses=NO_TRUE_CFG)
def chroma_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                    index: Mapping[str, Any] | None = None) -> Plan:
    """``ChromaPipeline.__call__`` (diffusers ``pipelines/chroma/pipeline_chroma.py``): 1024² default
    (``default_sample_size`` 128 × ``vae_scale_factor``), 35 steps, ``guidance_scale`` 5.0. Chroma is
    not guidance-distilled: classifier-free guidance (``guidance_scale > 1``) runs a second, separate
    transformer forward per step on the negative prompt, which is encoded too ("" when none is given,
    ``encode_prompt``). T5 runs on ``max_sequence_length`` (512, at most 512) tokens, padded
    (``padding="max_length"``), and the transformer sees them all: the attention mask only masks
    padding, which never changes the dense work. Latents are packed 2×2, so each side must divide by
    ``vae_scale_factor · 2`` (diffusers floors other sizes with a warning)."""
    f = vae_scale_factor(components)
    s = replace(
        s,
        height=s.height or DEFAULT_SAMPLE_SIZE * f,
        width=s.width or DEFAULT_SAMPLE_SIZE * f,
        steps=s.steps or 35,
        guidance_scale=5.0 if s.guidance_scale is None else s.guidance_scale,
        max_sequence_length=s.max_sequence_length or 512,
    )
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH} for Chroma, "
                            f"got {s.max_sequence_length}")
    check_divisible(s.height, s.width, f * 2, "Chroma height and width (packed 2×2 latents)")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale <= 1 (as in ChromaPipeline)")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("ChromaPipeline", s, passes, tuple(runs), tuple(notes))


@register_pipeline("ChromaImg2ImgPipeline", guidance="separate", options=OPTIONS, refuses=NO_TRUE_CFG)
def chroma_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``ChromaImg2ImgPipeline.__call__`` (``pipeline_chroma_img2img.py``): the text-to-image defaults
    (35 steps, ``guidance_scale`` 5.0) plus ``strength`` 0.9: the input image is VAE-encoded once per
    prompt and only the last ``strength`` of the schedule runs (``get_timesteps``)."""
    s = replace(s, strength=IMG2IMG_STRENGTH if s.strength is None else s.strength)
    return replace(chroma_pipeline(components, s, index=index), pipeline="ChromaImg2ImgPipeline")


#: ``ChromaInpaintPipeline.__call__`` defaults (pipeline_chroma_inpainting.py:766-797).
INPAINT_STRENGTH, INPAINT_STEPS, INPAINT_GUIDANCE, INPAINT_MAX_SEQUENCE_LENGTH = 0.6, 28, 7.0, 256
#: ``true_cfg_scale``: ChromaInpaintPipeline's own reason for refusing it.
INPAINT_NO_TRUE_CFG = {"true_cfg_scale": "its __call__ takes a true_cfg_scale but never reads it: guidance_scale > 1 "
                                         "already runs classifier-free guidance as a second forward on the negative "
                                         "prompt"}


@register_pipeline("ChromaInpaintPipeline", options=OPTIONS, refuses=INPAINT_NO_TRUE_CFG, guidance="separate")
def chroma_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``ChromaInpaintPipeline.__call__`` (``pipeline_chroma_inpainting.py:766-1201``): ChromaPipeline's plan
    with the inpainting defaults ``strength`` 0.6, 28 steps, ``guidance_scale`` 7.0 and ``max_sequence_length``
    256 (lines 777-795; at most 512, ``check_inputs`` line 553). The size defaults to
    ``default_sample_size · vae_scale_factor`` (1024², lines 913-914; flopcalc takes the input image at the
    output size). CFG (``guidance_scale > 1``, line 762) is a second transformer forward on the negative prompt
    ("" unless given), the transformer seeing the plain packed latent (the mask blends outside it, line 1162).
    The VAE encoder runs twice per input image at the output size: the image (``prepare_latents`` →
    ``_encode_vae_image``, line 625) and the masked image (``prepare_mask_latents``, line 682), each before the
    batch is repeated for ``num_images_per_prompt``; only the last ``strength`` of the schedule runs
    (``get_timesteps``, lines 462-470)."""
    from flopcalc.engine.pipelines.flux_conditioned import encode_run, with_encodes

    s = replace(s, strength=INPAINT_STRENGTH if s.strength is None else s.strength,
                steps=s.steps or INPAINT_STEPS,
                guidance_scale=INPAINT_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or INPAINT_MAX_SEQUENCE_LENGTH)
    base = chroma_pipeline(components, s, index=index)
    encodes = encode_run(components, base.settings, 2 * s.batch_size,
                         f"{s.batch_size} input image(s) × 2 (the image and the masked image)")
    return with_encodes(base, "ChromaInpaintPipeline", encodes, [INPAINT_GUIDANCE_EMBEDS_NOTE])


#: diffusers 0.42.1's inpainting call reads a key Chroma's transformer config does not hold.
INPAINT_GUIDANCE_EMBEDS_NOTE = (
    "diffusers 0.42.1's ChromaInpaintPipeline reads transformer.config.guidance_embeds "
    "(pipeline_chroma_inpainting.py:1060), which ChromaTransformer2DModel's config does not hold: the stock call "
    "raises AttributeError unless the key is registered (False: Chroma embeds no guidance); counted as the call "
    "then runs")
