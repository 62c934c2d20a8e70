"""Input builder for ``HeliosTransformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Its VAE (``AutoencoderKLWan``) and text encoder (``UMT5EncoderModel``) use the Wan builders.

Shapes as ``HeliosPipeline`` / ``HeliosPyramidPipeline`` (diffusers ``pipelines/helios/``) call it at batch 1, with
their default history (``history_sizes`` [16, 2, 1], ``keep_first_frame``): ``num_frames`` video frames of one chunk
become ``(num_frames − 1) // 4 + 1`` latent frames (the default chunk: 33 frames, 9 latent), ``H × W`` pixels an
``H/8 × W/8`` latent; setting ``pyramid_scale`` k (the pyramid pipeline's early stages) denoises the chunk at
``H/8/k × W/8/k`` while the histories stay at ``H/8 × W/8``. The histories: short (the first-frame prefix and one
frame), mid (2 frames), long (16 frames), with the frame indices the pipelines split off ``arange(1 + 16 + 2 + 1 + T)``.

What needed help: ``HeliosRotaryPosEmbed.get_frequency_batched`` (transformer_helios.py:340-346) opens
``torch.autocast(device_type=pos.device.type, enabled=False)``, which refuses the ``meta`` device type; on meta the
builder runs the same ``einsum`` outer product, ``repeat_interleave``, ``cos`` and ``sin`` without the (disabled)
autocast context. The outer product is a broadcast multiply (no matmul FlopCounterMode counts), as on real data.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder

SPATIAL, TEMPORAL = 8, 4
#: The pipelines' default ``history_sizes`` (long, mid, 1x) and the first-frame prefix of ``keep_first_frame``.
LONG, MID, SHORT = 16, 2, 1 + 1


@input_builder("HeliosTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("pyramid_scale",))
def _helios_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, in_channels, T, h/k, w/k), timestep (1,), encoder_hidden_states (1, text_len, text_dim), the
    histories latents_history_short / _mid / _long (1, in_channels, 2 | 2 | 16, h, w) and their int64 frame indices
    (1, T), (1, 2), (1, 2), (1, 16)."""
    _no_meta_autocast(model.rope)
    h, w = _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width")
    k = int(s.get("pyramid_scale", 1))
    frames = (int(s["num_frames"]) - 1) // TEMPORAL + 1
    c = _cfg(model, "in_channels")
    return {
        "hidden_states": TensorSpec((1, c, frames, _div(h, k, "latent height"), _div(w, k, "latent width"))),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_dim"))),
        "indices_hidden_states": TensorSpec((1, frames), torch.int64),
        "indices_latents_history_short": TensorSpec((1, SHORT), torch.int64),
        "indices_latents_history_mid": TensorSpec((1, MID), torch.int64),
        "indices_latents_history_long": TensorSpec((1, LONG), torch.int64),
        "latents_history_short": TensorSpec((1, c, SHORT, h, w)),
        "latents_history_mid": TensorSpec((1, c, MID, h, w)),
        "latents_history_long": TensorSpec((1, c, LONG, h, w)),
    }


def _no_meta_autocast(rope: nn.Module) -> None:
    """``get_frequency_batched`` without its disabled autocast context (see the module doc)."""
    def get_frequency_batched(freqs_base: torch.Tensor, pos: torch.Tensor):
        freqs = torch.einsum("d,bthw->dbthw", freqs_base, pos).repeat_interleave(2, dim=0)
        return freqs.cos(), freqs.sin()

    rope.get_frequency_batched = get_frequency_batched
