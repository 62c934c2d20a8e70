"""Input builder for the SDXL ControlNet-Union, ``ControlNetUnionModel``, as
``StableDiffusionXLControlNetUnionPipeline`` feeds it (pipeline_controlnet_union_sd_xl.py, denoising loop)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.architectures.controlnet_union import CONDITIONS
from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, _unet_2d_condition_inputs, input_builder


@input_builder("ControlNetUnionModel", settings=("height", "width", "text_len"))
def _controlnet_union_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """The UNet's inputs (``sample``, ``timestep``, ``encoder_hidden_states``, SDXL's ``added_cond_kwargs``),
    ``control_type`` (1, num_control_type): the K-hot mode vector; and, bound on the instance
    (``functools.partial``: the harness passes tensors and None only), ``controlnet_cond`` the list of
    control images, one (1, conditioning_channels, H, W), with ``control_type_idx`` ``[0]``."""
    inputs = _unet_2d_condition_inputs(model, call, s)
    images = [torch.zeros(1, _cfg(model, "conditioning_channels"), s["height"], s["width"], device="meta")
              for _ in range(CONDITIONS)]
    model.forward = functools.partial(model.forward, controlnet_cond=images, control_type_idx=list(range(CONDITIONS)))
    inputs["control_type"] = _f32(1, _cfg(model, "num_control_type"))
    return inputs


_controlnet_union_inputs.method_note = (  # type: ignore[attr-defined]
    "ControlNetUnionModel.forward is bound with controlnet_cond=[one (1, conditioning_channels, H, W) meta image] and "
    "control_type_idx=[0] (functools.partial on the instance: a list is not a harness input), as the union pipeline "
    "passes one control image and mode."
)
