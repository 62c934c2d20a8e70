"""InstructPix2Pix (diffusers ``pipelines/stable_diffusion/pipeline_stable_diffusion_instruct_pix2pix.py``,
``pipelines/stable_diffusion_xl/pipeline_stable_diffusion_xl_instruct_pix2pix.py``): an image edited by
an instruction, on a UNet whose ``conv_in`` takes 8 channels (the noisy latents and the input image's
latents, concatenated).

* Guidance: ``do_classifier_free_guidance = guidance_scale > 1 and image_guidance_scale >= 1`` (SD :919-921,
  SDXL :768); under it the UNet runs on ``torch.cat([latents] * 3)`` (SD :425, SDXL :882): the text-and-image,
  image-only and unconditional predictions, three passes per step; otherwise one.
* Text: SD encodes the prompt and, under guidance, the negative prompt ("" unless given) once each
  (``_encode_prompt``, the three-way batch reuses the negative embedding); SDXL's ``encode_prompt``
  does as ``StableDiffusionXLPipeline`` does (zero negative embeddings by ``force_zeros_for_empty_prompt``
  when no negative prompt is given, :345-346).
* The input image is VAE-encoded once per prompt (``prepare_image_latents``, SD :877, SDXL :531; the
  unconditional image latents are zeros); every one of the steps runs (no ``strength``).
* Defaults (``__call__``): 100 steps, ``image_guidance_scale`` 1.5, ``guidance_scale`` 7.5 (SD :177-179) /
  5.0 (SDXL :604-607); the size is the input image's (SD: ``image_latents.shape[-2:]``, :383), flopcalc's
  default the UNet's native ``sample_size × vae_scale_factor`` (SDXL's own default, :743-744).
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.pipelines.stable_diffusion import _unet_defaults
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import SCALE, pipeline_option

pipeline_option("image_guidance_scale", kind=SCALE,
                help="InstructPix2Pix: image guidance (three passes at >= 1 with --guidance-scale > 1)",
                refusal="it has no image guidance (InstructPix2Pix's third pass)")

#: ``__call__`` defaults shared by both pipelines.
STEPS, IMAGE_GUIDANCE = 100, 1.5
#: The UNet's input: the latents and the image latents (``num_channels_latents + num_channels_image``).
IN_CHANNELS = 8


def _passes(s: Settings) -> tuple[bool, int]:
    active = s.guidance_scale > 1 and s.image_guidance_scale >= 1
    return active, s.counting.passes(3 if active else 1)


def _check(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings) -> None:
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: its __call__ takes no strength (every step runs on "
                          "the encoded input image)")
    if "unet" in components and components["unet"]["in_channels"] != IN_CHANNELS:
        raise ConfigError(f"{name}: unet in_channels is {components['unet']['in_channels']}; the pipeline takes "
                          f"{IN_CHANNELS} (latents + image latents)")


def _encode_runs(components: Mapping[str, Mapping[str, Any]], s: Settings) -> list[ComponentRun]:
    """The input image encoded once per prompt (``prepare_image_latents``)."""
    if "vae" not in components:
        return []
    return [ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                         RunShape(height=s.height, width=s.width), s.batch_size, f"{s.batch_size} input image(s)")]


@register_pipeline("StableDiffusionInstructPix2PixPipeline", options=("image_guidance_scale",))
def sd_instruct_pix2pix_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionInstructPix2PixPipeline.__call__`` (see the module doc): CLIP on 77 tokens for the
    prompt (and the negative prompt under guidance), the image encoded, 100 steps × 3 passes."""
    name = "StableDiffusionInstructPix2PixPipeline"
    _check(name, components, s)
    s, f = _unet_defaults(components, s, STEPS, 7.5)
    s = s.with_options(image_guidance_scale=IMAGE_GUIDANCE if s.image_guidance_scale is None else s.image_guidance_scale)
    active, passes = _passes(s)
    runs = text_runs(components, [("text_encoder", 77)], s.batch_size * (2 if active else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if active else ""))
    runs += _encode_runs(components, s)
    runs += denoiser_run(components, "unet", s, f, 77, passes)
    runs += image_runs(components, s, f)
    return Plan(name, s, passes, tuple(runs), missing_notes(components, ["text_encoder", "unet", "vae"]))


@register_pipeline("StableDiffusionXLInstructPix2PixPipeline", options=("image_guidance_scale",))
def sdxl_instruct_pix2pix_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionXLInstructPix2PixPipeline.__call__`` (see the module doc): both CLIP encoders on 77
    tokens (the negative prompt only when given, unless ``force_zeros_for_empty_prompt`` is off), the image
    encoded, 100 steps × 3 passes."""
    name = "StableDiffusionXLInstructPix2PixPipeline"
    _check(name, components, s)
    s, f = _unet_defaults(components, s, STEPS, 5.0)
    s = s.with_options(image_guidance_scale=IMAGE_GUIDANCE if s.image_guidance_scale is None else s.image_guidance_scale)
    active, passes = _passes(s)
    force_zeros_for_empty_prompt = (index or {}).get("force_zeros_for_empty_prompt", True)
    encode_negative = active and (s.negative_prompt or not force_zeros_for_empty_prompt)
    runs = text_runs(components, [("text_encoder", 77), ("text_encoder_2", 77)],
                     s.batch_size * (2 if encode_negative else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if encode_negative else ""))
    runs += _encode_runs(components, s)
    runs += denoiser_run(components, "unet", s, f, 77, passes)
    runs += image_runs(components, s, f)
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "unet", "vae"]))
    if active and not encode_negative:
        notes.append("no negative prompt: SDXL uses zero negative embeddings (force_zeros_for_empty_prompt), "
                     "so the text encoders run once per prompt")
    return Plan(name, s, passes, tuple(runs), tuple(notes))
