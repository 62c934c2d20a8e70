"""AnimateDiff (``UNetMotionModel``): how it is fed on meta.

``AnimateDiffPipeline.__call__`` (diffusers ``pipelines/animatediff/pipeline_animatediff.py:825``) calls the UNet
on ``sample`` ``(B, C, F, H/8, W/8)`` (``prepare_latents``: ``num_frames`` latent frames, no temporal
compression) and ``encoder_hidden_states`` repeated per frame (``prompt_embeds.repeat_interleave(num_frames)``,
:765): at batch 1, ``(F, text_len, cross_attention_dim)``. Nothing needed help on meta.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder


@input_builder("UNetMotionModel", settings=("height", "width", "num_frames", "text_len"), optional=("pag",))
def _unet_motion_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """sample (1, in_channels, F, H/8, W/8), timestep (1,), encoder_hidden_states (F, text_len,
    cross_attention_dim); SDXL's ``added_cond_kwargs`` (text_embeds (1, P), time_ids (1, 6)) with
    ``addition_embed_type == "text_time"``. With ``pag`` (3 or 2 rows): ``AnimateDiffPAGPipeline``'s processors on
    its default layers and every input stacked (:func:`flopcalc.engine.measure.perturbed.perturb`)."""
    frames = s["num_frames"]
    inputs: dict[str, TensorSpec | None] = {
        "sample": _f32(1, _cfg(model, "in_channels"), frames, _exact_div(s["height"], 8, "height"),
                       _exact_div(s["width"], 8, "width")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(frames, s["text_len"], _cfg(model, "cross_attention_dim")),
    }
    if _cfg(model, "addition_embed_type") == "text_time":
        pooled = _cfg(model, "projection_class_embeddings_input_dim") - 6 * _cfg(model, "addition_time_embed_dim")
        inputs["added_cond_kwargs.text_embeds"] = _f32(1, pooled)
        inputs["added_cond_kwargs.time_ids"] = _f32(1, 6)
    if s.get("pag"):  # perturbed-attention guidance: AnimateDiffPAGPipeline's processors and batch
        from flopcalc.engine.measure.perturbed import perturb

        return perturb(model, s["pag"], inputs)
    return inputs
