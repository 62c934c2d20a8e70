"""Input builder for ``AuraFlowTransformer2DModel`` (AuraFlow), as ``AuraFlowPipeline.__call__`` feeds it:
the latent ``(1, C, H/8, W/8)``, the Pile-T5 states ``(1, text_len, joint_attention_dim)`` and the
timestep ``(1,)``. Nothing needs help on meta. The Pile-T5 encoder (``UMT5EncoderModel``) uses the
builder of ``inputs_wan.py``; the VAE the one of ``measure.py``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _latent, input_builder


@input_builder("AuraFlowTransformer2DModel", settings=("height", "width", "text_len"))
def _aura_flow_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, C, H/8, W/8), encoder_hidden_states (1, text_len, joint_attention_dim), timestep (1,)."""
    return {
        "hidden_states": _latent(model, s),
        "encoder_hidden_states": TensorSpec((1, int(s["text_len"]), _cfg(model, "joint_attention_dim")), torch.float32),
        "timestep": TensorSpec((1,), torch.float32),
    }
