"""Perturbed-attention guidance (PAG) pipelines (diffusers ``pipelines/pag/``): each is its base
pipeline's plan (the same text encoders, steps, sizes, VAE calls; the PAG pipeline's own ``__call__``
defaults where they differ) with the PAG passes added.

``PAGMixin`` (``pipelines/pag/pag_utils.py``): with ``do_perturbed_attention_guidance``
(``pag_scale > 0``, default 3.0, and at least one layer) the denoiser runs once per step on
``[uncond, cond, perturbed]`` under classifier-free guidance, ``[cond, perturbed]`` without
(``_prepare_perturbed_attention_guidance``: the prompt embeddings, pooled embeddings, time ids, control
images stacked the same way; the latents by ``torch.cat([latents] * rows)``). The denoiser's
self-attention layers matching ``pag_applied_layers`` get the PAG processors
(``_set_pag_attn_processor``): the original rows run attention there, the perturbed row the identity
path (:mod:`flopcalc.engine.perturbed_attention`). So per step and image: the base plan's passes as original
rows plus one perturbed row, one report row of two pieces whose sum is the whole batched call.
``pag_adaptive_scale`` only rescales the guidance term (no compute). ``pag_scale`` 0 turns PAG off:
the plan is the base pipeline's.

The ControlNet PAG pipelines run the ControlNet on the whole batch (``control_model_input =
latent_model_input``, ``pipeline_pag_controlnet_sd.py:1247``): every row, guess mode or not, with its
normal attention (the PAG processors go on the UNet only).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

import flopcalc.engine.pipelines.image_to_image  # noqa: F401  registers the img2img bases
import flopcalc.engine.pipelines.stable_diffusion_inpaint  # noqa: F401  registers the inpaint bases
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.config import class_name_of
from flopcalc.engine.perturbed_attention import PerturbedAttention, check_perturbable
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    PlanFn,
    Settings,
    denoising_steps,
    denoising_steps_floored,
    guidance_of,
    pipeline_options,
    register_pipeline,
    registered_plan,
)
from flopcalc.engine.pipelines.animatediff import animatediff_pipeline
from flopcalc.engine.pipelines.hunyuan_dit import hunyuan_dit_pipeline
from flopcalc.engine.pipelines.kolors import kolors_pipeline
from flopcalc.engine.pipelines.pixart_dit import pixart_sigma_pipeline
from flopcalc.engine.pipelines.sana import sana_pipeline
from flopcalc.engine.pipelines.sd3 import sd3_pipeline
from flopcalc.engine.pipelines.sd_addons import controlnet_runs
from flopcalc.engine.pipelines.stable_diffusion import sd_pipeline, sdxl_pipeline
from flopcalc.engine.settings import NAMES, SCALE, pipeline_option

pipeline_option("pag_scale", kind=SCALE, help="PAG pipelines: perturbed-attention guidance scale (0: off)",
                refusal="it has no perturbed-attention guidance (use its PAG pipeline)")
pipeline_option("pag_applied_layers", kind=NAMES,
                help="PAG pipelines: self-attention layer ids (e.g. mid, down_blocks.2, blocks.14)",
                refusal="it has no perturbed-attention guidance (use its PAG pipeline)",
                examples=("mid", "down_blocks.2", "blocks.14"))

#: ``pag_scale``'s default in every PAG pipeline's ``__call__`` (e.g. pipeline_pag_sd.py:772).
PAG_SCALE = 3.0
KeptSteps = Callable[[int, float | None], int]


def _add_pag(name: str, p: Plan, components: Mapping[str, Any], denoiser: str, layers: tuple[str, ...],
             kept_steps: KeptSteps) -> Plan:
    """``p`` (the base plan, settings resolved) with PAG: the denoiser's original rows carry the PAG
    layers, and one perturbed row per step and image follows them."""
    s = p.settings
    scale = PAG_SCALE if s.pag_scale is None else s.pag_scale
    layers = tuple(s.pag_applied_layers or layers)
    s = s.with_options(pag_scale=scale, pag_applied_layers=layers)
    if scale == 0:  # do_perturbed_attention_guidance is False: the base pipeline's passes
        return replace(p, pipeline=name, settings=s)
    if denoiser in components:
        check_perturbable(class_name_of(components[denoiser]) or "?", denoiser)
    perturbed_rows = kept_steps(s.steps, s.strength) * s.batch_size * s.num_images_per_prompt
    runs: list[ComponentRun] = []
    for r in p.runs:
        if r.component == denoiser and r.role == "denoiser":
            runs.append(replace(r, shape=replace(r.shape, perturbed=PerturbedAttention(layers, False)),
                                why=f"{r.why} (original rows)"))
            runs.append(replace(r, shape=replace(r.shape, perturbed=PerturbedAttention(layers, True)),
                                runs=perturbed_rows, why=f"{perturbed_rows} perturbed row(s): one per step × image"))
        elif r.component == "controlnet":
            runs.append(replace(r, runs=r.runs + perturbed_rows, why=f"{r.why} + {perturbed_rows} perturbed row(s)"))
        else:
            runs.append(r)
    note = (f"perturbed-attention guidance (pag_scale {scale:g}): the {denoiser} runs a perturbed row per step "
            f"with identity self-attention in the layers matching {', '.join(layers)}")
    return replace(p, pipeline=name, settings=s, runs=tuple(runs), notes=p.notes + (note,))


def _pag(name: str, base_name: str, base: PlanFn, *, denoiser: str,
         layers: tuple[str, ...] | Callable[[Mapping[str, Any]], tuple[str, ...]],
         kept_steps: KeptSteps = denoising_steps_floored, defaults: Mapping[str, Any] | None = None,
         add_controlnet: bool = False, guess_mode_crashes: bool = False) -> None:
    """Register ``name``: ``base`` (registered as ``base_name``) with the PAG pipeline's own ``defaults``
    (settings it sets where ``base`` has another default), the ControlNet added (``add_controlnet``) and
    the PAG passes; its default ``pag_applied_layers`` are ``layers`` (or what ``layers(components)`` gives: simple
    ids that choose the layers a regular-expression default of the pipeline chooses)."""

    def plan_fn(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
        s = replace(s, **{k: v for k, v in (defaults or {}).items() if getattr(s, k) is None})
        p = base(components, s, index=index)
        if add_controlnet:
            runs = list(p.runs)
            at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
            runs[at:at] = controlnet_runs(components, p.settings, p.passes)
            p = replace(p, runs=tuple(runs), notes=p.notes + (
                () if "controlnet" in components else ("controlnet is absent from this pipeline and was not counted",)))
        if "controlnet" in components:
            _check_guess_mode(name, components, p, guess_mode_crashes)
            steps = kept_steps(p.settings.steps, p.settings.strength)
            images = p.settings.batch_size * p.settings.num_images_per_prompt
            why = f"{steps} steps × {p.passes} pass(es) × {images} image(s) (the whole batch, guess mode or not)"
            p = replace(p, runs=tuple(replace(r, runs=steps * p.passes * images, why=why)
                                      if r.component == "controlnet" else r for r in p.runs))
        return _add_pag(name, p, components, denoiser, layers(components) if callable(layers) else layers, kept_steps)

    plan_fn.__doc__ = (f"``{name}.__call__``: {base_name}'s plan with perturbed-attention guidance (see the module "
                       f"doc); default pag_applied_layers "
                       f"{layers.__doc__ if callable(layers) else list(layers)}.")
    register_pipeline(name, options=tuple(pipeline_options(base_name)) + ("pag_scale", "pag_applied_layers"),
                      guidance=guidance_of(base_name))(plan_fn)


def _check_guess_mode(name: str, components: Mapping[str, Any], p: Plan, crashes: bool) -> None:
    """``StableDiffusionControlNetPAGPipeline`` in guess mode under CFG pads the ControlNet's residuals with
    zeros for an unconditional half the batch already holds (pipeline_pag_controlnet_sd.py:1267): the
    residuals have twice the UNet's rows and the call fails."""
    if crashes and components["controlnet"]["global_pool_conditions"] and p.passes != 1:
        raise ConfigError(f"{name}: this ControlNet's global_pool_conditions turns on guess mode, which fails in "
                          "diffusers under classifier-free guidance (its residuals get twice the UNet's batch); "
                          "estimate it with --guidance-scale 1")


