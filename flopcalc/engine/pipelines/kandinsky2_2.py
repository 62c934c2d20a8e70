"""Kandinsky 2.2 pipelines (diffusers ``pipelines/kandinsky2_2``): the prior
``KandinskyV22PriorPipeline`` (``prior`` ``PriorTransformer``, ``text_encoder``
``CLIPTextModelWithProjection``, ``image_encoder`` ``CLIPVisionModelWithProjection``), the decoders
``KandinskyV22Pipeline`` / ``KandinskyV22Img2ImgPipeline`` (``unet`` ``UNet2DConditionModel``
conditioned on image embeddings, ``movq`` ``VQModel``), and the combined pipelines that run the prior,
then the decoder (``KandinskyV22CombinedPipeline``, ``KandinskyV22Img2ImgCombinedPipeline``: the
prior's components prefixed ``prior_``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.unet_2d_condition import IMAGE_PROJECTION_TOKENS
from flopcalc.engine.architectures.vq_model import scale_factor
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
)
from flopcalc.engine.pipelines.kandinsky3 import downscale_height_and_width
from flopcalc.engine.registry import RunShape

#: ``KandinskyV22PriorPipeline.__call__`` defaults (pipeline_kandinsky2_2_prior.py); the combined
#: pipelines pass ``prior_num_inference_steps`` 25 and ``prior_guidance_scale`` 4.0 (the same).
PRIOR_STEPS = 25
PRIOR_GUIDANCE = 4.0
#: ``_encode_prompt``: ``padding="max_length"``, ``tokenizer.model_max_length`` (77, CLIP): the text
#: encoder's tokens, and the text states the prior reads (its ``num_embeddings``; + 4 tokens of its own).
TEXT_LEN = 77
#: ``KandinskyV22Pipeline`` / ``KandinskyV22Img2ImgPipeline.__call__`` defaults.
DEFAULT_SIZE = 512
DEFAULT_STEPS = 100
DEFAULT_GUIDANCE = 4.0
DEFAULT_STRENGTH = 0.3
#: The decoder UNet's three 2× levels: the latent must divide by 8 (``downscale_height_and_width``
#: rounds the text-to-image size up to a multiple of 64 px).
LATENT_MULTIPLE = 8


def _run(components, name: str, call: str, role: str, shape: RunShape, runs, why: str) -> list[ComponentRun]:
    if name not in components:
        return []
    return [ComponentRun(name, component_class(components, name) or "?", call, role, shape, runs, why)]


def _prior_runs(components, s: Settings, prefix: str) -> tuple[list[ComponentRun], list[str], int]:
    """``KandinskyV22PriorPipeline.__call__`` at its defaults (25 steps, guidance 4.0): with a
    negative prompt the prompts *and* the negative prompts run through the prior as one batch
    (``prompt = prompt + negative_prompt``); ``_encode_prompt`` runs the text encoder on those
    prompts and, under guidance, again on the unconditional ones ("" or the negative prompts);
    the prior runs ``steps × passes`` on every embedding (``num_images_per_prompt`` of each);
    without a negative prompt ``get_zero_embed`` runs the image encoder once on a zero image."""
    p = prefix
    steps = PRIOR_STEPS
    # the prior's own guidance (prior_guidance_scale 4.0): two passes whatever the decoder's (not the law's P)
    passes = 2 if PRIOR_GUIDANCE > 1 else 1
    prompts = s.batch_size * (2 if s.negative_prompt else 1)
    embeds = prompts * s.num_images_per_prompt
    runs = _run(components, f"{p}text_encoder", "forward", "text_encoder", RunShape(seq_len=TEXT_LEN),
                prompts * (2 if PRIOR_GUIDANCE > 1 else 1),
                f"{prompts} prompt(s)" + (" + negative" if s.negative_prompt else "") + " × (cond + uncond)")
    runs += _run(components, f"{p}prior", "forward", "denoiser", RunShape(seq_len=TEXT_LEN), steps * passes * embeds,
                 f"{steps} prior steps × {passes} pass(es) × {embeds} embedding(s)")
    if not s.negative_prompt:
        encoder = components.get(f"{p}image_encoder")
        size = encoder["image_size"] if encoder is not None else 224
        runs += _run(components, f"{p}image_encoder", "forward", "image_encoder", RunShape(height=size, width=size), 1,
                     "get_zero_embed: 1 zero image (the negative image embedding)")
    notes = [f"the prior runs at its defaults ({PRIOR_STEPS} steps, guidance {PRIOR_GUIDANCE}); "
             "--steps/--guidance set the decoder's"]
    return runs, notes, embeds


def _decoder(components, s: Settings, name: str, images: int,
             inpaint: bool = False) -> tuple[Settings, list[ComponentRun], list[str]]:
    """The decoders' ``__call__`` on ``images`` image embeddings: ``KandinskyV22Pipeline`` /
    ``KandinskyV22ControlnetPipeline`` (no ``strength``: the latent ``downscale_height_and_width``),
    ``KandinskyV22Img2ImgPipeline`` / ``KandinskyV22ControlnetImg2ImgPipeline`` (``strength``: the input
    image ``movq.encode``-d at height × width, ``get_timesteps`` floored) and
    ``KandinskyV22InpaintPipeline`` (``inpaint``: the masked image ``movq.encode``-d at height × width,
    every step run on the latent concatenated with the masked-image latent and the mask)."""
    s = replace(s, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    notes: list[str] = []
    height, width = s.height or DEFAULT_SIZE, s.width or DEFAULT_SIZE
    f = scale_factor(components["movq"]) if "movq" in components else 8
    encoded = s.strength is not None or inpaint
    if not encoded:
        latent_h, latent_w = downscale_height_and_width(height, width, f)
        image_h, image_w = latent_h * f, latent_w * f
        if (image_h, image_w) != (height, width):
            notes.append(f"{height}×{width} is generated at {image_h}×{image_w}: {name} rounds the size up to a "
                         f"multiple of {f * f} (downscale_height_and_width)")
    else:
        # the image is resized to height × width and encoded; its latent must be the 8-divisible latent the
        # UNet's ResNet samplers take (inpainting: the one downscale_height_and_width makes for the noise)
        check_divisible(height, width, f * LATENT_MULTIPLE, f"{name}: the input image (resized to height × width, "
                        "MoVQ-encoded; the UNet's ResNet samplers need a latent divisible by 8)")
        image_h, image_w, latent_h, latent_w = height, width, height // f, width // f
    steps = denoising_steps_floored(s.steps, s.strength) if s.strength is not None else s.steps
    s = replace(s, height=image_h, width=image_w)
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = _run(components, "unet", "forward", "denoiser",
                RunShape(latent_height=latent_h, latent_width=latent_w, text_len=IMAGE_PROJECTION_TOKENS),
                steps * passes * images, f"{steps} steps × {passes} pass(es) × {images} image(s)")
    if encoded:
        runs += _run(components, "movq", "encode", "vae_encoder", RunShape(height=image_h, width=image_w), s.batch_size,
                     f"{s.batch_size} input image(s)" + (" (masked)" if inpaint else ""))
    runs += _run(components, "movq", "decode", "vae_decoder", RunShape(latent_height=latent_h, latent_width=latent_w),
                 images, f"{images} image(s)")
    notes.append(f"the UNet attends to the image embedding projected to {IMAGE_PROJECTION_TOKENS} vectors "
                 "(encoder_hid_proj), not to text")
    unet = components.get("unet")
    if unet is not None and unet["addition_embed_type"] == "image_hint":
        notes.append(f"the control hint is taken at the generated size ({image_h}×{image_w}): input_hint_block "
                     "brings it to the latent it is concatenated to")
    return s, runs, notes


def _no_strength(s: Settings, name: str) -> None:
    """The inpainting pipelines' ``__call__`` take no ``strength``: every step runs."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength (every step runs "
                          "on the latent concatenated with the masked image and the mask)")


