"""Input builder for ``OvisImageTransformer2DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Nothing needs help on meta: the rotary table (``OvisImagePosEmbed``) is computed from the
position ids the pipeline passes, with no matmul. The VAE is an ``AutoencoderKL`` (the harness's own builder)."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder

#: ``OvisImagePipeline``: ``vae_scale_factor`` 8, latents packed 2×2 (16 pixels per token side).
TOKEN_SIDE = 16


@input_builder("OvisImageTransformer2DModel", settings=("height", "width", "text_len"))
def _ovis_image_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``OvisImagePipeline.__call__`` feeds one pass (pipeline_ovis_image.py:648-656): hidden_states
    (1, (H/16)(W/16), in_channels), the packed latent; timestep (1,); encoder_hidden_states (1, text_len,
    joint_attention_dim); img_ids ((H/16)(W/16), 3) and txt_ids (text_len, 3), 2-D as the pipeline makes them."""
    tokens = _exact_div(s["height"], TOKEN_SIDE, "height") * _exact_div(s["width"], TOKEN_SIDE, "width")
    return {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "timestep": _f32(1),
        "img_ids": _f32(tokens, 3),
        "txt_ids": _f32(s["text_len"], 3),
    }
