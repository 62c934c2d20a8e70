"""LongCat-Image (diffusers ``pipelines/longcat_image/pipeline_longcat_image.py``, ``LongCatImagePipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
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

#: ``LongCatImagePipeline.__init__``: ``default_sample_size`` 128 (1024² with the ×8 VAE) and
#: ``tokenizer_max_length`` 512, the prompt's padded length.
DEFAULT_SAMPLE_SIZE, TEXT_LEN = 128, 512
#: Qwen2 tokens of the chat template around the prompt, ``prompt_template_encode_prefix`` (36: the system prompt
#: and ``<|im_start|>user\n``) and ``prompt_template_encode_suffix`` (5: ``<|im_end|>\n<|im_start|>assistant\n``).
#: diffusers tokenizes the two strings at run time; LongCat-Image's own pipeline states their lengths as
#: ``prompt_template_encode_start_idx = 36`` and ``prompt_template_encode_end_idx = 5`` (as copied in
#: bghira/SimpleTuner ``simpletuner/helpers/models/longcat_image/pipeline.py``; stable-diffusion.cpp uses 36 too).
PREFIX_TOKENS, SUFFIX_TOKENS = 36, 5
#: ``__call__`` defaults.
STEPS, GUIDANCE = 50, 4.5

REWRITE_NOTE = ("the prompt rewrite (enable_prompt_rewrite, on by default: text_encoder.generate on the rewrite "
                "instruction, up to 512 new tokens) is not counted: its length is the generated text's")


@register_pipeline("LongCatImagePipeline", denoisers=("LongCatImageTransformer2DModel",), options=("vae_tiling",),
                   guidance="separate")
def longcat_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                           index: Mapping[str, Any] | None = None) -> Plan:
    """``LongCatImagePipeline.__call__``: ``height = width = default_sample_size · vae_scale_factor`` (1024²), 50
    steps, ``guidance_scale`` 4.5. Guidance (``guidance_scale > 1``) runs the transformer twice per step (the
    prompt's and the negative prompt's, ``""`` by default, as two batch-1 forwards).

    ``_encode_prompt`` pads the prompt's tokens (``padding="max_length"``) to ``tokenizer_max_length`` (512), puts
    the chat template's 36 prefix and 5 suffix tokens around them and runs ``Qwen2_5_VLForConditionalGeneration``
    (``lm_head`` included) on all 553; the transformer gets the 512 between them. The negative prompt is encoded
    the same way under guidance. Latents are packed 2×2: sides divide by ``vae_scale_factor · 2`` (16)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to LongCatImagePipeline: its __call__ takes no strength (it "
                          "generates from noise; LongCatImageEditPipeline edits an image)")
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or DEFAULT_SAMPLE_SIZE * f, width=s.width or DEFAULT_SAMPLE_SIZE * f,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, f * 2, "LongCat-Image height and width (packed 2×2 latents)")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(REWRITE_NOTE)
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in LongCatImagePipeline)")
    runs = text_runs(components, [("text_encoder", PREFIX_TOKENS + TEXT_LEN + SUFFIX_TOKENS)],
                     s.batch_size * passes, f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, TEXT_LEN, passes)
    runs += image_runs(components, s, f)
    return Plan("LongCatImagePipeline", s, passes, tuple(runs), tuple(notes))