def _decoder_plan(components, s: Settings, name: str, inpaint: bool = False) -> Plan:
    images = s.batch_size * s.num_images_per_prompt
    s, runs, notes = _decoder(components, s, name, images, inpaint)
    notes += list(missing_notes(components, ["unet", "movq"]))
    notes.append("the image embeddings come from KandinskyV22PriorPipeline (not counted here; the combined "
                 "pipeline counts both)")
    return Plan(name, s, cfg_passes(s, s.guidance_scale > 1), tuple(runs), tuple(notes))


def _combined_plan(components, s: Settings, name: str, inpaint: bool = False) -> Plan:
    prior_runs, notes, embeds = _prior_runs(components, s, "prior_")
    # the prior returns one embedding per image (the negative prompts' half split off as negatives)
    images = embeds // (2 if s.negative_prompt else 1)
    s, runs, decoder_notes = _decoder(components, s, name, images, inpaint)
    notes += decoder_notes + list(missing_notes(components, ["prior_text_encoder", "prior_prior", "unet", "movq"]))
    return Plan(name, s, cfg_passes(s, s.guidance_scale > 1), tuple(prior_runs + runs), tuple(notes))


def _prior_plan(components, s: Settings, name: str) -> Plan:
    """``KandinskyV22PriorPipeline`` / ``KandinskyV22PriorEmb2EmbPipeline.__call__`` (``strength`` set):
    the text encoder on the prompts (and the negative prompts, which join the batch), and under guidance
    on the unconditional ones; the prior ``steps × passes`` per embedding (Emb2Emb: ``get_timesteps``
    floored, after ``_encode_image`` ran the image encoder on the input images, one per prompt); without
    a negative prompt ``get_zero_embed`` runs the image encoder once more on a zero image."""
    s = replace(s, steps=s.steps or PRIOR_STEPS,
                guidance_scale=PRIOR_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    passes = cfg_passes(s, s.guidance_scale > 1)
    prompts = s.batch_size * (2 if s.negative_prompt else 1)
    embeds = prompts * s.num_images_per_prompt
    steps = s.steps if s.strength is None else denoising_steps_floored(s.steps, s.strength)
    runs = _run(components, "text_encoder", "forward", "text_encoder", RunShape(seq_len=TEXT_LEN),
                prompts * (2 if s.guidance_scale > 1 else 1),
                f"{prompts} prompt(s)" + (" + negative" if s.negative_prompt else "")
                + (" × (cond + uncond)" if s.guidance_scale > 1 else ""))
    runs += _run(components, "prior", "forward", "denoiser", RunShape(seq_len=TEXT_LEN), steps * passes * embeds,
                 f"{steps} steps × {passes} pass(es) × {embeds} embedding(s)")
    encoder = components.get("image_encoder")
    size = encoder["image_size"] if encoder is not None else 224
    images = (s.batch_size if s.strength is not None else 0) + (0 if s.negative_prompt else 1)
    if images:
        why = " + ".join(([f"_encode_image: {s.batch_size} input image(s)"] if s.strength is not None else [])
                         + ([] if s.negative_prompt else ["get_zero_embed: 1 zero image (the negative embedding)"]))
        runs += _run(components, "image_encoder", "forward", "image_encoder", RunShape(height=size, width=size),
                     images, why)
    notes = list(missing_notes(components, ["text_encoder", "prior", "image_encoder"]))
    if s.height is not None or s.width is not None:
        notes.append("the prior makes image embeddings: the image size does not apply to it")
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("KandinskyV22PriorPipeline", denoisers=("PriorTransformer",), component="prior")
def kandinsky_v22_prior_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22PriorPipeline.__call__`` (pipeline_kandinsky2_2_prior.py): 25 steps, guidance 4.0
    (``--steps``/``--guidance`` set them here); the size does not apply (it makes image embeddings).
    Given ``strength``, planned as ``KandinskyV22PriorEmb2EmbPipeline``."""
    return _prior_plan(components, s, "KandinskyV22PriorPipeline" if s.strength is None
                       else "KandinskyV22PriorEmb2EmbPipeline")


@register_pipeline("KandinskyV22PriorEmb2EmbPipeline")
def kandinsky_v22_prior_emb2emb_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                         index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22PriorEmb2EmbPipeline.__call__`` (pipeline_kandinsky2_2_prior_emb2emb.py): strength
    0.3, 25 steps (``int(25 · 0.3)`` = 7 run), guidance 4.0; the input image (one per prompt) through the
    image encoder at its ``image_size`` (the CLIP image processor's crop)."""
    return _prior_plan(components, replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength),
                       "KandinskyV22PriorEmb2EmbPipeline")


