"""Input builder for ``ChronoEditTransformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Its VAE (``AutoencoderKLWan``), text encoder (``UMT5EncoderModel``) and CLIP image encoder
(``CLIPVisionModel``) use the Wan and Wan-Animate builders.

Shapes as ``ChronoEditPipeline`` (diffusers ``pipelines/chronoedit/pipeline_chronoedit.py``, :681-702) feeds it at
batch 1: ``num_frames`` video frames become ``(num_frames − 1) // 4 + 1`` latent frames (5 frames, the default
without temporal reasoning: 2, the image and the edit), ``height × width`` pixels an ``H/8 × W/8`` latent; the noise
latent, the 4 mask channels and the condition latent concatenated (``in_channels``, 36); one timestep; the prompt's
UMT5 states (``text_len`` tokens) and the CLIP ``hidden_states[-2]`` (``image_tokens``).

What needed help: nothing (the rotary tables are buffers sliced per call, as Wan's).
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, input_builder
from flopcalc.engine.measure.inputs.wan import _wan_transformer_inputs


@input_builder("ChronoEditTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("image_tokens",))
def _chronoedit_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, in_channels, T, H/8, W/8), T = (num_frames − 1)/4 + 1; timestep (1,);
    encoder_hidden_states (1, text_len, text_dim); with ``image_tokens`` encoder_hidden_states_image
    (1, image_tokens, image_dim): the Wan builder's inputs (``flopcalc/engine/measure/inputs/wan.py``)."""
    return _wan_transformer_inputs(model, call, s)
