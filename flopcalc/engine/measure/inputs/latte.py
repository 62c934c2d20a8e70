"""Input builder for ``LatteTransformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Its VAE (``AutoencoderKL``) and T5 text encoder use the shared builders.

Shapes as ``LattePipeline`` (diffusers ``pipelines/latte/pipeline_latte.py``, :836-842) calls it at batch 1: the
``num_frames`` latent frames of the 2D VAE (one per video frame), ``H/8 × W/8`` each; one timestep; the prompt's T5
states (``text_len`` tokens: the prompt's own length, ``mask_feature``), no attention mask; temporal attention on.

What needed help: nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder

SPATIAL = 8


@input_builder("LatteTransformer3DModel", settings=("height", "width", "num_frames", "text_len"))
def _latte_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, in_channels, F, H/8, W/8), timestep (1,), encoder_hidden_states (1, text_len,
    caption_channels)."""
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), int(s["num_frames"]),
                                     _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width"))),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "caption_channels"))),
    }