@register_pipeline("KandinskyV22Pipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: cfg.get("addition_embed_type") == "image" and cfg.get("in_channels") != 9)
def kandinsky_v22_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22Pipeline.__call__`` (pipeline_kandinsky2_2.py): 512², 100 steps, guidance 4.0;
    under guidance the UNet runs on [negative, positive] image embeddings (two passes) of the latent
    ``⌈H/64⌉·8 × ⌈W/64⌉·8``; ``movq.decode(..., force_not_quantize=True)`` once per image. Given
    ``strength``, planned as ``KandinskyV22Img2ImgPipeline``."""
    return _decoder_plan(components, s, "KandinskyV22Pipeline" if s.strength is None else "KandinskyV22Img2ImgPipeline")


@register_pipeline("KandinskyV22InpaintPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: cfg.get("addition_embed_type") == "image" and cfg.get("in_channels") == 9)
def kandinsky_v22_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22InpaintPipeline.__call__`` (pipeline_kandinsky2_2_inpainting.py): 512², 100 steps,
    guidance 4.0; the masked image resized to height × width and ``movq.encode``-d once per prompt; the
    9-channel UNet takes [latent, masked-image latent, mask] every step (the mask is interpolated, no MACs)."""
    _no_strength(s, "KandinskyV22InpaintPipeline")
    return _decoder_plan(components, s, "KandinskyV22InpaintPipeline", inpaint=True)


@register_pipeline("KandinskyV22ControlnetPipeline", denoisers=("UNet2DConditionModel",), component="unet",
                   when=lambda cfg: cfg.get("addition_embed_type") == "image_hint")
def kandinsky_v22_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                      index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22ControlnetPipeline.__call__`` (pipeline_kandinsky2_2_controlnet.py): 512², 100 steps,
    guidance 4.0; the UNet (``addition_embed_type: image_hint``) runs ``input_hint_block`` on the control
    hint (doubled under guidance) inside every forward. Given ``strength``, planned as
    ``KandinskyV22ControlnetImg2ImgPipeline``."""
    return _decoder_plan(components, s, "KandinskyV22ControlnetPipeline" if s.strength is None
                         else "KandinskyV22ControlnetImg2ImgPipeline")


@register_pipeline("KandinskyV22ControlnetImg2ImgPipeline")
def kandinsky_v22_controlnet_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                              index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22ControlnetImg2ImgPipeline.__call__`` (pipeline_kandinsky2_2_controlnet_img2img.py):
    strength 0.3, 100 steps, guidance 4.0, 512²; the input image ``movq.encode``-d, ``int(steps·strength)``
    steps of the hint-conditioned UNet."""
    return _decoder_plan(components, replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength),
                         "KandinskyV22ControlnetImg2ImgPipeline")


