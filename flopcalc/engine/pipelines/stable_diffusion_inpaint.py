"""Inpainting pipelines of Stable Diffusion 1.x/2.x, SDXL and SD3 (diffusers
``pipelines/stable_diffusion/pipeline_stable_diffusion_inpaint.py``,
``pipelines/stable_diffusion_xl/pipeline_stable_diffusion_xl_inpaint.py``,
``pipelines/stable_diffusion_3/pipeline_stable_diffusion_3_inpaint.py``).

Each runs as its text-to-image pipeline does (text encoders, denoiser steps × guidance passes,
one decode per image) with three differences:

* **what the VAE encodes.** Per input image, the *masked* image (``init_image * (mask < 0.5)``) is
  always encoded (``prepare_mask_latents``), and the image itself when the denoiser takes plain
  latents (``return_image_latents``: a 4-channel UNet, a 16-channel SD3 transformer) or when
  ``strength < 1`` (``prepare_latents`` mixes the image latents with the noise): 1 or 2 encodes of
  ``height × width`` per input image.
* **the denoiser's input.** An inpainting denoiser (``in_channels`` 9 for the UNets, 33 for SD3)
  sees ``[latents, mask, masked_image_latents]`` concatenated on the channels (its ``conv_in`` /
  patch embedding reads the config's ``in_channels``); any other width but the plain one is the
  pipeline's own ``ValueError``.
* **which steps run.** ``get_timesteps`` with the pipeline's default ``strength``: SD and SDXL floor
  ``steps · strength`` first (:func:`~flopcalc.engine.pipelines.base.denoising_steps_floored`: SDXL's default
  0.9999 runs 49 of 50 steps), SD3 does not (:func:`~flopcalc.engine.pipelines.base.denoising_steps`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError
from flopcalc.engine.pipelines.base import Plan, PlanFn, Settings, guidance_of, pipeline_options, register_pipeline
from flopcalc.engine.pipelines.sd3 import sd3_pipeline
from flopcalc.engine.pipelines.stable_diffusion import sd_pipeline, sdxl_pipeline


def _encodes_per_image(plain: bool, strength: float) -> int:
    """VAE encodes per input image: the masked image, and the image when ``plain`` (the denoiser
    takes plain latents: ``return_image_latents``) or ``strength < 1``."""
    return 1 + (plain or strength != 1)


def _inpaint(name: str, base_name: str, base: PlanFn, *, denoiser: str, channels: tuple[int, int],
             strength: float, steps: int, guidance: float) -> None:
    """Register ``name``: ``base`` with the inpainting pipeline's defaults (``strength``, ``steps``,
    ``guidance``) and its VAE encodes; ``channels`` = (plain, inpainting) ``in_channels`` of the
    ``denoiser`` it accepts."""
    plain, inpainting = channels

    def plan_fn(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
        s = replace(s, strength=strength if s.strength is None else s.strength, steps=s.steps or steps,
                    guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale)
        width = components[denoiser]["in_channels"] if denoiser in components else inpainting
        if width not in channels:
            raise ConfigError(f"{name}: {denoiser} in_channels is {width}; the pipeline takes {plain} (plain "
                              f"latents) or {inpainting} (latents + mask + masked-image latents)")
        p = base(components, s, index=index)
        n = _encodes_per_image(width == plain, p.settings.strength)
        what = "masked image" + (" + image" if n == 2 else "")
        runs = tuple(replace(r, runs=r.runs * n, why=f"{r.runs} input image(s) × {n} ({what})")
                     if r.role == "vae_encoder" else r for r in p.runs)
        return replace(p, pipeline=name, runs=runs)

    plan_fn.__doc__ = (f"``{name}.__call__``: {base.__name__} at strength {strength}, {steps} steps, guidance "
                       f"{guidance} (the diffusers defaults), the VAE encoding the masked image (and the image) "
                       "once per input image.")
    register_pipeline(name, options=tuple(pipeline_options(base_name)), guidance=guidance_of(base_name))(plan_fn)


# diffusers 0.42.1 __call__ defaults of each pipeline
_inpaint("StableDiffusionInpaintPipeline", "StableDiffusionPipeline", sd_pipeline, denoiser="unet",
         channels=(4, 9), strength=1.0, steps=50, guidance=7.5)
_inpaint("StableDiffusionXLInpaintPipeline", "StableDiffusionXLPipeline", sdxl_pipeline, denoiser="unet",
         channels=(4, 9), strength=0.9999, steps=50, guidance=7.5)
_inpaint("StableDiffusion3InpaintPipeline", "StableDiffusion3Pipeline", sd3_pipeline, denoiser="transformer",
         channels=(16, 33), strength=0.6, steps=50, guidance=7.0)
