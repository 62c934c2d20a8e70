"""ControlNet (``ControlNetModel``): how it is fed on meta.

``ControlNetModel.forward`` takes the UNet's inputs (``sample``, ``timestep``,
``encoder_hidden_states``, SDXL's ``added_cond_kwargs``: built by ``measure.py``'s UNet builder, which
reads the same config keys) plus ``controlnet_cond``, the control image ``(1, conditioning_channels,
H, W)`` in pixels: ``prepare_image`` in ``pipelines/controlnet/pipeline_controlnet.py`` resizes it to
the generated size, 8 × the latent.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, _unet_2d_condition_inputs, input_builder


@input_builder("ControlNetModel", settings=("height", "width", "text_len"))
def _controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """The UNet's inputs and ``controlnet_cond`` ``(1, conditioning_channels, H, W)``."""
    inputs = _unet_2d_condition_inputs(model, call, s)
    inputs["controlnet_cond"] = _f32(1, _cfg(model, "conditioning_channels"), s["height"], s["width"])
    return inputs
