"""AuraFlow (diffusers ``pipelines/aura_flow/pipeline_aura_flow.py``, ``AuraFlowPipeline``)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.config import Config, positive_int
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

#: ``AuraFlowPipeline.__call__`` defaults (``height``/``width`` default to 1024 in the signature itself).
HEIGHT, WIDTH, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 1024, 1024, 50, 3.5, 256


def _size_multiple(components: Mapping[str, Config], f: int) -> int:
    """``check_inputs``: sides divide by ``vae_scale_factor · 2``; the latent must also divide by the
    transformer's patch size (2 in every AuraFlow checkpoint), when there is a transformer."""
    transformer = components.get("transformer")
    return f * (2 if transformer is None else math.lcm(2, positive_int(transformer, "patch_size")))


@register_pipeline("AuraFlowPipeline", denoisers=("AuraFlowTransformer2DModel",), options=("max_sequence_length",))
def aura_flow_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                       index: Mapping[str, Any] | None = None) -> Plan:
    """``AuraFlowPipeline.__call__``: 1024², 50 steps, ``guidance_scale`` 3.5, sides divisible by
    ``vae_scale_factor · 2`` (16). The Pile-T5 encoder (``UMT5EncoderModel``) runs on the prompt padded
    to ``max_sequence_length`` (256) tokens and, under CFG (``guidance_scale > 1``), on the negative
    prompt ("" unless given) padded to the same length; the transformer then runs on the concatenated
    [negative, prompt] batch (two passes per step) and sees 8 register tokens + 256 caption tokens."""
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    check_divisible(s.height, s.width, _size_multiple(components, f), "AuraFlow height and width")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if "transformer" in components:
        notes += _pos_embed_note(components["transformer"], s.height // f, s.width // f)
    if s.strength is not None:
        notes.append("diffusers 0.42.1 has no AuraFlow image-to-image pipeline: estimated as the text-to-image "
                     "pipeline with the input image VAE-encoded and the last `strength` of the schedule run")
    return Plan("AuraFlowPipeline", s, passes, tuple(runs), tuple(notes))


def _pos_embed_note(transformer: Config, latent_h: int, latent_w: int) -> list[str]:
    """``AuraFlowPatchEmbed.pe_selection_index_based_on_dim`` takes the centred h_p × w_p crop of the
    √pos_embed_max_size square table; a larger patch grid indexes outside it (diffusers issue #12656:
    a CUDA assert, wrapped indices on the CPU). The matmuls are the same either way."""
    table, patch = positive_int(transformer, "pos_embed_max_size"), positive_int(transformer, "patch_size")
    side = math.isqrt(table)
    h_p, w_p = int(latent_h) // patch, int(latent_w) // patch
    if h_p <= side and w_p <= side:
        return []
    return [f"the {h_p}×{w_p} patch grid exceeds the transformer's {side}×{side} positional table "
            f"(pos_embed_max_size {table}): diffusers indexes outside it (issue #12656); the count is the work the "
            "module does, which does not depend on the table"]
