"""Qwen-Image with a ControlNet (diffusers ``pipelines/qwenimage``): ``QwenImageControlNetPipeline``
(``pipeline_qwenimage_controlnet.py``) and ``QwenImageControlNetInpaintPipeline``
(``pipeline_qwenimage_controlnet_inpaint.py``), the ``QwenImageControlNetModel`` as a row of its own.

Both are ``QwenImagePipeline``'s plan (1024², 50 steps, ``true_cfg_scale`` 4.0 with a negative prompt as a second
forward, Qwen2.5-VL on ``max_sequence_length`` + 34 template tokens) with:

* the control condition VAE-encoded once per generated image at the output size (``prepare_image`` /
  ``prepare_image_with_mask`` repeat the image to the batch before ``vae.encode``, no CFG doubling): the control
  image, or for inpainting the masked control image (the mask, resized to the latent, joins its latent: 16 + 1
  channels packed 2×2, the ControlNet's ``extra_condition_channels`` 4);
* the ControlNet once per step and image, on the positive prompt only: the negative pass of true CFG reuses its
  residuals (``controlnet_block_samples``); ``controlnet_keep`` only scales them, it runs at every step.

A ``QwenImageMultiControlNetModel`` (one Union net run once per control image; no config of its own) is not
modelled: one control image. ``strength`` does not apply (every step runs).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines.base import ComponentRun, Plan, Settings, component_class, register_pipeline
from flopcalc.engine.pipelines.qwen_image import qwen_image_pipeline, qwen_vae_scale_factor
from flopcalc.engine.registry import RunShape

OPTIONS = ("true_cfg_scale", "max_sequence_length")
#: ``QwenImageControlNetInpaintPipeline.__call__``'s ``guidance_scale`` default (``QwenImageControlNetPipeline``'s
#: is None): read only by a guidance-distilled transformer.
INPAINT_GUIDANCE = 1.0


def _with_controlnet(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                     pipeline: str, what: str, extra_channels: int) -> Plan:
    if s.strength is not None and s.strength < 1:
        raise OptionError(f"--strength does not apply to {pipeline}: its __call__ takes no strength (every step "
                          "runs), only 1 means that")
    controlnet = components.get("controlnet")
    if controlnet is not None:
        extra = controlnet["extra_condition_channels"]
        if extra != extra_channels:
            raise ConfigError(f"controlnet/config.json: {pipeline} feeds {what} (extra_condition_channels "
                              f"{extra_channels}), got {extra}")
    base = qwen_image_pipeline(components, replace(s, strength=None), index=index)
    base = replace(base, pipeline=pipeline)
    if controlnet is None:
        return replace(base, notes=base.notes + ("controlnet is absent from this pipeline and was not counted",))
    st = base.settings
    f = qwen_vae_scale_factor(components)
    images = st.batch_size * st.num_images_per_prompt
    runs = list(base.runs)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    runs.insert(at, ComponentRun("controlnet", component_class(components, "controlnet") or "?", "forward",
                                 "controlnet",
                                 RunShape(latent_height=st.height // f, latent_width=st.width // f,
                                          text_len=st.max_sequence_length),
                                 st.steps * images, f"{st.steps} steps × {images} image(s) (once per step, not per "
                                                    "pass)"))
    if "vae" in components:
        runs.insert(at, ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                     RunShape(height=st.height, width=st.width), images,
                                     f"{images} {what} (repeated per image, then encoded)"))
    return replace(base, runs=tuple(runs))


@register_pipeline("QwenImageControlNetPipeline", options=OPTIONS, guidance="separate")
def qwen_image_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageControlNetPipeline.__call__``: see the module docstring; the control image's latent
    (``extra_condition_channels`` 0)."""
    return _with_controlnet(components, s, index, "QwenImageControlNetPipeline", "control image(s)", 0)


@register_pipeline("QwenImageControlNetInpaintPipeline", options=OPTIONS, guidance="separate")
def qwen_image_controlnet_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                           index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageControlNetInpaintPipeline.__call__``: see the module docstring; the masked control image's latent
    and the mask (``extra_condition_channels`` 4; the image itself is not encoded: the latents start from noise and
    no mask blends them). ``guidance_scale`` defaults to 1.0 here (read by a guidance-distilled transformer only)."""
    transformer = components.get("transformer", {})
    if transformer.get("guidance_embeds") and s.guidance_scale is None:
        s = replace(s, guidance_scale=INPAINT_GUIDANCE)
    return _with_controlnet(components, s, index, "QwenImageControlNetInpaintPipeline",
                            "masked control image(s) with the mask", 4)
