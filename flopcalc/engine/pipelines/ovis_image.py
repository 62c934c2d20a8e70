"""Ovis-Image (diffusers ``pipelines/ovis_image/pipeline_ovis_image.py``, ``OvisImagePipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
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

#: ``OvisImagePipeline.__init__``: ``default_sample_size`` 128 (× ``vae_scale_factor``: 1024²) and
#: ``user_prompt_begin_id`` 28, the chat template's tokens before the user prompt, dropped after encoding.
DEFAULT_SAMPLE_SIZE = 128
TEMPLATE_TOKENS = 28
#: ``__call__`` defaults; ``check_inputs`` refuses ``max_sequence_length`` above 256.
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 50, 5.0, 256


@register_pipeline("OvisImagePipeline", denoisers=("OvisImageTransformer2DModel",),
                   options=("max_sequence_length", "vae_tiling"), guidance="separate")
def ovis_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``OvisImagePipeline.__call__``: ``height = width = default_sample_size · vae_scale_factor`` (1024²), 50
    steps, ``guidance_scale`` 5.0. Guidance (``guidance_scale > 1``) runs the transformer twice per step, the
    prompt's and the negative prompt's (``""`` by default, encoded the same way) as two batch-1 forwards.

    ``_get_ovis_prompt_embeds`` wraps the prompt (after the system prompt) in Qwen3's chat template and pads it
    (``padding="max_length"``) to ``max_sequence_length + 28`` tokens (256 + 28 = 284): the text encoder
    (``Qwen3Model``) runs on all of them; the first 28 (the template before the user prompt) are dropped, so the
    transformer sees ``max_sequence_length`` text tokens. Latents are packed 2×2: sides divide by
    ``vae_scale_factor · 2`` (16)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to OvisImagePipeline: its __call__ takes no strength (it "
                          "generates from noise)")
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * f, width=s.width or DEFAULT_SAMPLE_SIZE * f,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.max_sequence_length > MAX_SEQUENCE_LENGTH:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_SEQUENCE_LENGTH} for Ovis-Image, got "
                            f"{s.max_sequence_length}")
    check_divisible(s.height, s.width, f * 2, "Ovis-Image height and width (packed 2×2 latents)")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in OvisImagePipeline)")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length + TEMPLATE_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    loaded = (index or {}).get("text_encoder")
    if isinstance(loaded, list) and len(loaded) == 2 and isinstance(loaded[1], str):
        # DiffusionPipeline.from_pretrained builds model_index.json's class (Qwen3Model) from the checkpoint
        runs = [replace(r, class_name=loaded[1]) for r in runs]
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("OvisImagePipeline", s, passes, tuple(runs), tuple(notes))
