"""Input builder for ``BriaTransformer2DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Nothing needs help on meta: the rotary table (``BriaEmbedND``) is computed from the
position ids the pipeline passes, with no matmul. The VAE is an ``AutoencoderKL`` and the text encoder a
``T5EncoderModel`` (the harness's own builders)."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder

#: ``BriaPipeline``: latents of H/8 × W/8 packed 2×2 (16 pixels per token side).
TOKEN_SIDE = 16


@input_builder("BriaTransformer2DModel", settings=("height", "width", "text_len"))
def _bria_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``BriaPipeline.__call__`` feeds one row (pipeline_bria.py:686-694): hidden_states (1, (H/16)(W/16),
    in_channels), the packed latent; timestep (1,); encoder_hidden_states (1, text_len, joint_attention_dim);
    txt_ids (text_len, 3) and img_ids ((H/16)(W/16), 3), 2-D as the pipeline passes them."""
    tokens = _exact_div(s["height"], TOKEN_SIDE, "height") * _exact_div(s["width"], TOKEN_SIDE, "width")
    return {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "txt_ids": _f32(s["text_len"], 3),
        "img_ids": _f32(tokens, 3),
    }
