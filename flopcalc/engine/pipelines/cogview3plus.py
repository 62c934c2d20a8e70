"""CogView3-Plus (diffusers ``pipelines/cogview3/pipeline_cogview3plus.py``, ``CogView3PlusPipeline``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.config import positive_int
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

#: ``CogView3PlusPipeline.__call__`` defaults (pipeline_cogview3plus.py:409-431).
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 50, 5.0, 224
#: The default size without a transformer: ``CogView3PlusTransformer2DModel``'s ``sample_size`` 128 (× 8 = 1024).
DEFAULT_SAMPLE_SIZE = 128
#: ``check_inputs`` (line 347): height and width divisible by 8.
SIZE_MULTIPLE = 8


@register_pipeline("CogView3PlusPipeline", denoisers=("CogView3PlusTransformer2DModel",),
                   options=("max_sequence_length",),
                   refuses={"true_cfg_scale": "its __call__ takes no true_cfg_scale: guidance_scale > 1 already runs "
                                              "classifier-free guidance (a doubled batch)"})
def cogview3plus_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``CogView3PlusPipeline.__call__``: ``height = width = transformer.sample_size × vae_scale_factor`` (128 × 8 =
    1024, lines 517-518), 50 steps, ``guidance_scale`` 5.0; sides divide by 8 (``check_inputs``) and the latent by the
    patch size. T5 (``_get_t5_prompt_embeds``) runs on the prompt padded to ``max_sequence_length`` (224) tokens, and
    the transformer attends to all of them. CFG (``guidance_scale > 1``, line 549) doubles the transformer's batch
    (two passes per step); the negative prompt is encoded only when one is given: without it ``encode_prompt`` uses
    zeros (``prompt_embeds.new_zeros``, line 268), so T5 runs once per prompt. The VAE decodes once per image."""
    f = vae_scale_factor(components)
    transformer = components.get("transformer")
    if s.height is None or s.width is None:
        sample = DEFAULT_SAMPLE_SIZE if transformer is None else positive_int(transformer, "sample_size")
        s = replace(s, height=s.height or sample * f, width=s.width or sample * f)
    s = replace(s, steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    patch = 1 if transformer is None else positive_int(transformer, "patch_size")
    check_divisible(s.height, s.width, math.lcm(SIZE_MULTIPLE, f * patch), "CogView3-Plus height and width")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    encoded = cfg and s.negative_prompt
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if cfg and not s.negative_prompt:
        notes.append("without a negative prompt the unconditional half gets zero text states: T5 runs once per prompt")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale <= 1 (as in CogView3PlusPipeline)")
    if s.strength is not None:
        notes.append("diffusers 0.42.1 has no CogView3-Plus image-to-image pipeline: estimated as the text-to-image "
                     "pipeline with the input image VAE-encoded and the last `strength` of the schedule run")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * (2 if encoded else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if encoded else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("CogView3PlusPipeline", s, passes, tuple(runs), tuple(notes))