@register_pipeline("KandinskyV22Img2ImgPipeline")
def kandinsky_v22_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22Img2ImgPipeline.__call__`` (pipeline_kandinsky2_2_img2img.py): strength 0.3, 100
    steps, guidance 4.0, 512²; the input image resized to height × width and ``movq.encode``-d once per
    prompt; ``get_timesteps`` keeps ``int(steps · strength)`` steps."""
    return _decoder_plan(components, replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength),
                         "KandinskyV22Img2ImgPipeline")


@register_pipeline("KandinskyV22CombinedPipeline")
def kandinsky_v22_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22CombinedPipeline.__call__`` (pipeline_kandinsky2_2_combined.py; what
    ``AutoPipelineForText2Image`` loads for kandinsky-community/kandinsky-2-2-decoder): the prior
    (``prior_num_inference_steps`` 25, ``prior_guidance_scale`` 4.0, with the negative prompt), then
    ``KandinskyV22Pipeline`` (512², 100 steps, guidance 4.0) on its embeddings. Given ``strength``,
    planned as ``KandinskyV22Img2ImgCombinedPipeline``."""
    return _combined_plan(components, s, "KandinskyV22CombinedPipeline" if s.strength is None
                          else "KandinskyV22Img2ImgCombinedPipeline")


@register_pipeline("KandinskyV22InpaintCombinedPipeline")
def kandinsky_v22_inpaint_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                            index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22InpaintCombinedPipeline.__call__``: the prior at its defaults, then
    ``KandinskyV22InpaintPipeline`` (512², 100 steps, guidance 4.0) on the 9-channel inpainting UNet."""
    _no_strength(s, "KandinskyV22InpaintCombinedPipeline")
    return _combined_plan(components, s, "KandinskyV22InpaintCombinedPipeline", inpaint=True)


@register_pipeline("KandinskyV22Img2ImgCombinedPipeline")
def kandinsky_v22_img2img_combined_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                            index: Mapping[str, Any] | None = None) -> Plan:
    """``KandinskyV22Img2ImgCombinedPipeline.__call__``: the prior at its defaults, then
    ``KandinskyV22Img2ImgPipeline`` (strength 0.3, 100 steps, guidance 4.0, 512²)."""
    return _combined_plan(components, replace(s, strength=DEFAULT_STRENGTH if s.strength is None else s.strength),
                          "KandinskyV22Img2ImgCombinedPipeline")
