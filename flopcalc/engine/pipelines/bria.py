"""BRIA 3.x (diffusers ``pipelines/bria/pipeline_bria.py``, ``BriaPipeline``)."""

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

#: ``BriaPipeline.__init__``: ``default_sample_size`` 64 times its ``vae_scale_factor``, ``2 ** len(block_out_channels)``
#: (16 for the SDXL-type VAE, and 16 without a VAE): 1024².
DEFAULT_SAMPLE_SIZE = 64
#: ``__call__`` defaults; ``check_inputs`` refuses ``max_sequence_length`` above 512.
STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH, MAX_ALLOWED = 30, 5.0, 128, 512


@register_pipeline("BriaPipeline", denoisers=("BriaTransformer2DModel",), options=("max_sequence_length", "vae_tiling"))
def bria_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``BriaPipeline.__call__``: ``height = width = default_sample_size · vae_scale_factor`` where the pipeline's
    ``vae_scale_factor`` is ``2 ** len(block_out_channels)`` (16: twice the VAE's own ×8, the 2×2 packing
    included): 1024². 30 steps, ``guidance_scale`` 5.0; guidance (``guidance_scale > 1``) doubles the
    transformer's batch (negative and prompt rows in one forward: two passes).

    T5 encodes each prompt *without padding* (``_get_t5_prompt_embeds``: truncated at ``max_sequence_length``,
    128), then the pipeline zero-pads the embeddings to ``max_sequence_length``: the transformer always sees 128
    text tokens, the encoder the prompt's own tokens, at most 128 (flopcalc counts 128, the upper bound). Under
    guidance a negative prompt is encoded the same way only when one is given; without one the negative
    embeddings are zeros and T5 does not run for it. Latents are packed 2×2: sides divide by 16."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to BriaPipeline: its __call__ takes no strength (it generates "
                          "from noise)")
    f = vae_scale_factor(components)  # the VAE's own factor (8): the latent grid H/8 × W/8
    size = DEFAULT_SAMPLE_SIZE * (2 * f if "vae" in components else 16)
    s = replace(s, height=s.height or size, width=s.width or size, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    if s.max_sequence_length > MAX_ALLOWED:
        raise FlopcalcError(f"max_sequence_length cannot be greater than {MAX_ALLOWED} for BriaPipeline, got "
                            f"{s.max_sequence_length}")
    check_divisible(s.height, s.width, f * 2, "BRIA height and width (packed 2×2 latents)")
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    negative = cfg and s.negative_prompt
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    notes.append(f"text: T5 runs on the prompt's own tokens, at most max_sequence_length ({s.max_sequence_length}, "
                 "counted: the upper bound); the transformer always sees max_sequence_length (zero-padded)")
    if cfg and not s.negative_prompt:
        notes.append("no negative prompt: BriaPipeline uses zero embeddings for the negative row (T5 does not run "
                     "for it)")
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale ≤ 1 (as in BriaPipeline)")
    vae = components.get("vae")
    if vae is not None and vae.values.get("shift_factor", None) is None:
        notes.append("the VAE config's shift_factor is null: diffusers 0.42.1's BriaPipeline adds it to the latents "
                     "before decoding and fails there (TypeError); the decode is counted as it runs with one")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * (2 if negative else 1),
                     f"{s.batch_size} prompt(s)" + (" + negative" if negative else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("BriaPipeline", s, passes, tuple(runs), tuple(notes))
