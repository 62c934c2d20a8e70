"""Input builders for CogView4 (``CogView4Pipeline.__call__``) and CogView3-Plus (``CogView3PlusPipeline``: the
transformer takes the same inputs, the T5 states as ``encoder_hidden_states``):

* ``CogView4Transformer2DModel``: the latent ``(1, C, H/8, W/8)``, the GLM states
  ``(1, text_len, text_embed_dim)``, the timestep ``(1,)`` and the size conditions ``original_size``,
  ``target_size``, ``crop_coords`` ``(1, 2)`` each; no ``attention_mask`` (the pipeline passes none) and
  no ``image_rotary_emb`` (the model's own ``rope`` builds it).
* ``GlmModel``: token ids ``(1, seq_len)`` only, as ``_get_glm_embeds`` calls it
  (``text_encoder(ids, output_hidden_states=True)``: no attention mask; the hidden states it collects are
  computed anyway, so the flag is left out).

Nothing needs help on meta.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, _latent, input_builder


@input_builder("CogView4Transformer2DModel", settings=("height", "width", "text_len"))
def _cogview4_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states, encoder_hidden_states, timestep and the three (1, 2) size conditions."""
    return {
        "hidden_states": _latent(model, s),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "text_embed_dim")),
        "timestep": _f32(1),
        "original_size": _f32(1, 2),
        "target_size": _f32(1, 2),
        "crop_coords": _f32(1, 2),
    }


@input_builder("GlmModel", settings=("seq_len",))
def _glm_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """Token ids ``(1, seq_len)`` int64."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64)}


input_builder("CogView3PlusTransformer2DModel", settings=("height", "width", "text_len"))(_cogview4_inputs)
