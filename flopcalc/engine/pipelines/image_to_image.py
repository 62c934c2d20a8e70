"""Image-to-image variants of the text-to-image pipelines, with their own diffusers defaults."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.pipelines.base import Plan, PlanFn, Settings, guidance_of, pipeline_options, register_pipeline
from flopcalc.engine.pipelines.flux import flux_pipeline
from flopcalc.engine.pipelines.kolors import kolors_pipeline
from flopcalc.engine.pipelines.sd3 import sd3_pipeline
from flopcalc.engine.pipelines.stable_diffusion import sd_pipeline, sdxl_pipeline


def _image_to_image(name: str, base_name: str, base: PlanFn, *, strength: float, steps: int | None = None,
                    guidance: float | None = None) -> None:
    """Register ``name`` as ``base`` with the image-to-image pipeline's own defaults: the input
    image is VAE-encoded and only the last ``strength`` of the schedule runs; it applies the options
    ``base_name`` applies."""

    def plan_fn(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
        s = replace(s, strength=strength if s.strength is None else s.strength, steps=s.steps or steps,
                    guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale)
        return replace(base(components, s, index=index), pipeline=name)

    plan_fn.__doc__ = f"``{name}``: {base.__name__} with strength {strength} (diffusers defaults)."
    register_pipeline(name, options=tuple(pipeline_options(base_name)), guidance=guidance_of(base_name))(plan_fn)


# diffusers' own defaults (the __call__ signatures of each *_img2img.py pipeline)
_image_to_image("StableDiffusionImg2ImgPipeline", "StableDiffusionPipeline", sd_pipeline, strength=0.8)
_image_to_image("StableDiffusionXLImg2ImgPipeline", "StableDiffusionXLPipeline", sdxl_pipeline, strength=0.3)
_image_to_image("FluxImg2ImgPipeline", "FluxPipeline", flux_pipeline, strength=0.6, steps=28, guidance=7.0)
_image_to_image("StableDiffusion3Img2ImgPipeline", "StableDiffusion3Pipeline", sd3_pipeline, strength=0.6, steps=50)
_image_to_image("KolorsImg2ImgPipeline", "KolorsPipeline", kolors_pipeline, strength=0.3)  # pipeline_kolors_img2img.py:785
