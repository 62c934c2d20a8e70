"""Input builder for ``SkyReelsV2Transformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Its VAE (``AutoencoderKLWan``) and text encoder (``UMT5EncoderModel``) use the Wan
builders (``flopcalc/engine/measure/inputs/wan.py``).

Shapes as the SkyReels V2 pipelines feed it at batch 1 (diffusers ``pipelines/skyreels_v2/``): ``num_frames``
video frames become ``(num_frames − 1) // 4 + 1`` latent frames, ``height × width`` pixels an ``H/8 × W/8``
latent; the prompt's UMT5 states (``text_len`` tokens). ``SkyReelsV2Pipeline`` passes one timestep
(``(1,)``); the diffusion-forcing pipelines pass ``enable_diffusion_forcing=True`` and one timestep per latent
frame (``(1, T)``), ``fps`` (a list with one 0/1 id per sample, ``fps_embeds``) and, when ``causal_block_size``
is given, first call ``transformer._set_ar_attention(causal_block_size)`` (a block-causal attention mask).

What needed help: nothing (the ``bool`` and the ``fps`` list are passed as constants).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder
from flopcalc.engine.measure.inputs.wan import VAE_SCALE_SPATIAL, VAE_SCALE_TEMPORAL, _latent_frames

#: ``fps_embeds = [0 if i == 16 else 1 for i in fps_embeds]`` at the default ``fps`` 24: id 1.
FPS_ID = 1


@input_builder("SkyReelsV2Transformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("diffusion_forcing", "causal_block_size", "image_tokens"))
def _skyreels_v2_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """hidden_states (1, in_channels, T, H/8, W/8), T = (num_frames − 1)/4 + 1; encoder_hidden_states
    (1, text_len, text_dim); timestep (1,), or with ``diffusion_forcing`` (1, T) plus the constants
    ``enable_diffusion_forcing=True`` and ``fps=[1]`` (the pipeline passes fps on every diffusion-forcing call);
    ``causal_block_size`` sets the transformer's ``num_frame_per_block`` first, as the pipeline does; with
    ``image_tokens`` (``SkyReelsV2ImageToVideoPipeline``) encoder_hidden_states_image (1, image_tokens, image_dim),
    the CLIP vision ``hidden_states[-2]``."""
    frames = _latent_frames(s["num_frames"], VAE_SCALE_TEMPORAL)
    h = _div(s["height"], VAE_SCALE_SPATIAL, "height")
    w = _div(s["width"], VAE_SCALE_SPATIAL, "width")
    forcing = bool(s.get("diffusion_forcing"))
    if s.get("causal_block_size"):
        model._set_ar_attention(int(s["causal_block_size"]))
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, h, w)),
        "timestep": TensorSpec((1, frames) if forcing else (1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_dim"))),
    }
    if s.get("image_tokens"):
        inputs["encoder_hidden_states_image"] = TensorSpec((1, s["image_tokens"], _cfg(model, "image_dim")))
    if forcing:
        inputs["enable_diffusion_forcing"] = True
        inputs["fps"] = [FPS_ID]
    return inputs