_UNET, _MID = "unet", ("mid",)
_pag("StableDiffusionPAGPipeline", "StableDiffusionPipeline", sd_pipeline, denoiser=_UNET, layers=_MID)
_pag("StableDiffusionPAGImg2ImgPipeline", "StableDiffusionImg2ImgPipeline",
     registered_plan("StableDiffusionImg2ImgPipeline"), denoiser=_UNET, layers=_MID)
# pipeline_pag_sd_inpaint.py:942: strength 0.9999 (StableDiffusionInpaintPipeline's is 1.0)
_pag("StableDiffusionPAGInpaintPipeline", "StableDiffusionInpaintPipeline",
     registered_plan("StableDiffusionInpaintPipeline"), denoiser=_UNET, layers=_MID, defaults={"strength": 0.9999})
_pag("StableDiffusionXLPAGPipeline", "StableDiffusionXLPipeline", sdxl_pipeline, denoiser=_UNET, layers=_MID)
_pag("StableDiffusionXLPAGImg2ImgPipeline", "StableDiffusionXLImg2ImgPipeline",
     registered_plan("StableDiffusionXLImg2ImgPipeline"), denoiser=_UNET, layers=_MID)
_pag("StableDiffusionXLPAGInpaintPipeline", "StableDiffusionXLInpaintPipeline",
     registered_plan("StableDiffusionXLInpaintPipeline"), denoiser=_UNET, layers=_MID)
