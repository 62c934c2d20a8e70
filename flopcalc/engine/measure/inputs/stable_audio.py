"""Stable Audio Open (``StableAudioDiTModel``, ``StableAudioProjectionModel``, ``AutoencoderOobleck``): how they are
fed on meta, as ``StableAudioPipeline.__call__`` (diffusers ``pipelines/stable_audio/pipeline_stable_audio.py``)
calls them.

* The DiT (:693): ``hidden_states`` ``(rows, in_channels, seq_len)``, ``timestep`` ``(1,)`` (``t.unsqueeze(0)``:
  one for the whole batch), ``encoder_hidden_states`` ``(rows, text_len, cross_attention_input_dim)`` (the projected
  text and the two duration tokens), ``global_hidden_states`` ``(rows, 1, global_states_input_dim)`` and the rotary
  embedding ``get_1d_rotary_pos_embed(attention_head_dim // 2, seq_len + 1, use_real=True,
  repeat_interleave_real=False)`` (:680, computed on CPU by diffusers' own helper, the (cos, sin) pair stacked into one
  tensor, which the processor unpacks the same way, and moved to meta). ``rows`` (setting, default 1): the batch
  (2 under classifier-free guidance).
* The projection model: ``text_hidden_states`` ``(1, seq_len, text_encoder_dim)`` when ``seq_len`` is set (the
  ``encode_prompt`` call), and ``start_seconds`` / ``end_seconds`` ``(1,)`` when ``numbers`` is set (the
  ``encode_duration`` call); both in one call when both are set.
* The VAE: ``decode`` ``z`` ``(1, decoder_input_channels, seq_len)``; ``encode`` ``x``
  ``(1, audio_channels, seq_len)``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, input_builder

METHOD_NOTE = ("rotary_embedding as StableAudioPipeline.__call__ step 7 computes it: get_1d_rotary_pos_embed("
               "attention_head_dim // 2, seq_len + 1, use_real=True, repeat_interleave_real=False) on CPU, the "
               "(cos, sin) pair stacked into one (2, N, d) tensor (the processor unpacks it the same way) and moved to "
               "meta; elementwise, nothing in it is counted")


@input_builder("StableAudioDiTModel", settings=("seq_len", "text_len"), optional=("rows",))
def _stable_audio_dit_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """See the module docstring."""
    from diffusers.models.embeddings import get_1d_rotary_pos_embed

    rows, frames = s.get("rows") or 1, s["seq_len"]
    cos, sin = get_1d_rotary_pos_embed(_cfg(model, "attention_head_dim") // 2, frames + 1, use_real=True,
                                       repeat_interleave_real=False)
    return {
        "hidden_states": _f32(rows, _cfg(model, "in_channels"), frames),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(rows, s["text_len"], _cfg(model, "cross_attention_input_dim")),
        "global_hidden_states": _f32(rows, 1, _cfg(model, "global_states_input_dim")),
        "rotary_embedding": torch.stack([cos, sin]).to("meta"),
    }


_stable_audio_dit_inputs.method_note = METHOD_NOTE  # type: ignore[attr-defined]


@input_builder("StableAudioProjectionModel", settings=(), optional=("seq_len", "numbers"))
def _stable_audio_projection_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """See the module docstring."""
    inputs: dict[str, TensorSpec | None] = {"text_hidden_states": None, "start_seconds": None, "end_seconds": None}
    if s.get("seq_len"):
        inputs["text_hidden_states"] = _f32(1, s["seq_len"], _cfg(model, "text_encoder_dim"))
    if s.get("numbers"):
        inputs["start_seconds"] = _f32(1)
        inputs["end_seconds"] = _f32(1)
    return inputs


@input_builder("AutoencoderOobleck", settings=("seq_len",), calls=("decode", "encode"))
def _autoencoder_oobleck_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """See the module docstring."""
    if call == "encode":
        return {"x": _f32(1, _cfg(model, "audio_channels"), s["seq_len"])}
    return {"z": _f32(1, _cfg(model, "decoder_input_channels"), s["seq_len"])}
