"""SparseCtrl's ControlNet (``SparseControlNetModel``): how it is fed on meta.

``AnimateDiffSparseControlNetPipeline.__call__`` (diffusers ``pipelines/animatediff/pipeline_animatediff_sparsectrl.py``
:968) calls it with the UNet's inputs (``sample`` ``(B, C, F, H/8, W/8)``, the timestep, the text states repeated per
frame ``(B·F, text_len, cross_attention_dim)``), ``controlnet_cond`` ``(1, conditioning_channels, F, h', w')`` and
``conditioning_mask`` ``(1, 1, F, h', w')`` (``prepare_sparse_control_conditioning``, :671: the conditioning frames
placed at their indices among ``F`` zero frames, one video for the whole batch). ``h' × w'`` is the latent size for
the simplified embedding (the frames are VAE latents, ``prepare_image`` :650) and the image size ``H × W``
otherwise. With ``rows`` (2: the doubled CFG batch), ``sample`` and the text states get ``rows`` rows and the
conditioning stays one video, as the pipeline calls it: the fixture is the whole batched call.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder


@input_builder("SparseControlNetModel", settings=("height", "width", "num_frames", "text_len"), optional=("rows",))
def _sparse_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """sample (1, in_channels, F, H/8, W/8), timestep (1,), encoder_hidden_states (F, text_len, cross_attention_dim),
    controlnet_cond (1, conditioning_channels, F, ·, ·) and conditioning_mask (1, 1, F, ·, ·) at the latent size
    (simplified embedding) or the image size."""
    frames, rows = s["num_frames"], s.get("rows") or 1
    h, w = _exact_div(s["height"], 8, "height"), _exact_div(s["width"], 8, "width")
    ch, cw = (h, w) if _cfg(model, "use_simplified_condition_embedding") else (s["height"], s["width"])
    return {
        "sample": _f32(rows, _cfg(model, "in_channels"), frames, h, w),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(rows * frames, s["text_len"], _cfg(model, "cross_attention_dim")),
        "controlnet_cond": _f32(1, _cfg(model, "conditioning_channels"), frames, ch, cw),
        "conditioning_mask": _f32(1, 1, frames, ch, cw) if _cfg(model, "concat_conditioning_mask") else None,
    }
