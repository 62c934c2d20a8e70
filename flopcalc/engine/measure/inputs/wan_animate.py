"""Input builders for Wan-Animate: ``WanAnimateTransformer3DModel`` and its CLIP image encoder ``CLIPVisionModel`` (the
UMT5 text encoder and the Wan VAE use ``wan.py``'s builders).

Shapes as ``WanAnimatePipeline`` (diffusers ``pipelines/wan/pipeline_wan_animate.py``, :1117-1128) feeds the
transformer at batch 1 for one segment. Nothing needs help on meta: the motion encoder's QR decomposition
(``torch.linalg.qr`` of its synthesis weight) runs on meta and counts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder
from flopcalc.engine.measure.inputs.clip_vision import _clip_vision_inputs

#: The Wan VAE's factors, which the pipeline reads.
SPATIAL, TEMPORAL = 8, 4

input_builder("CLIPVisionModel", settings=("height", "width"))(_clip_vision_inputs)


@input_builder("WanAnimateTransformer3DModel", settings=("height", "width", "num_frames", "text_len", "image_tokens"))
def _wan_animate_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """One segment of ``num_frames`` frames (T = (num_frames − 1) // 4 + 1 latent frames): hidden_states
    (1, in_channels, T + 1, H/8, W/8) (noise, mask and the reference + conditioning latents, the reference frame
    first), timestep (1,), encoder_hidden_states (1, text_len, text_dim), encoder_hidden_states_image
    (1, image_tokens, image_dim) (CLIP ``hidden_states[-2]``), pose_hidden_states (1, latent_channels, T, H/8, W/8),
    face_pixel_values (1, 3, num_frames, s, s) with s the ``motion_encoder_size``."""
    h, w = _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width")
    frames = (s["num_frames"] - 1) // TEMPORAL + 1
    latent = (_cfg(model, "in_channels") - 4) // 2
    size = _cfg(model, "motion_encoder_size")
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames + 1, h, w)),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_dim"))),
        "encoder_hidden_states_image": TensorSpec((1, s["image_tokens"], _cfg(model, "image_dim"))),
        "pose_hidden_states": TensorSpec((1, latent, frames, h, w)),
        "face_pixel_values": TensorSpec((1, 3, s["num_frames"], size, size)),
    }
