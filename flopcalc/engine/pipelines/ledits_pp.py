"""LEDITS++ (diffusers ``pipelines/ledits_pp``): ``LEditsPPPipelineStableDiffusion`` and
``LEditsPPPipelineStableDiffusionXL`` edit a real image with a Stable Diffusion (XL) checkpoint. One edit is two
calls, both planned here:

1. ``invert(image, source_prompt="", source_guidance_scale=3.5, num_inversion_steps=30 (SDXL: 50), skip=0.15)``:
   ``vae.encode`` of the input image (its size, a multiple of 32), ``vae.decode`` of its latent (the returned
   reconstruction), the text encoder(s) on the empty unconditional prompt (and the source prompt), then the UNet
   once per inversion step on the noised latent (twice when a source prompt is given: its guidance);
2. ``__call__(editing_prompt=[...])``: the text encoder(s) on the unconditional prompt and the editing prompts, the
   UNet every inversion step (the edit runs on the inverted schedule) on ``1 + k`` copies of the latent (the
   unconditional one and one per editing concept), one final ``vae.decode``.

``--steps`` is ``num_inversion_steps``, ``--guidance-scale`` is ``source_guidance_scale``, ``--height/--width`` the
input image's size, ``--batch-size`` the number of input images; ``--editing-prompts`` is ``k`` (diffusers' default
``editing_prompt=None``: 0, a reconstruction) and ``--source-prompt 1`` inverts with a (non-empty) source prompt.
The attention maps the edit stores (``LEDITSCrossAttnProcessor``: the same Q·Kᵀ and A·V products as
scaled-dot-product attention) and their Gaussian smoothing (a 3×3 ``F.conv2d`` on each stored map) are pipeline
work outside the models: the smoothing is not counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import INDEX, pipeline_option

pipeline_option("editing_prompts", kind=INDEX, bound=(1024, "prompts"),
                help="LEDITS++: editing prompts (concepts) of the edit, each a UNet pass per step (default 0: "
                     "diffusers' editing_prompt=None, a reconstruction)",
                refusal="it takes no LEDITS++ editing prompts")
pipeline_option("source_prompt", kind=INDEX, bound=(1, "source prompt"),
                help="LEDITS++: 1 to invert with a non-empty source prompt (a second UNet pass per inversion step; "
                     "default 0: source_prompt=\"\")",
                refusal="it takes no LEDITS++ source prompt")

#: ``invert`` defaults: ``source_guidance_scale`` 3.5; ``num_inversion_steps`` 30 (SD) / 50 (SDXL).
SOURCE_GUIDANCE = 3.5
INVERSION_STEPS = {"LEditsPPPipelineStableDiffusion": 30, "LEditsPPPipelineStableDiffusionXL": 50}
#: CLIP tokens (``tokenizer.model_max_length``), padded; the editing prompts to the same length.
TEXT_LEN = 77
#: ``encode_image``: the input image's sides must be multiples of 32.
SIDE_MULTIPLE = 32


def _run(components, name: str, call: str, role: str, shape: RunShape, runs: Any, why: str) -> list[ComponentRun]:
    if name not in components:
        return []
    return [ComponentRun(name, component_class(components, name) or "?", call, role, shape, runs, why)]


def _plan(components: Mapping[str, Any], s: Settings, name: str, xl: bool) -> Plan:
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: the edit runs on the inverted schedule "
                          "(--steps is num_inversion_steps)")
    if s.num_images_per_prompt != 1:
        raise OptionError(f"--num-images-per-prompt does not apply to {name}: its __call__ sets "
                          "num_images_per_prompt = 1 (one edit per inverted image)")
    k = s.editing_prompts or 0
    source = bool(s.source_prompt)
    f = vae_scale_factor(components)
    unet = components.get("unet")
    sample = unet.get("sample_size") if unet is not None else None
    sample = sample[0] if isinstance(sample, (list, tuple)) else sample
    if (s.height is None or s.width is None) and sample is None:
        raise OptionError(f"{name}: give --height and --width (the input image's size)")
    s = replace(s, height=s.height or sample * f, width=s.width or sample * f, steps=s.steps or INVERSION_STEPS[name],
                guidance_scale=SOURCE_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, SIDE_MULTIPLE, f"{name}: the input image (encode_image)")
    guided = s.guidance_scale > 1
    if source and not guided:
        raise OptionError(f"{name}: a source prompt with --guidance-scale <= 1 is not encoded, and the real invert "
                          "then calls the UNet on no text states (it fails)")
    if xl and s.batch_size != 1:
        raise OptionError(f"--batch-size does not apply to {name}: its editing prompts are encoded once for the "
                          "whole batch, so flopcalc plans one input image")
    b, steps = s.batch_size, s.steps
    lat = RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=TEXT_LEN)
    # invert: the UNet on the unconditional states, plus the source prompt's (SD: a second call; SDXL: the batch
    # doubled, its guidance on only with a source prompt)
    inversion_passes = 2 if source else 1
    # text encoders: invert encodes the unconditional prompt and, under its guidance (SD; SDXL only with a source
    # prompt), the source prompt; __call__ the unconditional prompt and the editing prompts (SD: each per image)
    inversion_texts = b + (b if (source if xl else guided) else 0)
    call_texts = b + k * (1 if xl else b)
    texts = inversion_texts + call_texts
    why_text = (f"invert: {b} unconditional" + (f" + {inversion_texts - b} source" if inversion_texts > b else "")
                + f"; edit: {b} unconditional + {call_texts - b} editing prompt(s)")
    runs = []
    for enc in (("text_encoder", "text_encoder_2") if xl else ("text_encoder",)):
        runs += _run(components, enc, "forward", "text_encoder", RunShape(seq_len=TEXT_LEN), texts, why_text)
    runs += _run(components, "unet", "forward", "denoiser", lat, steps * b * (inversion_passes + 1 + k),
                 f"invert: {steps} steps × {inversion_passes} pass(es); edit: {steps} steps × (1 + {k}) pass(es); "
                 f"× {b} image(s)")
    runs += _run(components, "vae", "encode", "vae_encoder", RunShape(height=s.height, width=s.width), b,
                 f"invert: {b} input image(s)")
    runs += _run(components, "vae", "decode", "vae_decoder",
                 RunShape(latent_height=s.height // f, latent_width=s.width // f), 2 * b,
                 f"invert's reconstruction + the edit: 2 × {b} image(s)")
    notes = list(missing_notes(components, ["text_encoder", "text_encoder_2", "unet", "vae"] if xl else
                               ["text_encoder", "unet", "vae"]))
    notes.append(f"one edit = invert ({steps} inversion steps) + __call__ with {k} editing prompt(s) "
                 "(--editing-prompts); the attention maps' Gaussian smoothing is pipeline work, not counted")
    return Plan(name, s, 1 + k, tuple(runs), tuple(notes))


@register_pipeline("LEditsPPPipelineStableDiffusion", options=("editing_prompts", "source_prompt"))
def ledits_pp_sd_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``LEditsPPPipelineStableDiffusion.invert`` (pipeline_leditspp_stable_diffusion.py:1224-1375) then
    ``__call__`` (:722-1222): 30 inversion steps, source guidance 3.5, the size unet.sample_size × the VAE's factor
    (the input image's); see the module doc."""
    return _plan(components, s, "LEditsPPPipelineStableDiffusion", xl=False)


@register_pipeline("LEditsPPPipelineStableDiffusionXL", options=("editing_prompts", "source_prompt"))
def ledits_pp_sdxl_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``LEditsPPPipelineStableDiffusionXL.invert`` (pipeline_leditspp_stable_diffusion_xl.py:1415-1650) then
    ``__call__``: 50 inversion steps, both CLIP encoders (the unconditional prompt is encoded, then zeroed by
    ``force_zeros_for_empty_prompt``), the UNet with SDXL's added time ids; see the module doc."""
    return _plan(components, s, "LEditsPPPipelineStableDiffusionXL", xl=True)
