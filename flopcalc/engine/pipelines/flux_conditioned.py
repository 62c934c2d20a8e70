"""FLUX.1 pipelines whose extra conditioning is VAE-encoded and concatenated to the latent on
channels, or blended with it: Fill (``pipeline_flux_fill.py``), inpainting
(``pipeline_flux_inpaint.py``) and structural control (``pipeline_flux_control.py``,
``pipeline_flux_control_img2img.py``, ``pipeline_flux_control_inpaint.py``), all in diffusers
``pipelines/flux``.

The transformer's own ``in_channels`` says how wide the concatenation is (FLUX.1-Fill: 384 =
64 latent + 64 masked-image latent + 256 mask; FLUX.1-Depth/Canny: 128 = 64 + 64 control latent):
the plan only counts how often the VAE encoder runs and which steps run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    register_pipeline,
)
from flopcalc.engine.pipelines.flux import flux_pipeline
from flopcalc.engine.registry import RunShape


def encode_run(components: Mapping[str, Any], s: Settings, runs: int, why: str) -> list[ComponentRun]:
    """``vae.encode`` of ``runs`` images at the plan's size (batch-1 forwards)."""
    if "vae" not in components:
        return []
    return [ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                         RunShape(height=s.height, width=s.width), runs, why)]


def with_encodes(base: Plan, pipeline: str, encodes: list[ComponentRun], notes: list[str]) -> Plan:
    """``base`` (a FluxPipeline plan) renamed, its VAE encodes replaced by ``encodes`` (before the
    denoiser, where the pipelines make them)."""
    runs = [r for r in base.runs if r.role != "vae_encoder"]
    at = next((i for i, r in enumerate(runs) if r.role != "text_encoder"), len(runs))
    return replace(base, pipeline=pipeline, runs=tuple(runs[:at] + encodes + runs[at:]),
                   notes=base.notes + tuple(notes))


def no_negative_prompt(pipeline: str, s: Settings) -> list[str]:
    return [f"{pipeline} takes no negative prompt (guidance is embedded): it is ignored"] if s.negative_prompt else []


def _refuse_partial_strength(s: Settings, pipeline: str, sibling: str) -> None:
    if s.strength is not None and s.strength < 1:
        raise OptionError(f"--strength does not apply to {pipeline}: its __call__ takes no strength (every step "
                          f"runs), only 1 means that; {sibling} takes one")


@register_pipeline("FluxFillPipeline", options=("max_sequence_length",))
def flux_fill_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxFillPipeline.__call__``: 1024², 50 steps, ``guidance_scale`` 30 embedded (one pass; no
    negative prompt, no true CFG), ``strength`` 1.0 (``get_timesteps``: the last ``strength`` of the
    schedule runs), T5 on ``max_sequence_length`` (512) tokens, CLIP on 77. The VAE encoder runs
    twice per input image, at the output size: the image (``prepare_latents`` → ``_encode_vae_image``,
    even at strength 1, for ``scale_noise``) and the masked image (``prepare_mask_latents``); the
    masked-image latent and the mask folded 8×8 join the latent on channels
    (``torch.cat((latents, masked_image_latents), dim=2)``), which the transformer's ``in_channels``
    holds."""
    s = replace(s, strength=1.0 if s.strength is None else s.strength, steps=s.steps or 50,
                guidance_scale=30.0 if s.guidance_scale is None else s.guidance_scale)
    base = flux_pipeline(components, replace(s, negative_prompt=False), index=index)
    base = replace(base, settings=replace(base.settings, true_cfg_scale=None, negative_prompt=s.negative_prompt))
    encodes = encode_run(components, base.settings, 2 * s.batch_size,
                          f"{s.batch_size} input image(s) × 2 (the image and the masked image)")
    return with_encodes(base, "FluxFillPipeline", encodes, no_negative_prompt("FluxFillPipeline", s))


@register_pipeline("FluxInpaintPipeline", guidance="separate", options=("true_cfg_scale", "max_sequence_length"))
def flux_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxInpaintPipeline.__call__``: FluxPipeline's plan (1024², true CFG only with
    ``true_cfg_scale > 1`` and a negative prompt) with the image-to-image defaults ``strength`` 0.6,
    28 steps, ``guidance_scale`` 7.0; the transformer sees the plain latent (the mask is blended
    outside it). The VAE encoder runs twice per input image at the output size: the image
    (``prepare_latents``) and the masked image (``prepare_mask_latents``)."""
    s = replace(s, strength=0.6 if s.strength is None else s.strength, steps=s.steps or 28,
                guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale)
    base = flux_pipeline(components, s, index=index)
    encodes = encode_run(components, base.settings, 2 * s.batch_size,
                          f"{s.batch_size} input image(s) × 2 (the image and the masked image)")
    return with_encodes(base, "FluxInpaintPipeline", encodes, [])


@register_pipeline("FluxControlPipeline", options=("max_sequence_length",))
def flux_control_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxControlPipeline.__call__`` (FLUX.1-Depth/Canny): 1024², 28 steps, ``guidance_scale`` 3.5
    embedded (one pass; no negative prompt, no true CFG), T5 on 512 tokens. The control image is
    repeated to every image of the batch *before* ``vae.encode`` (``prepare_image``), so the encoder
    runs once per generated image at the output size; its packed latent joins the latent on channels
    (``torch.cat([latents, control_image], dim=2)``). ``strength`` does not apply (only 1)."""
    _refuse_partial_strength(s, "FluxControlPipeline", "FluxControlImg2ImgPipeline")
    return _control(components, replace(s, strength=None), index, "FluxControlPipeline", s.strength)


@register_pipeline("FluxControlImg2ImgPipeline", options=("max_sequence_length",))
def flux_control_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxControlImg2ImgPipeline.__call__``: FluxControlPipeline with ``strength`` 0.6,
    ``guidance_scale`` 7.0: the input image is VAE-encoded once per prompt as well
    (``prepare_latents``) and the last ``strength`` of the 28 steps run."""
    s = replace(s, strength=0.6 if s.strength is None else s.strength,
                guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale)
    return _control(components, s, index, "FluxControlImg2ImgPipeline", s.strength, 1, "input image(s)")


@register_pipeline("FluxControlInpaintPipeline", options=("max_sequence_length",))
def flux_control_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxControlInpaintPipeline.__call__`` (``pipeline_flux_control_inpaint.py``): the image-to-image
    sibling's defaults (``strength`` 0.6, 28 steps, ``guidance_scale`` 7.0), the masked image
    VAE-encoded as well (``prepare_mask_latents``; the mask only blends outside the transformer):
    two encodes per input image beside the control images'."""
    s = replace(s, strength=0.6 if s.strength is None else s.strength,
                guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale)
    return _control(components, s, index, "FluxControlInpaintPipeline", s.strength, 2, "input and masked image(s)")


def _control(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
             pipeline: str, strength: float | None, encodes_per_prompt: int = 0, what: str = "") -> Plan:
    """FluxPipeline's plan without true CFG, with the control image encoded once per image and
    ``encodes_per_prompt`` images (``what``) per prompt."""
    base = flux_pipeline(components, replace(s, negative_prompt=False), index=index)
    base = replace(base, settings=replace(base.settings, true_cfg_scale=None, negative_prompt=s.negative_prompt,
                                          strength=strength))
    images = s.batch_size * s.num_images_per_prompt
    inputs = encodes_per_prompt * s.batch_size
    encodes = encode_run(components, base.settings, images + inputs,
                         f"{images} control image(s)" + (f" + {inputs} {what}" if inputs else ""))
    return with_encodes(base, pipeline, encodes, no_negative_prompt(pipeline, s))
