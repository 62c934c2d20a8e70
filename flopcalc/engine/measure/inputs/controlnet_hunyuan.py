"""Input builder for the HunyuanDiT ControlNet, ``HunyuanDiT2DControlNetModel``, as ``HunyuanDiTControlNetPipeline``
feeds it (pipeline_hunyuandit_controlnet.py, the denoising loop): the transformer's inputs
(:mod:`flopcalc.engine.measure.inputs.hunyuan_dit`: latent, timestep, BERT and mT5 states with their masks, image
meta size, style, and the pipeline's rotary table computed on CPU by its own helpers) plus ``controlnet_cond``, the
control image's VAE latent ``(1, in_channels, H/8, W/8)``. Nothing else needs help on meta."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import _cfg, _exact_div, _f32, input_builder
from flopcalc.engine.measure.inputs.hunyuan_dit import METHOD_NOTE, _PIPELINE_VAE_FACTOR, _hunyuan_dit_inputs


@input_builder("HunyuanDiT2DControlNetModel", settings=("height", "width", "text_len"))
def _hunyuan_dit_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict:
    """The transformer's inputs and ``controlnet_cond`` (1, in_channels, H/8, W/8)."""
    inputs = _hunyuan_dit_inputs(model, call, s)
    inputs["controlnet_cond"] = _f32(1, _cfg(model, "in_channels"),
                                     _exact_div(s["height"], _PIPELINE_VAE_FACTOR, "height"),
                                     _exact_div(s["width"], _PIPELINE_VAE_FACTOR, "width"))
    return inputs


_hunyuan_dit_controlnet_inputs.method_note = METHOD_NOTE  # type: ignore[attr-defined]
