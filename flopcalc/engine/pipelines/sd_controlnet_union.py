"""SDXL with a ControlNet-Union (``ControlNetUnionModel``): ``StableDiffusionXLControlNetUnionPipeline``,
``StableDiffusionXLControlNetUnionImg2ImgPipeline`` and ``StableDiffusionXLControlNetUnionInpaintPipeline``
(diffusers ``pipelines/controlnet/pipeline_controlnet_union_sd_xl.py``, ``..._sd_xl_img2img.py``,
``pipeline_controlnet_union_inpaint_sd_xl.py``).

Each runs as its SDXL pipeline does (``guidance_scale`` 5.0, 50 steps, the size the control image's,
CLIP-L and CLIP-G on 77 tokens, the negative prompt encoded only when given), plus the ControlNet at
every kept step on ``control_model_input``: the doubled CFG batch, or in guess mode
(``global_pool_conditions``) the conditional half (:func:`flopcalc.engine.pipelines.sd_addons.controlnet_runs`;
``controlnet_keep`` only scales its residuals). The control images go to the ControlNet in pixels
(not VAE-encoded); one control image and mode (see :mod:`flopcalc.engine.architectures.controlnet_union`).

* image-to-image: ``strength`` 0.8, ``get_timesteps`` floored as SDXL's img2img; the input image
  VAE-encoded once per prompt;
* inpainting: ``strength`` 0.9999 (49 of 50 steps); only a 4-channel UNet (``num_channels_unet != 4``
  raises), so both the image (``return_image_latents``) and the masked image are VAE-encoded per
  input image.

One ControlNet (a ``MultiControlNetUnionModel`` is not planned).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError
from flopcalc.engine.pipelines.base import Plan, Settings, pipeline_options, register_pipeline
from flopcalc.engine.pipelines.sd_addons import controlnet_runs
from flopcalc.engine.pipelines.stable_diffusion import sdxl_pipeline


def _with_union(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                pipeline: str) -> Plan:
    """SDXL's plan for ``s`` with the ControlNet's runs before the UNet's."""
    p = sdxl_pipeline(components, s, index=index)
    runs = list(p.runs)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    runs[at:at] = controlnet_runs(components, p.settings, p.passes)
    notes = p.notes + (("controlnet is absent from this pipeline and was not counted",)
                       if "controlnet" not in components else ())
    return replace(p, pipeline=pipeline, runs=tuple(runs), notes=notes)


_OPTIONS = tuple(pipeline_options("StableDiffusionXLPipeline"))


@register_pipeline("StableDiffusionXLControlNetUnionPipeline", options=_OPTIONS)
def sdxl_controlnet_union_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionXLControlNetUnionPipeline.__call__`` (lines 978-1613): SDXL's plan and the
    ControlNet-Union per step and pass."""
    return _with_union(components, s, index, "StableDiffusionXLControlNetUnionPipeline")


@register_pipeline("StableDiffusionXLControlNetUnionImg2ImgPipeline", options=_OPTIONS)
def sdxl_controlnet_union_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                           index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionXLControlNetUnionImg2ImgPipeline.__call__``: ``strength`` 0.8, the kept steps
    ``int(steps · strength)`` (``get_timesteps``, lines 882-895), the input image encoded once per prompt."""
    s = replace(s, strength=0.8 if s.strength is None else s.strength)
    return _with_union(components, s, index, "StableDiffusionXLControlNetUnionImg2ImgPipeline")


@register_pipeline("StableDiffusionXLControlNetUnionInpaintPipeline", options=_OPTIONS)
def sdxl_controlnet_union_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                           index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusionXLControlNetUnionInpaintPipeline.__call__``: ``strength`` 0.9999, a 4-channel UNet
    only; the image (``prepare_latents`` with ``return_image_latents``) and the masked image
    (``prepare_mask_latents``) encoded per input image."""
    name = "StableDiffusionXLControlNetUnionInpaintPipeline"
    if "unet" in components and components["unet"]["in_channels"] != 4:
        raise ConfigError(f"{name}: unet in_channels is {components['unet']['in_channels']}; the pipeline takes a "
                          "4-channel UNet only (num_channels_unet != 4 raises)")
    s = replace(s, strength=0.9999 if s.strength is None else s.strength)
    p = _with_union(components, s, index, name)
    runs = tuple(replace(r, runs=r.runs * 2, why=f"{r.runs} input image(s) × 2 (image + masked image)")
                 if r.role == "vae_encoder" else r for r in p.runs)
    return replace(p, runs=runs)
