"""Input builder for the FLUX.1 ControlNet, ``FluxControlNetModel``, as ``FluxControlNetPipeline``
feeds it (pipeline_flux_controlnet.py, denoising loop). Runs on meta as built, with no help."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _ids, input_builder


@input_builder("FluxControlNetModel", settings=("height", "width", "text_len"))
def _flux_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states: the packed latent (1, (H/16)(W/16), in_channels); controlnet_cond: the packed
    VAE latent of the control image (same shape), or, with an ``input_hint_block`` (XLabs style,
    ``conditioning_embedding_channels`` set), the control image's pixels (1, 3, H, W); for a Union
    model (``num_mode`` set) controlnet_mode (1, 1) int64; encoder_hidden_states (1, text_len,
    joint_attention_dim), pooled_projections, timestep, guidance (``guidance_embeds``), img_ids,
    txt_ids."""
    tokens = _exact_div(s["height"], 16, "height") * _exact_div(s["width"], 16, "width")
    in_channels = _cfg(model, "in_channels")
    if model.input_hint_block is None:
        cond = _f32(1, tokens, in_channels)
    else:
        cond = _f32(1, 3, s["height"], s["width"])
    inputs = {
        "hidden_states": _f32(1, tokens, in_channels),
        "controlnet_cond": cond,
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "pooled_projections": _f32(1, _cfg(model, "pooled_projection_dim")),
        "timestep": _f32(1),
        "img_ids": _f32(tokens, 3),
        "txt_ids": _f32(s["text_len"], 3),
    }
    if _cfg(model, "num_mode") is not None:
        inputs["controlnet_mode"] = _ids(1, 1)
    if _cfg(model, "guidance_embeds"):
        inputs["guidance"] = _f32(1)
    return inputs
