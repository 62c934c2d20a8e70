"""Input builder for the Qwen-Image ControlNet, ``QwenImageControlNetModel``, as ``QwenImageControlNetPipeline`` and
``QwenImageControlNetInpaintPipeline`` feed it (their denoising loops): the transformer's inputs at batch 1
(:mod:`flopcalc.engine.measure.inputs.qwen_image`: the packed latent ``(1, (H/16)(W/16), in_channels)``, the text
states, the timestep, ``img_shapes`` as a Python list constant) plus ``controlnet_cond``, the packed control latent
``(1, (H/16)(W/16), in_channels + extra_condition_channels)``. The pipelines pass ``img_shapes`` flat,
``[(1, H/16, W/16)] * batch``; ``QwenEmbedRope`` reads the first entry either way. Nothing needs help on meta."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder
from flopcalc.engine.measure.inputs.qwen_image import PACKING, VAE_SCALE_FACTOR, _PythonConstant


@dataclass(frozen=True)
class _FlatShapes(TensorSpec):
    """``img_shapes`` as the ControlNet pipelines build it, ``[(1, H/16, W/16)]`` (tuples, not nested lists)."""

    grid: tuple = ()

    def make(self):  # type: ignore[override]
        return _PythonConstant([tuple(self.grid)], self.shape, f"python list [{tuple(self.grid)}]: img_shapes as the "
                               "Qwen-Image ControlNet pipelines pass it (a wrapper constant, not a thop input)")


@input_builder("QwenImageControlNetModel", settings=("height", "width", "text_len"))
def _qwen_image_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict:
    """hidden_states, controlnet_cond, encoder_hidden_states, timestep and img_shapes [(1, H/16, W/16)]."""
    rows = _div(s["height"], VAE_SCALE_FACTOR * PACKING, "height")
    cols = _div(s["width"], VAE_SCALE_FACTOR * PACKING, "width")
    channels = _cfg(model, "in_channels")
    return {
        "hidden_states": TensorSpec((1, rows * cols, channels)),
        "controlnet_cond": TensorSpec((1, rows * cols, channels + _cfg(model, "extra_condition_channels"))),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "joint_attention_dim"))),
        "timestep": TensorSpec((1,)),
        "img_shapes": _FlatShapes((1, 3), torch.int64, grid=(1, rows, cols)),
    }
