"""Input builders for SANA-Video: ``SanaVideoTransformer3DModel`` (the Wan VAE and Gemma-2 have theirs in
``wan.py`` and ``text_encoders.py``).

It runs on meta as built, with no help: the rotary linear attention (``SanaLinearAttnProcessor3_0``) is plain
``torch.matmul`` calls (``aten.bmm``), the cross-attention SDPA (bmm on meta), the rotary tables buffers sliced
per call.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _ids, input_builder

#: The Wan VAE's factors, which the SANA-Video pipelines read (the transformer's builder does not see the VAE).
VAE_SCALE_SPATIAL, VAE_SCALE_TEMPORAL = 8, 4


@input_builder("SanaVideoTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("expand_timesteps",))
def _sana_video_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``SanaVideoPipeline.__call__`` feeds it (pipeline_sana_video.py:944-957): hidden_states
    (1, in_channels, (num_frames − 1)//4 + 1, H/8, W/8), encoder_hidden_states (1, text_len, caption_channels), the
    prompt's encoder_attention_mask (1, text_len) int64, timestep (1,); with ``expand_timesteps`` 1 the per-token
    timestep of ``SanaImageToVideoPipeline`` (pipeline_sana_video_i2v.py:966-994), (1, 1, T/p_t, h/p_s, w/p_s),
    ``p_s = patch_size[1]``."""
    frames = (s["num_frames"] - 1) // VAE_SCALE_TEMPORAL + 1
    h, w = _exact_div(s["height"], VAE_SCALE_SPATIAL, "height"), _exact_div(s["width"], VAE_SCALE_SPATIAL, "width")
    pt, ps = _cfg(model, "patch_size")[0], _cfg(model, "patch_size")[1]
    return {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), frames, h, w),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "caption_channels")),
        "encoder_attention_mask": _ids(1, s["text_len"]),
        "timestep": _f32(1, 1, frames // pt, h // ps, w // ps) if s.get("expand_timesteps") else _f32(1),
    }
