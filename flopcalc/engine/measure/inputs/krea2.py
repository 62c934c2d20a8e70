"""Input builders for Krea 2 (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``Krea2Transformer2DModel`` and the Qwen3-VL text encoders (``Qwen3VLModel``, ``Qwen3VLForConditionalGeneration``).

Nothing needs help on meta: the rotary table (``Krea2RotaryPosEmbed``) is computed from the position ids the
pipeline passes, with no matmul; the text fusion reshapes the tapped layers. The text encoders get the SDPA
text-encoder inputs (``text_encoders.py``): token ids ``(1, seq_len)``, no mask, and no position ids (the language
model then numbers the text tokens itself, on all three mRoPE axes: the same dense work as the pipeline's explicit
positions). The VAE is an ``AutoencoderKLQwenImage`` (``qwen_image.py``'s builder)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder
from flopcalc.engine.measure.inputs.text_encoders import _sdpa_text_inputs

#: ``Krea2Pipeline``: ``vae_scale_factor`` 8, latents packed 2×2 (16 pixels per token side).
TOKEN_SIDE = 16


@input_builder("Krea2Transformer2DModel", settings=("height", "width", "text_len"))
def _krea2_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """One pass as ``Krea2Pipeline.__call__`` feeds it (pipeline_krea2.py:646-654): hidden_states (1, N, in_channels),
    N = (H/16)(W/16) packed tokens; encoder_hidden_states (1, text_len, num_text_layers, text_hidden_dim); timestep
    (1,); position_ids (text_len + N, 3); encoder_attention_mask (1, text_len) bool."""
    tokens = _exact_div(s["height"], TOKEN_SIDE, "height") * _exact_div(s["width"], TOKEN_SIDE, "width")
    t = s["text_len"]
    return {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "encoder_hidden_states": _f32(1, t, _cfg(model, "num_text_layers"), _cfg(model, "text_hidden_dim")),
        "timestep": _f32(1),
        "position_ids": _f32(t + tokens, 3),
        "encoder_attention_mask": TensorSpec((1, t), torch.bool),
    }


input_builder("Qwen3VLModel", "Qwen3VLForConditionalGeneration", settings=("seq_len",))(_sdpa_text_inputs)
