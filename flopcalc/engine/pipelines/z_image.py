"""Z-Image pipelines (diffusers ``pipelines/z_image``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.config import positive_int
from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs
from flopcalc.engine.registry import RunShape

#: ``ZImagePipeline.__call__``: ``height = height or 1024`` (likewise the width).
DEFAULT_SIZE = 1024
#: Z-Image-Turbo as its model card runs it: ``num_inference_steps=9``, ``guidance_scale=0.0``
#: ("Guidance should be 0 for the Turbo models"). ``__call__``'s own defaults, 50 and 5.0, are the
#: undistilled Z-Image's.
TURBO_STEPS, TURBO_GUIDANCE = 9, 0.0


#: ``true_cfg_scale``: ZImagePipeline's own reason for refusing it.
NO_TRUE_CFG = {"true_cfg_scale": "its __call__ takes no true_cfg_scale: guidance_scale > 0 already runs "
                                 "classifier-free guidance (a doubled batch, the negative prompt encoded)"}
#: The optional options ZImagePipeline applies.
OPTIONS = ("max_sequence_length",)


@register_pipeline("ZImagePipeline", denoisers=("ZImageTransformer2DModel",), options=OPTIONS, refuses=NO_TRUE_CFG)
def z_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                     index: Mapping[str, Any] | None = None) -> Plan:
    """``ZImagePipeline.__call__`` (diffusers ``pipelines/z_image/pipeline_z_image.py``) with
    Z-Image-Turbo's settings by default: 1024², 9 steps (one transformer forward per timestep: 9,
    although the model card's comment says 8), ``guidance_scale`` 0.0. Classifier-free guidance runs
    whenever ``guidance_scale > 0`` (not > 1): the negative prompt ("" by default) is encoded too and
    the transformer gets a doubled batch (two passes), at every step (``cfg_truncation`` 1.0, the
    default, never cuts it off).

    Text: the prompt, wrapped in Qwen3's chat template, is padded to ``max_sequence_length`` (512)
    tokens and encoded by the text encoder (``Qwen3Model``, as ``model_index.json`` loads it: no
    ``lm_head``); the pipeline keeps ``hidden_states[-2]`` but every layer runs. The transformer gets
    only the prompt's real tokens; upper bound used here: a prompt filling ``max_sequence_length``
    (a batch is padded to its longest caption anyway). Sides must divide by ``vae_scale_factor · 2``
    (16): the pipeline raises otherwise."""
    f = vae_scale_factor(components)
    defaults = s.steps is None and s.guidance_scale is None
    s = replace(
        s,
        height=s.height or DEFAULT_SIZE,
        width=s.width or DEFAULT_SIZE,
        steps=s.steps or TURBO_STEPS,
        guidance_scale=TURBO_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
        max_sequence_length=s.max_sequence_length or 512,
    )
    check_divisible(s.height, s.width, f * 2, "Z-Image height and width (vae_scale_factor × 2)")
    cfg = s.guidance_scale > 0
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if defaults:
        notes.append(f"Z-Image-Turbo's settings (model card): {TURBO_STEPS} steps, guidance_scale {TURBO_GUIDANCE:g}; "
                     "ZImagePipeline's own defaults (50 steps, guidance_scale 5.0) are the undistilled model's")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale 0 (as in ZImagePipeline)")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    loaded = (index or {}).get("text_encoder")
    if isinstance(loaded, list) and len(loaded) == 2 and isinstance(loaded[1], str):
        # DiffusionPipeline.from_pretrained builds model_index.json's class (Qwen3Model) from the checkpoint
        runs = [replace(r, class_name=loaded[1]) for r in runs]
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("ZImagePipeline", s, passes, tuple(runs), tuple(notes))


#: ``ZImageImg2ImgPipeline.__call__``'s default ``strength``.
IMG2IMG_STRENGTH = 0.6


@register_pipeline("ZImageImg2ImgPipeline", options=OPTIONS, refuses=NO_TRUE_CFG)
def z_image_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``ZImageImg2ImgPipeline.__call__`` (``pipeline_z_image_img2img.py``): the text-to-image plan (the
    Turbo settings by default) plus ``strength`` 0.6: the input image is VAE-encoded once per prompt and
    only the last ``strength`` of the schedule runs (``get_timesteps``: 6 of 9 steps). The pipeline's
    size defaults to the input image's; flopcalc takes the input image to be the output size (1024²
    unless given)."""
    s = replace(s, strength=IMG2IMG_STRENGTH if s.strength is None else s.strength)
    return replace(z_image_pipeline(components, s, index=index), pipeline="ZImageImg2ImgPipeline")


#: ``ZImageInpaintPipeline.__call__``'s default ``strength`` (pipeline_z_image_inpaint.py).
INPAINT_STRENGTH = 1.0


