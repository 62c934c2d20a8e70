"""Stable Diffusion 3 with an ``SD3ControlNetModel`` (diffusers ``pipelines/controlnet_sd3/``):
``StableDiffusion3ControlNetPipeline`` (``pipeline_stable_diffusion_3_controlnet.py``) and
``StableDiffusion3ControlNetInpaintingPipeline`` (``pipeline_stable_diffusion_3_controlnet_inpainting.py``).

Each runs as ``StableDiffusion3Pipeline`` does (same defaults: the transformer's native size, 28 steps,
``guidance_scale`` 7.0, CLIP-L/G on 77 tokens, T5 on ``max_sequence_length`` 256; CFG on a doubled
batch), plus:

* the ControlNet at every step on ``latent_model_input`` (the doubled CFG batch: one run per pass and
  image), with ``encoder_hidden_states=prompt_embeds`` (77 + 256 text tokens); ``controlnet_keep``
  only scales its residuals (called at every step, even where the scale is 0). The transformer adds
  the residuals to its blocks' outputs (additions, no counted work);
* the VAE encodes the control condition at ``height × width``: the ControlNet pipeline encodes the
  control image after ``prepare_image`` repeated it to every image *and doubled it for CFG*
  (step 3, lines 1057-1078 of the first file: ``images × passes`` encodes); the inpainting pipeline encodes the masked image
  once per image (``prepare_image_with_mask``, lines 822-878 of the second: doubled after encoding).

Neither ``__call__`` takes a ``strength`` (every step runs). One ControlNet (an
``SD3MultiControlNetModel`` is not planned).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import ComponentRun, Plan, Settings, component_class, register_pipeline, vae_scale_factor
from flopcalc.engine.pipelines.flux_conditioned import encode_run, with_encodes
from flopcalc.engine.pipelines.sd3 import sd3_pipeline
from flopcalc.engine.registry import RunShape

#: CLIP-L ⊕ CLIP-G tokens before the T5 tokens in ``prompt_embeds``.
CLIP_TOKENS = 77


def _with_sd3_controlnet(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                         pipeline: str, encodes_per_pass: bool) -> Plan:
    """SD3's plan with the ControlNet's row (every step × pass × image) and the control condition's VAE
    encodes (``images × passes`` when ``encodes_per_pass``, else ``images``)."""
    if s.strength is not None and s.strength < 1:
        raise OptionError(f"--strength does not apply to {pipeline}: its __call__ takes no strength (every step "
                          "runs), only 1 means that")
    base = sd3_pipeline(components, replace(s, strength=None), index=index)
    st = replace(base.settings, strength=s.strength)
    base = replace(base, settings=st)
    if "controlnet" not in components:
        return replace(base, pipeline=pipeline,
                       notes=base.notes + ("controlnet is absent from this pipeline and was not counted",))
    f = vae_scale_factor(components)
    images = st.batch_size * st.num_images_per_prompt
    passes = base.passes
    run = ComponentRun("controlnet", component_class(components, "controlnet") or "?", "forward", "controlnet",
                       RunShape(latent_height=st.height // f, latent_width=st.width // f,
                                text_len=CLIP_TOKENS + st.max_sequence_length),
                       st.steps * passes * images, f"{st.steps} steps × {passes} pass(es) × {images} image(s)")
    runs = list(base.runs)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    base = replace(base, runs=tuple(runs[:at] + [run] + runs[at:]))
    if encodes_per_pass:
        encodes = encode_run(components, st, images * passes,
                             f"{images} control image(s) × {passes} pass(es) (repeated for CFG before encoding)")
    else:
        encodes = encode_run(components, st, images, f"{images} masked image(s)")
    return with_encodes(base, pipeline, encodes, [])


@register_pipeline("StableDiffusion3ControlNetPipeline", options=("max_sequence_length",))
def sd3_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusion3ControlNetPipeline.__call__`` (lines 821-1254): SD3's plan, the ControlNet per step,
    pass and image, the control image VAE-encoded per image and pass (see the module doc)."""
    return _with_sd3_controlnet(components, s, index, "StableDiffusion3ControlNetPipeline", True)


@register_pipeline("StableDiffusion3ControlNetInpaintingPipeline", options=("max_sequence_length",))
def sd3_controlnet_inpainting_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                       index: Mapping[str, Any] | None = None) -> Plan:
    """``StableDiffusion3ControlNetInpaintingPipeline.__call__`` (lines 988-1414): SD3's plan, the ControlNet
    per step, pass and image on ``[masked-image latent, mask]`` (its ``extra_conditioning_channels``), the
    masked image VAE-encoded once per image."""
    return _with_sd3_controlnet(components, s, index, "StableDiffusion3ControlNetInpaintingPipeline", False)