_pag("StableDiffusionControlNetPAGPipeline", "StableDiffusionPipeline", sd_pipeline, denoiser=_UNET, layers=_MID,
     add_controlnet=True, guess_mode_crashes=True)
# pipeline_pag_controlnet_sd_inpaint.py:1004: strength 1.0, 50 steps, 7.5 (StableDiffusionInpaintPipeline's)
_pag("StableDiffusionControlNetPAGInpaintPipeline", "StableDiffusionInpaintPipeline",
     registered_plan("StableDiffusionInpaintPipeline"), denoiser=_UNET, layers=_MID, add_controlnet=True)
_pag("StableDiffusionXLControlNetPAGPipeline", "StableDiffusionXLPipeline", sdxl_pipeline, denoiser=_UNET,
     layers=_MID, add_controlnet=True)
# pipeline_pag_controlnet_sd_xl_img2img.py:1123: strength 0.8 (StableDiffusionXLImg2ImgPipeline's is 0.3)
_pag("StableDiffusionXLControlNetPAGImg2ImgPipeline", "StableDiffusionXLImg2ImgPipeline",
     registered_plan("StableDiffusionXLImg2ImgPipeline"), denoiser=_UNET, layers=_MID, add_controlnet=True,
     defaults={"strength": 0.8})
_pag("KolorsPAGPipeline", "KolorsPipeline", kolors_pipeline, denoiser=_UNET, layers=_MID)
# pipeline_pag_sd_3.py:188, pipeline_pag_sd_3_img2img.py:204: "blocks.1"; SD3 get_timesteps does not floor
_pag("StableDiffusion3PAGPipeline", "StableDiffusion3Pipeline", sd3_pipeline, denoiser="transformer",
     layers=("blocks.1",), kept_steps=denoising_steps)
_pag("StableDiffusion3PAGImg2ImgPipeline", "StableDiffusion3Img2ImgPipeline",
     registered_plan("StableDiffusion3Img2ImgPipeline"), denoiser="transformer", layers=("blocks.1",),
     kept_steps=denoising_steps)
# pipeline_pag_pixart_sigma.py:176, pipeline_pag_hunyuandit.py:212: "blocks.1"; pipeline_pag_sana.py:168
_pag("PixArtSigmaPAGPipeline", "PixArtSigmaPipeline", pixart_sigma_pipeline, denoiser="transformer",
     layers=("blocks.1",))
_pag("HunyuanDiTPAGPipeline", "HunyuanDiTPipeline", hunyuan_dit_pipeline, denoiser="transformer",
     layers=("blocks.1",))
_pag("SanaPAGPipeline", "SanaPipeline", sana_pipeline, denoiser="transformer", layers=("transformer_blocks.0",))


def _animatediff_mid_attn1(components: Mapping[str, Any]) -> tuple[str, ...]:
    """the layers of "mid_block.*attn1" (pipeline_pag_sd_animatediff.py:143) as simple ids: "mid_block.attentions"
    (the mid block's spatial attn1) and each mid motion module block's attn1 by its name (a motion block's attn2
    is a self-attention too, which "mid_block.*attn1" leaves alone)"""
    unet = components.get("unet")
    if unet is None or class_name_of(unet) != "UNetMotionModel" or not unet.get("use_motion_mid_block", True):
        return ("mid_block.attentions",)
    from flopcalc.engine.architectures.unet_motion import DEFAULTS, motion_layout
    from flopcalc.engine.config import Config

    config = Config("unet", unet, DEFAULTS)
    return ("mid_block.attentions",) + tuple(
        f"mid_block.motion_modules.{j}.transformer_blocks.{t}.attn1" for path, _c, _h, depths in motion_layout(config)
        if path == "mid_block" for j, k in enumerate(depths) for t in range(k))


# its __call__ defaults are AnimateDiffPipeline's (16 frames, 50 steps, 7.5, num_videos_per_prompt forced to 1)
_pag("AnimateDiffPAGPipeline", "AnimateDiffPipeline", animatediff_pipeline, denoiser=_UNET,
     layers=_animatediff_mid_attn1)
