"""Input builder for BRIA FIBO 2 (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``BriaFibo2Transformer2DModel``. Nothing needs help on meta: the rotary tables (``RopeEmbedder``) are precomputed on
the CPU and indexed by the position grids, and the gist count is read from the text tensor's shape (no mask). One
thing does: the Perceiver slices its ``latent_queries`` parameter under ``torch.no_grad``, a view that requires grad
with no grad function, on which FlopCounterMode's module tracker fails (``Expected gradient function to be set``); the
builder turns the model's ``requires_grad`` off (what an inference pipeline's weights need anyway: no FLOP changes).
The text
encoder is a ``Qwen3VLForConditionalGeneration`` (``krea2.py``'s builder), the VAE an ``AutoencoderKLFlux2``
(``flux2.py``'s builder)."""

from __future__ import annotations

from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder

#: ``BriaFibo2Pipeline``: ``vae_scale_factor`` 8 (the Flux 2 VAE); ``TEXT_ENCODER_OUT_LAYERS`` holds 6 bundles.
VAE_SCALE_FACTOR, BUNDLES = 8, 6


@input_builder("BriaFibo2Transformer2DModel", settings=("height", "width", "text_len"))
def _bria_fibo2_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """One pass as ``BriaFibo2Pipeline.__call__`` feeds it (pipeline_bria_fibo2.py:817-824): hidden_states
    (1, in_channels, H/8, W/8), the unpacked latent; timestep (1,); encoder_hidden_states (1, 6, text_len,
    cap_feat_dim), the six bundles; no encoder_attention_mask (nothing padded) and no context_latents (generation)."""
    model.requires_grad_(False)  # see the module docstring: the module tracker and the sliced latent_queries
    h = _exact_div(s["height"], VAE_SCALE_FACTOR, "height")
    w = _exact_div(s["width"], VAE_SCALE_FACTOR, "width")
    return {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), h, w),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, BUNDLES, s["text_len"], _cfg(model, "cap_feat_dim")),
    }
