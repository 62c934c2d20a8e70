"""FLUX.1 with a ControlNet: ``FluxControlNetPipeline`` (diffusers
``pipelines/flux/pipeline_flux_controlnet.py``), the ``FluxControlNetModel`` as a row of its own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    denoising_steps,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.flux import flux_pipeline
from flopcalc.engine.pipelines.flux_conditioned import encode_run, no_negative_prompt, with_encodes
from flopcalc.engine.registry import RunShape


@register_pipeline("FluxControlNetPipeline", guidance="separate", denoisers=("FluxControlNetModel",), component="controlnet",
                   options=("true_cfg_scale", "max_sequence_length"))
def flux_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxControlNetPipeline.__call__``: FluxPipeline's plan (1024², 28 steps, T5 on 512 tokens,
    true CFG only with ``true_cfg_scale > 1`` and a negative prompt) with its own ``guidance_scale``
    default 7.0, and a ``FluxControlNetModel``:

    * the ControlNet runs once per step and image, on the positive prompt only: the negative pass of
      true CFG reuses its residuals (``controlnet_block_samples``), which the transformer adds to
      its blocks' outputs (additions, no counted work); it runs every step (``controlnet_keep`` only
      scales the residuals);
    * InstantX style (no ``input_hint_block``): the control image, repeated to every image before
      encoding (``prepare_image``), is VAE-encoded once per image and packed; XLabs style
      (``conditioning_embedding_channels``): its pixels go to the ControlNet as they are;
    * ControlNet-Union (``num_mode``): one control mode, as the pipeline requires one.

    ``strength`` does not apply (only 1: every step runs)."""
    if s.strength is not None and s.strength < 1:
        raise OptionError("--strength does not apply to FluxControlNetPipeline: its __call__ takes no strength "
                          "(every step runs), only 1 means that")
    s = replace(s, guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale)
    return _with_controlnet(components, replace(s, strength=None), index, "FluxControlNetPipeline", s.strength, 0, "")


@register_pipeline("FluxControlNetImg2ImgPipeline", options=("max_sequence_length",))
def flux_controlnet_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                     index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxControlNetImg2ImgPipeline.__call__`` (``pipeline_flux_controlnet_image_to_image.py``):
    FluxControlNetPipeline without true CFG (no negative prompt), ``strength`` 0.6, 28 steps,
    ``guidance_scale`` 7.0: the input image is VAE-encoded once per prompt too (``prepare_latents``)
    and the ControlNet and the transformer run on the last ``strength`` of the steps."""
    return _without_true_cfg(components, s, index, "FluxControlNetImg2ImgPipeline", 1, "input image(s)")


@register_pipeline("FluxControlNetInpaintPipeline", options=("max_sequence_length",))
def flux_controlnet_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                     index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxControlNetInpaintPipeline.__call__`` (``pipeline_flux_controlnet_inpainting.py``): as the
    image-to-image sibling (``strength`` 0.6, 28 steps, ``guidance_scale`` 7.0, no true CFG), the
    masked image VAE-encoded as well (``prepare_mask_latents``): two encodes per input image."""
    return _without_true_cfg(components, s, index, "FluxControlNetInpaintPipeline", 2, "input and masked image(s)")


def _without_true_cfg(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                      pipeline: str, encodes_per_prompt: int, what: str) -> Plan:
    """The image-to-image ControlNet siblings: ``strength`` 0.6, ``guidance_scale`` 7.0, no negative
    prompt and no true CFG."""
    strength = 0.6 if s.strength is None else s.strength
    run = replace(s, strength=strength, negative_prompt=False,
                  guidance_scale=7.0 if s.guidance_scale is None else s.guidance_scale)
    p = _with_controlnet(components, run, index, pipeline, strength, encodes_per_prompt, what)
    return replace(p, settings=replace(p.settings, true_cfg_scale=None, negative_prompt=s.negative_prompt),
                   notes=p.notes + tuple(no_negative_prompt(pipeline, s)))


def _with_controlnet(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                     pipeline: str, strength: float | None, encodes_per_prompt: int, what: str) -> Plan:
    """FluxPipeline's plan for ``s`` with the ControlNet's row (every step run, once per image) and the
    VAE encodes: the control image once per image (unless the ControlNet reads pixels) and
    ``encodes_per_prompt`` images (``what``) per prompt."""
    base = flux_pipeline(components, s, index=index)
    base = replace(base, settings=replace(base.settings, strength=strength))
    controlnet = components.get("controlnet")
    if controlnet is None:
        return replace(base, pipeline=pipeline,
                       notes=base.notes + ("controlnet is absent from this pipeline and was not counted",))
    st = base.settings
    f = vae_scale_factor(components)
    images = st.batch_size * st.num_images_per_prompt
    steps = denoising_steps(st.steps, s.strength)
    hint = controlnet["conditioning_embedding_channels"] is not None
    pixels = {"height": st.height, "width": st.width} if hint else {}
    run = ComponentRun("controlnet", component_class(components, "controlnet") or "?", "forward", "denoiser",
                       RunShape(latent_height=st.height // f, latent_width=st.width // f,
                                text_len=st.max_sequence_length, **pixels),
                       steps * images, f"{steps} steps × {images} image(s) (once per step, not per pass)")
    runs = list(base.runs)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    base = replace(base, runs=tuple(runs[:at] + [run] + runs[at:]))
    notes = []
    if controlnet["num_mode"] is not None:
        notes.append("ControlNet-Union: one control mode (its embedding is one more text token in every block)")
    if hint:
        notes.append("the control image's pixels go to the ControlNet's input_hint_block (not VAE-encoded)")
    control = 0 if hint else images
    inputs = encodes_per_prompt * st.batch_size
    whys = ([f"{control} control image(s)"] if control else []) + ([f"{inputs} {what}"] if inputs else [])
    encodes = encode_run(components, st, control + inputs, " + ".join(whys)) if control + inputs else []
    return with_encodes(base, pipeline, encodes, notes)
