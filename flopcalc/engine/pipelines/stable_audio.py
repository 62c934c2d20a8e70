"""Stable Audio Open: ``StableAudioPipeline.__call__`` (diffusers ``pipelines/stable_audio/pipeline_stable_audio.py``
:464). Architectures in :mod:`flopcalc.engine.architectures.stable_audio` and ``autoencoder_oobleck``.

* The length is fixed: the latent is always ``int(transformer.sample_size)`` frames (:572; ``audio_end_in_s`` only
  crops the decoded waveform, :724), so ``--height`` / ``--width`` (and ``--num-frames``) do not apply.
* 100 steps, ``guidance_scale`` 7.0: classifier-free guidance when > 1, on a doubled batch; without a negative
  prompt the unconditional embeddings are zeros (:629), so the text encoder runs on the prompts only; with
  ``--negative-prompt`` on the negatives too (:212). ``num_waveforms_per_prompt`` (``--num-images-per-prompt``) repeats
  the embeddings (:644).
* The T5 text encoder (loaded as ``T5EncoderModel``) on ``tokenizer.model_max_length`` tokens, 128 for Stable Audio
  Open (the original conditioner's ``max_length``, which the conversion script passes to the tokenizer).
* ``projection_model`` twice: ``encode_prompt`` projects the text states (prompts, and negatives when encoded, :238),
  ``encode_duration`` embeds the start and end seconds once per prompt (:270; doubled by concatenation, not recomputed).
* The DiT every step on ``batch × waveforms × passes`` rows of ``sample_size`` frames, its cross-attention on the
  128 text + 2 duration tokens; the one timestep ``t.unsqueeze(0)`` (:693) is embedded once per call for all rows.
* ``vae.decode`` once per waveform. ``initial_audio_waveforms`` (a VAE encode of the input audio) is not modelled.
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun, Plan, Settings, cfg_passes, component_class, missing_notes, register_pipeline,
)
from flopcalc.engine.registry import RunShape

#: ``StableAudioPipeline.__call__`` defaults (pipeline_stable_audio.py:464-470).
DEFAULT_STEPS = 100
DEFAULT_GUIDANCE = 7.0
#: Stable Audio Open's tokenizer ``model_max_length`` (the original t5 conditioner's ``max_length``).
TEXT_LEN = 128
#: The two duration tokens (seconds start, seconds end) appended to the text states (:626).
DURATION_TOKENS = 2
NO_LAW = ("StableAudioPipeline generates audio of a fixed length (transformer.sample_size latent frames, whatever "
          "audio_end_in_s asks): no closed-form law in H and W; its cost is the numeric estimate, linear in steps "
          "and batch")
#: The class ``StableAudioPipeline`` loads its text encoder as (its model_index.json; a t5-base config.json taken from
#: the t5-base repository names ``T5ForConditionalGeneration``: the plan builds the encoder either way).
TEXT_ENCODER = "T5EncoderModel"


@register_pipeline("StableAudioPipeline", denoisers=("StableAudioDiTModel",), component="transformer")
def stable_audio_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``StableAudioPipeline.__call__``: see the module docstring."""
    from flopcalc.engine.architectures.stable_audio import latent_length

    name = "StableAudioPipeline"
    if s.symbolic:
        raise FlopcalcError(NO_LAW)
    for option, value in (("--height", s.height), ("--width", s.width), ("--strength", s.strength)):
        if value is not None:
            raise OptionError(f"{option} does not apply to {name}: it generates audio of the transformer's fixed "
                              "latent length (audio_end_in_s only crops the decoded waveform; an initial waveform is "
                              "not modelled)")
    notes = list(missing_notes(components, ["text_encoder", "projection_model", "transformer", "vae"]))
    frames = latent_length(components.get("transformer", {}))
    from dataclasses import replace

    s = replace(s, steps=s.steps or DEFAULT_STEPS,
                guidance_scale=DEFAULT_GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    cfg = s.guidance_scale > 1
    passes = cfg_passes(s, cfg)
    negative = cfg and s.negative_prompt
    prompts, waveforms = s.batch_size, s.batch_size * s.num_images_per_prompt
    texts = prompts * (2 if negative else 1)
    runs: list[ComponentRun] = []
    what = f"{prompts} prompt(s)" + (" + negative" if negative else "")
    if "text_encoder" in components:
        runs.append(ComponentRun("text_encoder", TEXT_ENCODER, "forward", "text_encoder", RunShape(seq_len=TEXT_LEN),
                                 texts, what))
    if "projection_model" in components:
        cls = component_class(components, "projection_model") or "?"
        runs += [ComponentRun("projection_model", cls, "forward", "projection", RunShape(seq_len=TEXT_LEN, text_len_2=0),
                              texts, f"the text states of {what}"),
                 ComponentRun("projection_model", cls, "forward", "projection", RunShape(seq_len=0, text_len_2=2),
                              prompts, f"the start and end seconds of {prompts} prompt(s)")]
    if "transformer" in components:
        cls = component_class(components, "transformer") or "?"
        rows = waveforms * passes
        shape = RunShape(seq_len=frames, text_len=TEXT_LEN + DURATION_TOKENS)
        runs.append(ComponentRun("transformer", cls, "forward", "denoiser", RunShape(
            seq_len=frames, text_len=TEXT_LEN + DURATION_TOKENS, timestep_tokens=1), s.steps,
            f"{s.steps} steps × 1 row embedding the call's timestep"))
        if rows > 1:
            runs.append(ComponentRun("transformer", cls, "forward", "denoiser", replace(shape, timestep_tokens=0),
                                     s.steps * (rows - 1), f"{s.steps} steps × {rows - 1} more row(s) ({waveforms} "
                                     f"waveform(s) × {passes} pass(es) in all), sharing the timestep"))
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "decode", "vae_decoder",
                                 RunShape(seq_len=frames), waveforms, f"{waveforms} waveform(s)"))
    if cfg and not negative:
        notes.append("no negative prompt: the unconditional embeddings are zeros, so the text encoder and the text "
                     "projection run on the prompts only")
    return Plan(name, s, passes, tuple(runs), tuple(notes))
