"""Input builder for the SD3 ControlNet, ``SD3ControlNetModel``, as ``StableDiffusion3ControlNetPipeline``
and ``StableDiffusion3ControlNetInpaintingPipeline`` feed it (their denoising loops). Runs on meta as
built, with no help."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.measure.harness import TensorSpec, _cfg, _f32, _sd3_inputs, input_builder


@input_builder("SD3ControlNetModel", settings=("height", "width", "text_len"))
def _sd3_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """The SD3 transformer's inputs (latent (1, C, H/8, W/8), joint text states, pooled embedding,
    timestep) and ``controlnet_cond`` (1, C + extra_conditioning_channels, H/8, W/8): the control
    image's VAE latent (with the mask for inpainting)."""
    inputs = _sd3_inputs(model, call, s)
    _, channels, h, w = inputs["hidden_states"].shape
    inputs["controlnet_cond"] = _f32(1, channels + _cfg(model, "extra_conditioning_channels"), h, w)
    return inputs
