"""Input builder for NucleusMoE-Image (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``NucleusMoEImageTransformer2DModel``. The text encoder is a ``Qwen3VLForConditionalGeneration`` (``krea2.py``'s
builder), the VAE an ``AutoencoderKLQwenImage`` (``qwen_image.py``'s builder).

Help on meta: ``SwiGLUExperts._run_experts_for_loop`` (transformer_nucleusmoe_image.py:394-454) splits its rows with
``num_tokens_per_expert.tolist()``, data a meta tensor does not hold. The tensor is known without its data:
``NucleusMoELayer.forward`` builds it as ``torch.full((num_experts,), batch · capacity)`` (:589-594) and hands the
experts exactly ``num_experts · batch · capacity`` rows (no padding). The model builder binds
:func:`known_count_experts` as ``_run_experts_for_loop`` of every ``SwiGLUExperts``: the same code with that count
taken from the shapes, so the same matmuls on the same rows (expert-choice routing fixes each expert's row count;
only which tokens they are depends on the scores). ``tests/test_live_nucleusmoe_image.py`` runs the stock module on
CPU with real tensors against flopcalc, total and per module path."""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flopcalc.engine.measure.harness import _cfg, _exact_div, _f32, input_builder, model_builder
from flopcalc.engine.measure.inputs.qwen_image import _PythonConstant

#: ``NucleusMoEImagePipeline``: ``vae_scale_factor`` 8 (the Qwen-Image VAE), latents packed ``patch_size`` × ``patch_size``.
VAE_SCALE_FACTOR = 8

STAND_IN_NOTE = (
    "SwiGLUExperts._run_experts_for_loop (num_tokens_per_expert.tolist(), impossible on meta) is replaced on each "
    "expert module by flopcalc.engine.measure.inputs.nucleusmoe_image.known_count_experts: the same loop with each "
    "expert's row count (batch · capacity, the torch.full NucleusMoELayer builds) read from the shapes; the same "
    "matmuls on the same rows (tests/test_live_nucleusmoe_image.py runs the stock module on CPU against flopcalc)."
)


def known_count_experts(self: nn.Module, x: torch.Tensor, num_tokens_per_expert: torch.Tensor) -> torch.Tensor:
    """``SwiGLUExperts._run_experts_for_loop`` with ``num_tokens_per_expert`` read from the shapes: every expert's
    share is ``x.shape[0] / num_experts`` rows (``torch.full`` in ``NucleusMoELayer.forward``), no padding."""
    rows = x.shape[0] // self.num_experts
    outputs = []
    for expert_idx, x_expert in enumerate(torch.split(x, rows, dim=0)):
        gate, up = torch.matmul(x_expert, self.gate_up_proj[expert_idx]).chunk(2, dim=-1)
        outputs.append(torch.matmul(F.silu(gate) * up, self.down_proj[expert_idx]))
    return torch.cat(outputs, dim=0)


@model_builder("NucleusMoEImageTransformer2DModel")
def _build_transformer(config_dir: Path) -> nn.Module:
    """The diffusers class from its config on meta, with :func:`known_count_experts` on every expert module."""
    from diffusers import NucleusMoEImageTransformer2DModel
    from diffusers.models.transformers.transformer_nucleusmoe_image import SwiGLUExperts

    config = NucleusMoEImageTransformer2DModel.load_config(str(config_dir))
    with torch.device("meta"):
        model = NucleusMoEImageTransformer2DModel.from_config(config)
    for module in model.modules():
        if isinstance(module, SwiGLUExperts):
            module._run_experts_for_loop = types.MethodType(known_count_experts, module)
    model._measure_notes = [*getattr(model, "_measure_notes", []), STAND_IN_NOTE]
    return model.eval()


@input_builder("NucleusMoEImageTransformer2DModel", settings=("height", "width", "text_len"))
def _nucleusmoe_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """One pass as ``NucleusMoEImagePipeline.__call__`` feeds it (pipeline_nucleusmoe_image.py:573-581): hidden_states
    (1, N, in_channels), N = (H/8/p)(W/8/p) packed tokens; img_shapes [(1, H/8/p, W/8/p)]; encoder_hidden_states
    (1, text_len, joint_attention_dim); no mask (nothing padded: the pipeline drops an all-ones mask); timestep (1,)."""
    p = _cfg(model, "patch_size")
    rows = _exact_div(s["height"], VAE_SCALE_FACTOR * p, "height")
    cols = _exact_div(s["width"], VAE_SCALE_FACTOR * p, "width")
    return {
        "hidden_states": _f32(1, rows * cols, _cfg(model, "in_channels")),
        "img_shapes": _PythonConstant([(1, rows, cols)], (1, 3), f"python list [(1, {rows}, {cols})]: img_shapes as "
                                      "NucleusMoEImagePipeline passes it (a wrapper constant, not a thop input)"),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "timestep": _f32(1),
    }
