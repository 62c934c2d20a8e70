"""Z-Image pipelines (diffusers ``pipelines/z_image``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

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
