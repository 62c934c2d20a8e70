"""SANA pipeline (diffusers ``pipelines/sana/pipeline_sana.py``, ``SanaPipeline.__call__``).

What one generation runs, at the pipeline's defaults:

* size: ``height = width = 1024`` (the ``__call__`` defaults, whatever the model), then, with
  ``use_resolution_binning`` (default True), snapped to the nearest aspect-ratio bin of the table
  for ``transformer.sample_size`` (128 → 4096px bins, 64 → 2048, 32 → 1024, 16 → 512; any other
  sample size is an error there) and generated at that size. So a 512px SANA generates 512×512 by
  default, and 1024×1024 with binning off. Height and width must be multiples of 32
  (``check_inputs``); the latent is ``size / vae_scale_factor`` with
  ``vae_scale_factor = 2 ** (len(vae.encoder_block_out_channels) - 1)`` (32 for the DC-AE; 32 too
  without a VAE).
* 20 steps, ``guidance_scale`` 4.5: classifier-free guidance on a doubled batch (2 passes).
* text: Gemma-2 (``Gemma2Model``) on ``max_sequence_length`` = 300 tokens (padded to that length;
  masks never reduce the count), once for the prompt and, under CFG, once for the negative prompt
  (default ``""``); the transformer sees ``max_sequence_length`` tokens (``select_index``: the first
  token and the last ``max_sequence_length − 1``).

The complex human instruction (CHI). ``complex_human_instruction`` defaults to a non-empty
instruction list, which ``_get_gemma_prompt_embeds`` prepends to the *prompt* (never to the negative
prompt), encoding ``N_chi + max_sequence_length − 2`` tokens instead, where ``N_chi`` is the number of
Gemma tokens of the joined instruction (with BOS). ``N_chi`` depends on the Gemma tokenizer, which
flopcalc does not bundle, so the prompt is planned at ``max_sequence_length`` tokens like the
negative prompt and the report says so: the text-encoder count is then the pipeline's with
``complex_human_instruction=None`` (a lower bound for the default). A caller who knows ``N_chi``
estimates the longer encode by running the text encoder alone at that length.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from math import lcm
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    config_value,
    denoiser_run,
    missing_notes,
    nearest_aspect_bin,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.vae import image_runs

#: ``SanaPipeline.__call__`` defaults.
DEFAULT_SIZE = 1024
DEFAULT_STEPS = 20
DEFAULT_GUIDANCE = 4.5
DEFAULT_TEXT_LEN = 300
#: ``check_inputs``: "`height` and `width` have to be divisible by 32".
SIZE_MULTIPLE = 32
#: ``vae_scale_factor`` when the pipeline has no VAE.
DEFAULT_VAE_FACTOR = 32


def sana_vae_scale_factor(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``SanaPipeline.vae_scale_factor``: ``2 ** (len(vae.config.encoder_block_out_channels) - 1)``,
    or 32 without a VAE."""
    vae = components.get("vae")
    if vae is None:
        return DEFAULT_VAE_FACTOR
    channels = vae["encoder_block_out_channels"]
    if not isinstance(channels, list) or not channels:
        raise ConfigError("vae/config.json: 'encoder_block_out_channels' must be a non-empty list")
    return 2 ** (len(channels) - 1)


@lru_cache(maxsize=1)
def sana_binned_size(height: int, width: int, sample_size: int) -> tuple[int, int]:
    """The size SanaPipeline generates at under resolution binning (SANA's own tables by
    ``sample_size``; another ``sample_size`` makes the pipeline raise 'Invalid sample size')."""
    return nearest_aspect_bin("sana_aspect_ratio_bins.json", sample_size, height, width, "SanaPipeline")


def chi_note(pipeline: str, prompts: str = "the prompt and the negative prompt") -> str:
    """What the report says of the complex human instruction ``pipeline`` prepends by default."""
    return (f"text_encoder: planned at max_sequence_length tokens for {prompts}; {pipeline} by default prepends its "
            "complex human instruction to the prompt, which makes that one encode N_chi − 2 tokens longer (N_chi: "
            "Gemma tokens of the instruction, tokenizer-dependent, not counted here)")


CHI_NOTE = chi_note("SanaPipeline")


def sana_settings(components: Mapping[str, Mapping[str, Any]], s: Settings, pipeline: str, *, steps: int,
                  sample_size: int) -> tuple[Settings, list[str]]:
    """The SANA pipelines' ``__call__`` defaults (1024², ``steps``, guidance 4.5, 300 tokens) and, with
    ``use_resolution_binning``, the size snapped to the bins of ``sample_size``; the notes that says so."""
    s = replace(s, height=s.height or DEFAULT_SIZE, width=s.width or DEFAULT_SIZE, steps=s.steps or steps,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or DEFAULT_TEXT_LEN)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.resolution_binning:
        binned = sana_binned_size(s.height, s.width, sample_size)
        if binned != (s.height, s.width):
            notes.append(f"resolution binning: {s.height}×{s.width} is generated at {binned[0]}×{binned[1]} and "
                         f"resized, as {pipeline} does (turn off with --no-resolution-binning)")
            s = replace(s, height=binned[0], width=binned[1])
    return s, notes


#: A ``guidance_embeds`` transformer cannot run here: SanaPipeline passes no ``guidance``, and
#: ``SanaCombinedTimestepGuidanceEmbeddings`` takes no ``batch_size`` (it runs under SanaSprintPipeline).
@register_pipeline("SanaPipeline", denoisers=("SanaTransformer2DModel",), options=("max_sequence_length", "vae_tiling"),
                   when=lambda cfg: not cfg.get("guidance_embeds"))
def sana_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``SanaPipeline.__call__`` (see the module doc for every default)."""
    f = sana_vae_scale_factor(components)
    s, notes = sana_settings(components, s, "SanaPipeline", steps=DEFAULT_STEPS,
                             sample_size=config_value(components, "transformer", "sample_size", 32))
    multiple = lcm(SIZE_MULTIPLE, f * config_value(components, "transformer", "patch_size", 1))
    check_divisible(s.height, s.width, multiple, "SANA height and width (multiples of 32, and of the VAE factor × "
                                                 "patch size)")
    passes = cfg_passes(s, s.guidance_scale > 1)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    if runs:
        notes.append(CHI_NOTE)
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("SanaPipeline", s, passes, tuple(runs), tuple(notes))
