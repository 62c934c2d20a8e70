"""ModelScope (``UNet3DConditionModel``): how it is fed on meta.

``TextToVideoSDPipeline.__call__`` (diffusers ``pipelines/deprecated/text_to_video_synthesis/
pipeline_text_to_video_synth.py``) calls the UNet on ``sample`` ``(B, C, F, H/8, W/8)`` and the prompt's
``encoder_hidden_states`` ``(B, 77, cross_attention_dim)``; the UNet repeats them per frame itself. Nothing needed help.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder


@input_builder("UNet3DConditionModel", settings=("height", "width", "num_frames", "text_len"))
def _unet_3d_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """sample (1, in_channels, F, H/8, W/8), timestep (1,), encoder_hidden_states (1, text_len, cross_attention_dim)."""
    return {
        "sample": _f32(1, _cfg(model, "in_channels"), s["num_frames"], _exact_div(s["height"], 8, "height"),
                       _exact_div(s["width"], 8, "width")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "cross_attention_dim")),
    }


@input_builder("I2VGenXLUNet", settings=("height", "width", "num_frames", "text_len"))
def _i2vgen_xl_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """As ``I2VGenXLPipeline.__call__`` (``pipelines/deprecated/i2vgen_xl/pipeline_i2vgen_xl.py:695``) calls it at
    batch 1: sample and image_latents (1, in_channels, F, H/8, W/8) (the image's latent and F − 1 position masks),
    encoder_hidden_states (1, text_len, cross_attention_dim), fps (1,), image_embeddings (1, 1,
    cross_attention_dim) (the CLIP image embedding)."""
    latent = (1, _cfg(model, "in_channels"), s["num_frames"], _exact_div(s["height"], 8, "height"),
              _exact_div(s["width"], 8, "width"))
    cross = _cfg(model, "cross_attention_dim")
    return {"sample": _f32(*latent), "timestep": _f32(1), "encoder_hidden_states": _f32(1, s["text_len"], cross),
            "fps": _f32(1), "image_latents": _f32(*latent), "image_embeddings": _f32(1, 1, cross)}
