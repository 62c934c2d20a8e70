"""Kolors (diffusers ``pipelines/kolors/pipeline_kolors.py``, ``KolorsPipeline``).

The Hub repo ``Kwai-Kolors/Kolors`` names ``StableDiffusionXLPipeline`` in its ``model_index.json``
with a ``["kolors", "ChatGLMModel"]`` text encoder and no second one: that is Kolors' own SDXL
variant (``kolors/pipelines/pipeline_stable_diffusion_xl_chatglm_256.py`` in github.com/Kwai-Kolors/Kolors,
the class its ``scripts/sample.py`` builds), which diffusers ports as ``KolorsPipeline``
(``Kwai-Kolors/Kolors-diffusers``). diffusers' own ``StableDiffusionXLPipeline`` cannot run that
folder (it expects two CLIP encoders), so :func:`kolors_pipeline` serves a folder whose index names
``StableDiffusionXLPipeline`` and whose text encoder is ``ChatGLMModel``
(``register_pipeline(serves=...)``), and the report names the pipeline that is meant.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    config_value,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    text_runs,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``KolorsPipeline.__call__`` defaults.
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 50, 5.0, 256
#: ``check_inputs``: ``max_sequence_length`` cannot be greater than 256.
MAX_SEQUENCE_LENGTH_LIMIT = 256
#: ``default_sample_size`` without a UNet.
DEFAULT_SAMPLE_SIZE = 128


def is_kolors(components: Mapping[str, Mapping[str, Any]]) -> bool:
    """A pipeline folder whose text encoder is ChatGLM: Kolors (whatever its index calls it)."""
    return component_class(components, "text_encoder") == "ChatGLMModel"


def _is_kolors_unet(cfg: Mapping[str, Any]) -> bool:
    """Kolors' UNet: SDXL's ``text_time`` conditioning on projected (``text_proj``) ChatGLM states."""
    return cfg.get("addition_embed_type") == "text_time" and cfg.get("encoder_hid_dim_type") == "text_proj"


@register_pipeline("KolorsPipeline", denoisers=("UNet2DConditionModel",), component="unet", when=_is_kolors_unet,
                   options=("max_sequence_length",), serves={"StableDiffusionXLPipeline": is_kolors})
def kolors_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                    index: Mapping[str, Any] | None = None) -> Plan:
    """``KolorsPipeline.__call__``: ``height = width = unet.sample_size × vae_scale_factor`` (128 × 8 =
    1024), 50 steps, ``guidance_scale`` 5.0; sides divide by 8. CFG (``guidance_scale > 1`` and no
    ``time_cond_proj_dim``) runs the UNet on the concatenated [negative, prompt] batch: two passes.

    ``encode_prompt`` runs ChatGLM on the prompt padded to ``max_sequence_length`` (256, at most 256)
    tokens with ``output_hidden_states=True``: the UNet's text states are ``hidden_states[-2]`` (the
    input of the last layer) and the pooled ``text_embeds`` are ``hidden_states[-1][-1]`` (the last
    token of the last layer, before ``final_layernorm``), so the whole model runs. Under CFG the
    negative prompt ("" unless given) is encoded the same way. ``force_zeros_for_empty_prompt``
    (``true`` in ``Kwai-Kolors/Kolors``' index) would replace it with zeros, but on that path both
    Kolors' own pipeline and ``KolorsPipeline`` stop with an error (no negative pooled embedding:
    ``zeros_like(None)`` / ``None.repeat``), and Kolors' ``scripts/sample.py`` builds the pipeline with
    ``force_zeros_for_empty_prompt=False``: flopcalc counts the negative prompt encoded."""
    name = "KolorsPipeline"
    index = index or {}
    f = vae_scale_factor(components)
    if s.height is None or s.width is None:
        sample = config_value(components, "unet", "sample_size", DEFAULT_SAMPLE_SIZE)
        sample = sample if isinstance(sample, int) else sample[0]
        s = replace(s, height=s.height or sample * f, width=s.width or sample * f)
    s = replace(s, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    check_divisible(s.height, s.width, 8, "Kolors height and width")
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH_LIMIT:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH_LIMIT} for "
                            f"KolorsPipeline, got {s.max_sequence_length}")
    cond_proj = config_value(components, "unet", "time_cond_proj_dim", None)  # an LCM UNet runs no CFG
    passes = cfg_passes(s, s.guidance_scale > 1 and cond_proj is None)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "unet", s, f, s.max_sequence_length, passes,
                         kept_steps=denoising_steps_floored)  # KolorsImg2ImgPipeline.get_timesteps
    runs += image_runs(components, s, f)
    notes = list(missing_notes(components, ["text_encoder", "unet", "vae"]))
    named = index.get("_class_name")
    if named == "StableDiffusionXLPipeline":  # served (register_pipeline(serves=...)), not KolorsImg2Img
        notes.append(f"model_index.json names {named} (Kolors' own pipeline, which diffusers ports as {name}): "
                     f"planned as {name}")
    if passes == 2 and index.get("force_zeros_for_empty_prompt") and not s.negative_prompt:
        notes.append("force_zeros_for_empty_prompt is set, but Kolors' pipelines fail on the zero-embedding path "
                     "(no negative pooled embedding) and Kolors runs with it off: the negative prompt is encoded")
    if s.strength is not None:
        notes.append("image-to-image: the input image VAE-encoded and the last `strength` of the schedule run "
                     "(as KolorsImg2ImgPipeline)")
    return Plan(name, s, passes, tuple(runs), tuple(notes))
