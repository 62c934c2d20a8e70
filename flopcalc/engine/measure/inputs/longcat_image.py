"""Input builder for ``LongCatImageTransformer2DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Nothing needs help on meta: the rotary table (``LongCatImagePosEmbed``) is computed from the
position ids the pipeline passes, with no matmul. The text encoder is a ``Qwen2_5_VLForConditionalGeneration`` and
the VAE an ``AutoencoderKL`` (their builders are the harness's and ``text_encoders.py``'s)."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder

#: ``LongCatImagePipeline``: latents of H/8 × W/8 packed 2×2 (16 pixels per token side).
TOKEN_SIDE = 16


@input_builder("LongCatImageTransformer2DModel", settings=("height", "width", "text_len"),
               optional=("reference_height", "reference_width"))
def _longcat_image_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``LongCatImagePipeline.__call__`` feeds one pass (pipeline_longcat_image.py, denoising loop):
    hidden_states (1, (H/16)(W/16), in_channels), timestep (1,), encoder_hidden_states (1, text_len,
    joint_attention_dim), txt_ids (text_len, 3), img_ids ((H/16)(W/16), 3); with a reference image
    (``LongCatImageEditPipeline``) its packed latent's tokens follow the latent's, ids alike."""
    tokens = _exact_div(s["height"], TOKEN_SIDE, "height") * _exact_div(s["width"], TOKEN_SIDE, "width")
    if "reference_height" in s:
        tokens += (_exact_div(s["reference_height"], TOKEN_SIDE, "reference_height")
                   * _exact_div(s["reference_width"], TOKEN_SIDE, "reference_width"))
    return {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "txt_ids": _f32(s["text_len"], 3),
        "img_ids": _f32(tokens, 3),
    }
