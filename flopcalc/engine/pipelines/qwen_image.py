"""Qwen-Image pipelines (diffusers ``pipelines/qwenimage``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures.autoencoder_kl_qwen_image import scale_factor
from flopcalc.engine.errors import ConfigError, FlopcalcError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.vae import vae_runs

#: ``QwenImagePipeline.default_sample_size``: 128 latent pixels → 1024² with the 8× VAE.
DEFAULT_SAMPLE_SIZE = 128
#: ``prompt_template_encode_start_idx``: the system-prompt template's tokens, encoded then dropped.
TEMPLATE_TOKENS = 34
#: ``check_inputs``: ``max_sequence_length`` cannot be greater than 1024 (``tokenizer_max_length``).
MAX_SEQUENCE_LENGTH = 1024


def qwen_vae_scale_factor(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``2 ** len(vae.temperal_downsample)`` (8 for Qwen-Image), or 8 without a VAE."""
    vae = components.get("vae")
    if vae is None:
        return 8
    if not isinstance(vae["temperal_downsample"], list):
        raise ConfigError("vae/config.json: 'temperal_downsample' must be a list")
    return scale_factor(vae)


@register_pipeline("QwenImagePipeline", guidance="separate", denoisers=("QwenImageTransformer2DModel",),
                   options=("true_cfg_scale", "max_sequence_length", "vae_tiling"))
def qwen_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImagePipeline.__call__`` (diffusers ``pipelines/qwenimage/pipeline_qwenimage.py``):
    1024² default (``default_sample_size`` 128 × ``vae_scale_factor`` 8), 50 steps,
    ``true_cfg_scale`` 4.0 but classifier-free guidance (a second, separate transformer forward per
    step on the negative prompt, which is then encoded too) only when a negative prompt is given
    (``do_true_cfg = true_cfg_scale > 1 and has_neg_prompt``). ``guidance_scale`` only matters to
    guidance-distilled transformers (``guidance_embeds``), where it is required; it adds no pass.

    Text: the prompt is wrapped in a 34-token system template, encoded by Qwen2.5-VL, and the
    template's hidden states are dropped; the transformer sees at most ``max_sequence_length``
    (512, at most 1024) tokens. Upper bound used here: a prompt filling them, so the encoder
    runs on ``max_sequence_length + 34`` tokens and the transformer on ``max_sequence_length``.

    Latents are packed 2×2 (``vae_scale_factor · 2`` = 16 pixels per token side); diffusers floors
    other sizes with a warning, flopcalc asks for a size that divides."""
    f = qwen_vae_scale_factor(components)
    s = replace(
        s,
        height=s.height or DEFAULT_SAMPLE_SIZE * f,
        width=s.width or DEFAULT_SAMPLE_SIZE * f,
        steps=s.steps or 50,
        true_cfg_scale=4.0 if s.true_cfg_scale is None else s.true_cfg_scale,
        max_sequence_length=s.max_sequence_length or 512,
    )
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH} for Qwen-Image, "
                            f"got {s.max_sequence_length}")
    transformer = components.get("transformer", {})
    if transformer.get("guidance_embeds") and s.guidance_scale is None:
        raise FlopcalcError("guidance_scale is required for a guidance-distilled Qwen-Image transformer "
                            "(guidance_embeds: true); pass --guidance-scale")
    check_divisible(s.height, s.width, f * 2, "Qwen-Image height and width (packed 2×2 latents)")
    true_cfg = s.true_cfg_scale > 1 and s.negative_prompt
    passes = cfg_passes(s, true_cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.true_cfg_scale > 1 and not s.negative_prompt:
        notes.append("true_cfg_scale > 1 has no effect without a negative prompt (as in QwenImagePipeline): "
                     "one pass")
    elif s.negative_prompt and not true_cfg:
        notes.append("the negative prompt is ignored with true_cfg_scale <= 1 (as in QwenImagePipeline)")
    if s.guidance_scale is not None and not transformer.get("guidance_embeds"):
        notes.append("guidance_scale is ignored: the transformer is not guidance-distilled")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length + TEMPLATE_TOKENS)],
                     s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if true_cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += vae_runs(components, s, s.batch_size * s.num_images_per_prompt, s.height // f, s.width // f)
    return Plan("QwenImagePipeline", s, passes, tuple(runs), tuple(notes))


@register_pipeline("QwenImageImg2ImgPipeline", guidance="separate", options=("true_cfg_scale", "max_sequence_length"))
def qwen_image_img2img_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageImg2ImgPipeline.__call__`` (``pipeline_qwenimage_img2img.py``): the text-to-image
    defaults plus ``strength`` 0.6: the input image is VAE-encoded once per prompt and only the last
    ``strength`` of the 50-step schedule runs (``get_timesteps``)."""
    s = replace(s, strength=0.6 if s.strength is None else s.strength)
    return replace(qwen_image_pipeline(components, s, index=index), pipeline="QwenImageImg2ImgPipeline")


@register_pipeline("QwenImageInpaintPipeline", guidance="separate", options=("true_cfg_scale", "max_sequence_length"))
def qwen_image_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``QwenImageInpaintPipeline.__call__`` (``pipeline_qwenimage_inpaint.py``): the text-to-image defaults
    plus ``strength`` 0.6 (``get_timesteps``: the last ``strength`` of the 50-step schedule runs). The VAE
    encodes twice per input image: the image (``prepare_latents`` → ``_encode_vae_image``) and the masked
    image ``init_image · (mask < 0.5)`` (``prepare_mask_latents`` → ``_encode_vae_image``); the mask is only
    resized. The transformer is called exactly as in ``QwenImagePipeline`` (the mask blends latents after
    each step, no extra channels or tokens)."""
    s = replace(s, strength=0.6 if s.strength is None else s.strength)
    plan = qwen_image_pipeline(components, s, index=index)
    runs = tuple(replace(r, runs=2 * r.runs, why=f"{r.runs} input image(s) + {r.runs} masked image(s)")
                 if r.call == "encode" else r for r in plan.runs)
    return replace(plan, pipeline="QwenImageInpaintPipeline", runs=runs,
                   notes=plan.notes + ("the VAE encodes each input image and its masked copy (image · (mask < 0.5)); "
                                       "the mask blends the latents after each step",))
