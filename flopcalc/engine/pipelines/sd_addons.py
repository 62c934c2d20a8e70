"""Stable Diffusion 1.x/2.x and SDXL add-on pipelines: a folder whose ``model_index.json`` names the
pipeline and holds the add-on component, as ``save_pretrained`` lays it out. Each runs as its
text-to-image pipeline does (same defaults: 50 steps, CFG 7.5 / 5.0, CLIP on 77 tokens; the size is
the control image's, resized to ``height × width``: the UNet's native size by default), plus:

* **ControlNet** (``pipelines/controlnet/pipeline_controlnet.py``, ``pipeline_controlnet_sd_xl.py``):
  the ``controlnet`` at every step (``controlnet_keep`` only scales its residuals: with the default
  ``control_guidance_start/end`` 0 / 1 it is called at every step, and it is called even where the
  scale is 0) on ``control_model_input``: the doubled CFG batch (two passes), or, in guess mode
  (``global_pool_conditions`` in its config makes it so), the conditional half only (one pass). A
  ``MultiControlNetModel`` (``models/controlnets/multicontrolnet.py``: ``forward`` runs each of its
  ``nets`` on the same input) is saved as ``controlnet``, ``controlnet_1``, ``controlnet_2``, ...
  (its ``save_pretrained``; :mod:`flopcalc.engine.sources` reads them so): each runs as one ControlNet does,
  guess mode from the first net's config (``controlnet.nets[0].config.global_pool_conditions``).
* **T2I-Adapter** (``pipelines/t2i_adapter/pipeline_stable_diffusion_adapter.py``,
  ``pipeline_stable_diffusion_xl_adapter.py``): the ``adapter`` once on the control images (one per
  prompt, ``height × width``, a multiple of its ``downscale_factor``); its features are repeated per
  image and for CFG and added to the UNet's down blocks (no MACs). One adapter (a ``MultiAdapter`` is
  not planned).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    PlanFn,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoising_steps_floored,
    guidance_of,
    pipeline_options,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.stable_diffusion import sd_pipeline, sdxl_pipeline
from flopcalc.engine.registry import RunShape

#: CLIP tokens the ControlNet's cross-attention sees (``encoder_hidden_states=prompt_embeds``).
TEXT_LEN = 77


def controlnet_names(components: Mapping[str, Any]) -> list[str]:
    """The ControlNets of a folder: ``controlnet`` and, for a ``MultiControlNetModel``, ``controlnet_1``,
    ``controlnet_2``, ... as ``MultiControlNetModel.save_pretrained`` names their folders."""
    names: list[str] = []
    while (name := f"controlnet_{len(names)}" if names else "controlnet") in components:
        names.append(name)
    return names


def controlnet_runs(components: Mapping[str, Any], s: Settings, passes: int) -> list[ComponentRun]:
    """Each ControlNet once per kept step × pass × image on the UNet's latent grid (none without one);
    guess mode (the first net's ``global_pool_conditions``) runs them on the conditional batch only."""
    names = controlnet_names(components)
    if not names:
        return []
    guess_mode = bool(components["controlnet"]["global_pool_conditions"])
    cn_passes = cfg_passes(s, False) if guess_mode else passes
    f = vae_scale_factor(components)
    steps = denoising_steps_floored(s.steps, s.strength)
    images = s.batch_size * s.num_images_per_prompt
    why = f"{steps} steps × {cn_passes} pass(es) × {images} image(s)" + (" (guess mode)" if guess_mode else "")
    return [ComponentRun(name, component_class(components, name) or "?", "forward", "controlnet",
                         RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=TEXT_LEN),
                         steps * cn_passes * images, why) for name in names]


def adapter_runs(components: Mapping[str, Any], s: Settings, passes: int) -> list[ComponentRun]:
    """The T2I-Adapter once per control image (one per prompt) at ``height × width`` (none without one)."""
    if "adapter" not in components:
        return []
    check_divisible(s.height, s.width, components["adapter"]["downscale_factor"],
                    "T2I-Adapter control image (the adapter's downscale_factor)")
    return [ComponentRun("adapter", component_class(components, "adapter") or "?", "forward", "adapter",
                         RunShape(height=s.height, width=s.width), s.batch_size,
                         f"{s.batch_size} control image(s)")]


def _with_add_on(name: str, base_name: str, base: PlanFn, component: str,
                 runs_of: Callable[[Mapping[str, Any], Settings, int], list[ComponentRun]],
                 refuses: Mapping[str, str] | None = None) -> PlanFn:
    def plan_fn(components: Mapping[str, Mapping[str, Any]], s: Settings,
                index: Mapping[str, Any] | None = None) -> Plan:
        p = base(components, s, index=index)
        runs = list(p.runs)
        at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
        runs[at:at] = runs_of(components, p.settings, p.passes)
        notes = p.notes + ((f"{component} is absent from this pipeline and was not counted",)
                           if component not in components else ())
        return replace(p, pipeline=name, runs=tuple(runs), notes=notes)

    plan_fn.__name__ = plan_fn.__qualname__ = f"{base.__name__}_with_{component}"
    plan_fn.__doc__ = (f"``{name}.__call__``: {base.__name__}'s runs and defaults plus the {component} (see the "
                       "module doc).")
    return register_pipeline(name, options=tuple(o for o in pipeline_options(base_name) if o not in (refuses or {})),
                             refuses=refuses, guidance=guidance_of(base_name))(plan_fn)


sd_controlnet_pipeline = _with_add_on("StableDiffusionControlNetPipeline", "StableDiffusionPipeline", sd_pipeline,
                                      "controlnet", controlnet_runs)
sdxl_controlnet_pipeline = _with_add_on("StableDiffusionXLControlNetPipeline", "StableDiffusionXLPipeline",
                                        sdxl_pipeline, "controlnet", controlnet_runs)
_with_add_on("StableDiffusionAdapterPipeline", "StableDiffusionPipeline", sd_pipeline, "adapter", adapter_runs,
             refuses={"ip_adapter": "its __call__ takes no ip_adapter_image (pipeline_stable_diffusion_adapter.py)"})
_with_add_on("StableDiffusionXLAdapterPipeline", "StableDiffusionXLPipeline", sdxl_pipeline, "adapter", adapter_runs)