@register_pipeline("ZImageInpaintPipeline", options=OPTIONS, refuses=NO_TRUE_CFG)
def z_image_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                             index: Mapping[str, Any] | None = None) -> Plan:
    """``ZImageInpaintPipeline.__call__`` (``pipeline_z_image_inpaint.py``): the image-to-image plan (the Turbo
    settings by default) with ``strength`` 1.0 and a mask: the VAE encodes twice per input image, the image
    (``prepare_latents``) and the masked image ``image · (mask < 0.5)`` (``prepare_mask_latents``); the mask blends
    the latents after each step, outside the transformer. The input image is taken at the output size."""
    s = replace(s, strength=INPAINT_STRENGTH if s.strength is None else s.strength)
    plan = z_image_pipeline(components, s, index=index)
    runs = tuple(replace(r, runs=2 * r.runs, why=f"{r.runs} input image(s) + {r.runs} masked image(s)")
                 if r.call == "encode" else r for r in plan.runs)
    return replace(plan, pipeline="ZImageInpaintPipeline", runs=runs)


def _with_controlnet(components: Mapping[str, Mapping[str, Any]], s: Settings, index: Mapping[str, Any] | None,
                     pipeline: str, inpaint: bool) -> Plan:
    """ZImagePipeline's plan (the Turbo settings by default) with the ControlNet at every step on the transformer's
    batch (both halves under CFG: ``control_image.repeat(2, ...)``) and the control images encoded: the control image
    once per image (``prepare_image`` repeats it before ``vae.encode``), and for inpainting the masked image as
    well (its latent, the mask and the control latent make the ``control_in_dim`` 33 channels)."""
    if s.strength is not None and s.strength < 1:
        raise OptionError(f"--strength does not apply to {pipeline}: its __call__ takes no strength (every step "
                          "runs), only 1 means that")
    base = z_image_pipeline(components, replace(s, strength=None), index=index)
    base = replace(base, pipeline=pipeline)
    controlnet, transformer = components.get("controlnet"), components.get("transformer")
    if controlnet is None or transformer is None:
        why = ("controlnet is absent from this pipeline and was not counted" if controlnet is None else
               "controlnet was not counted: it runs the transformer's embedders and refiners (from_transformer), "
               "whose sizes the absent transformer's config gives")
        return replace(base, notes=base.notes + (why,))
    latent, control_in = positive_int(transformer, "in_channels"), positive_int(controlnet, "control_in_dim")
    needed = 2 * latent + 1 if inpaint else latent
    if (control_in != needed) if inpaint else (control_in < needed):
        raise ConfigError(f"controlnet/config.json: {pipeline} feeds {needed} control channels "
                          f"({'control latent, mask and masked-image latent' if inpaint else 'the control latent'}, "
                          f"zero-padded up to control_in_dim), got control_in_dim {control_in}")
    st, passes = base.settings, base.passes
    f = vae_scale_factor(components)
    images = st.batch_size * st.num_images_per_prompt
    runs = list(base.runs)
    at = next((i for i, r in enumerate(runs) if r.role == "denoiser"), len(runs))
    runs.insert(at, ComponentRun(
        "controlnet", component_class(components, "controlnet") or "?", "forward", "controlnet",
        RunShape(latent_height=st.height // f, latent_width=st.width // f, text_len=st.max_sequence_length,
                 shared=transformer),
        st.steps * passes * images, f"{st.steps} steps × {passes} pass(es) × {images} image(s)"))
    if "vae" in components:
        encodes = images * (2 if inpaint else 1)
        what = f"{images} control image(s)" + (f" + {images} masked image(s)" if inpaint else "")
        runs.insert(at, ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                     RunShape(height=st.height, width=st.width), encodes,
                                     what + " (repeated per image, then encoded)"))
    notes = ("the ControlNet runs the transformer's t_embedder, all_x_embedder, cap_embedder, noise_refiner and "
             "context_refiner again (ZImageControlNetModel.from_transformer): their work is in the controlnet row, "
             "their parameters in the transformer's",)
    if inpaint and images > 1:
        notes += ("diffusers 0.42.1 joins the mask to the repeated control latents without repeating it "
                  "(pipeline_z_image_controlnet_inpaint.py:606): more than one image per call needs one mask per "
                  "image",)
    return replace(base, runs=tuple(runs), notes=base.notes + notes)


@register_pipeline("ZImageControlNetPipeline", options=OPTIONS, refuses=NO_TRUE_CFG)
def z_image_controlnet_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``ZImageControlNetPipeline.__call__`` (``pipeline_z_image_controlnet.py``): see :func:`_with_controlnet`. The
    control image's latent is zero-padded to ``control_in_dim`` channels (the 2.x ControlNets' 33)."""
    return _with_controlnet(components, s, index, "ZImageControlNetPipeline", inpaint=False)


@register_pipeline("ZImageControlNetInpaintPipeline", options=OPTIONS, refuses=NO_TRUE_CFG)
def z_image_controlnet_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                        index: Mapping[str, Any] | None = None) -> Plan:
    """``ZImageControlNetInpaintPipeline.__call__`` (``pipeline_z_image_controlnet_inpaint.py``): see
    :func:`_with_controlnet`; the image is masked (``image · (mask < 0.5)``) and encoded as well, and its latent and
    the mask join the control latent (16 + 1 + 16 = 33 channels)."""
    return _with_controlnet(components, s, index, "ZImageControlNetInpaintPipeline", inpaint=True)
