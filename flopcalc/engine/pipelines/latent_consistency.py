"""Latent Consistency Models (diffusers ``pipelines/latent_consistency_models/``):
``LatentConsistencyModelPipeline`` and ``LatentConsistencyModelImg2ImgPipeline`` on an SD 1.x/2.x UNet
distilled with a guidance embedding (``time_cond_proj_dim``, e.g. SimianLuo/LCM_Dreamshaper_v7).

* No classifier-free guidance (``do_classifier_free_guidance`` is ``False``,
  ``pipeline_latent_consistency_text2img.py:633-634``): the guidance scale enters the UNet as the
  embedding ``w`` of ``guidance_scale − 1`` (``timestep_cond``, :849, :874), so one UNet pass per step
  (``time_embedding.cond_proj``: see :mod:`flopcalc.engine.architectures.unet_2d_condition`), and the prompt
  alone is encoded (CLIP on 77 tokens; LCMs take no negative prompt, :163-173 of the img2img file).
* Defaults (``__call__``, text2img :645-650, img2img :715-719): 4 steps, guidance 8.5, size
  ``unet.sample_size × vae_scale_factor`` (:760-761); img2img strength 0.8.
* LCM's img2img step rule: ``LCMScheduler.set_timesteps(num_inference_steps, strength=...)``
  (``schedulers/scheduling_lcm.py``) draws ``num_inference_steps`` timesteps from the first
  ``int(original_inference_steps × strength)`` of its origin schedule: every requested step runs (no
  ``get_timesteps`` truncation), and the input image is VAE-encoded once per prompt (``prepare_latents``,
  img2img :539-544).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.pipelines.stable_diffusion import _unet_defaults

#: ``__call__`` defaults of both pipelines.
STEPS, GUIDANCE = 4, 8.5
#: ``LatentConsistencyModelImg2ImgPipeline.__call__``'s default strength.
IMG2IMG_STRENGTH = 0.8
#: ``LCMScheduler``'s ``original_inference_steps`` default (``scheduling_lcm.py``): the scheduler config is not
#: read, so a run beyond it is noted, not refused.
ORIGINAL_STEPS = 50


def _all_steps(steps: int, strength: float | None) -> int:
    """LCM's scheduler runs every requested step at any strength (see the module doc)."""
    return steps


def _lcm_plan(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings) -> Plan:
    if s.negative_prompt:
        raise OptionError(f"--negative-prompt does not apply to {name}: an LCM runs no classifier-free guidance and "
                          "its __call__ takes no negative prompt")
    s, f = _unet_defaults(components, s, STEPS, GUIDANCE)
    passes = cfg_passes(s, False)
    runs = text_runs(components, [("text_encoder", 77)], s.batch_size, f"{s.batch_size} prompt(s) (no CFG)")
    runs += denoiser_run(components, "unet", s, f, 77, passes, kept_steps=_all_steps)
    runs += image_runs(components, s, f)
    notes = list(missing_notes(components, ["text_encoder", "unet", "vae"]))
    usable = int(ORIGINAL_STEPS * (s.strength if s.strength is not None else 1.0))
    if not s.symbolic and s.steps > usable:
        notes.append(f"LCMScheduler draws the steps from int(original_inference_steps × strength) origin steps: with "
                     f"its default original_inference_steps {ORIGINAL_STEPS} that is {usable}, fewer than {s.steps} "
                     "(diffusers refuses it unless the scheduler config sets more)")
    if "unet" in components and components["unet"]["time_cond_proj_dim"] is None:
        notes.append("the UNet has no time_cond_proj_dim (no guidance embedding): diffusers' LCM pipelines need an "
                     "LCM-distilled UNet")
    return Plan(name, s, passes, tuple(runs), tuple(notes))


@register_pipeline("LatentConsistencyModelPipeline")
def lcm_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                 index: Mapping[str, Any] | None = None) -> Plan:
    """``LatentConsistencyModelPipeline.__call__``: 4 steps, one UNet pass per step with the guidance
    embedding, the prompt encoded once; with ``strength`` the img2img rule (every step runs, the image encoded)."""
    return _lcm_plan("LatentConsistencyModelPipeline", components, s)


@register_pipeline("LatentConsistencyModelImg2ImgPipeline")
def lcm_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``LatentConsistencyModelImg2ImgPipeline.__call__``: strength 0.8, every one of the 4 steps runs
    (LCM's scheduler, not ``get_timesteps``), the input image encoded once per prompt."""
    s = replace(s, strength=IMG2IMG_STRENGTH if s.strength is None else s.strength)
    return _lcm_plan("LatentConsistencyModelImg2ImgPipeline", components, s)
