"""Krea 2 (diffusers ``pipelines/krea2/pipeline_krea2.py``, ``Krea2Pipeline``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError
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

#: ``Krea2Pipeline.__call__`` defaults.
SIZE, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 1024, 28, 4.5, 512
#: ``prompt_template_encode_start_idx``: the chat template's tokens before the prompt, dropped after encoding (the
#: template's 5 suffix tokens are inside the fixed ``max_sequence_length + 34`` block the encoder runs on).
TEMPLATE_TOKENS = 34
#: ``Krea2Pipeline.__init__`` defaults (registered in its config, so in ``model_index.json``).
PATCH_SIZE = 2
SELECT_LAYERS = (2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 32, 35)


def _check_layers(components: Mapping[str, Any], index: Mapping[str, Any]) -> None:
    """The tapped encoder layers must exist and be as many as the transformer fuses."""
    layers = tuple(index.get("text_encoder_select_layers") or SELECT_LAYERS)
    transformer, encoder = components.get("transformer"), components.get("text_encoder")
    if transformer is not None and transformer["num_text_layers"] != len(layers):
        raise ConfigError(f"Krea2Pipeline taps {len(layers)} text-encoder layers (text_encoder_select_layers) but the "
                          f"transformer's num_text_layers is {transformer['num_text_layers']}")
    if encoder is not None:
        from flopcalc.engine.architectures.qwen3_vl import text_config

        depth = text_config(encoder)["num_hidden_layers"]
        if max(layers) > depth:
            raise ConfigError(f"Krea2Pipeline taps hidden state {max(layers)} but the text encoder has {depth} layers "
                              f"({depth + 1} hidden states)")


@register_pipeline("Krea2Pipeline", denoisers=("Krea2Transformer2DModel",), options=("max_sequence_length",),
                   guidance="separate")
def krea2_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                   index: Mapping[str, Any] | None = None) -> Plan:
    """``Krea2Pipeline.__call__``: 1024², 28 steps, ``guidance_scale`` 4.5. Guidance runs whenever
    ``guidance_scale > 0`` (not > 1): the transformer runs twice per step (prompt, then negative prompt, ``""`` by
    default, as two batch-1 forwards). The distilled (Turbo) checkpoints are run with ``guidance_scale`` 0.

    ``get_text_hidden_states`` tokenizes the chat template and the prompt into a fixed block of
    ``max_sequence_length + 34`` tokens (512 + 34: padded in the middle, the suffix after the padding) and runs
    ``Qwen3VLModel`` on all of them, tapping ``text_encoder_select_layers`` (12) hidden states; the first 34 tokens are
    dropped, so the transformer gets ``max_sequence_length`` text tokens × 12 layers. Latents are packed into 2×2
    patches (the pipeline's ``patch_size``): sides divide by ``vae_scale_factor · 2`` (16)."""
    if s.strength is not None:
        raise OptionError("--strength does not apply to Krea2Pipeline: its __call__ takes no strength (it generates "
                          "from noise)")
    index = index or {}
    if index.get("patch_size", PATCH_SIZE) != PATCH_SIZE:
        raise ConfigError(f"model_index.json: Krea2Pipeline patch_size {index['patch_size']!r}: flopcalc models the "
                          f"default {PATCH_SIZE} only")
    _check_layers(components, index)
    f = vae_scale_factor(components)
    s = replace(s, height=s.height or SIZE, width=s.width or SIZE, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    check_divisible(s.height, s.width, f * PATCH_SIZE, "Krea 2 height and width (vae_scale_factor × patch_size)")
    cfg = s.guidance_scale > 0
    passes = cfg_passes(s, cfg)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    if s.negative_prompt and not cfg:
        notes.append("the negative prompt is ignored with guidance_scale 0 (as in Krea2Pipeline)")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length + TEMPLATE_TOKENS)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if cfg else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)
    runs += image_runs(components, s, f)
    return Plan("Krea2Pipeline", s, passes, tuple(runs), tuple(notes))
