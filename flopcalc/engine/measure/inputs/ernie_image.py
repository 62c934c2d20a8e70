"""Input builders for ERNIE-Image (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``ErnieImageTransformer2DModel`` and the text path of ``Mistral3Model``.

One module needs help on meta: the rotary table (``ErnieImageEmbedND3``, built inside the forward from the
position ids) opens ``torch.autocast(device_type=...)``, which rejects ``"meta"``. The builder makes
``model.pos_embed`` run its own forward on CPU zeros of the ids' shape (its ``einsum`` is an outer product, which
torch counts as no FLOP; the ids' values change no count) and moves the table to meta. The text mask is built from
``text_lens`` with no matmul; the masked attention runs on the dense scores. The text encoder gets the
SDPA text-encoder inputs (``text_encoders.py``): token ids ``(1, seq_len)``, no mask (the pipeline passes none).
The VAE is an ``AutoencoderKLFlux2`` (``flux2.py``'s builder)."""

from __future__ import annotations

from collections.abc import Mapping

import types

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder
from flopcalc.engine.measure.inputs.text_encoders import _sdpa_text_inputs

#: ``ErnieImagePipeline``: ``vae_scale_factor`` 16 (the ×8 VAE and its 2×2 patchify).
LATENT_FACTOR = 16


ROPE_NOTE = ("model.pos_embed (ErnieImageEmbedND3) runs its forward on CPU zeros of the position ids' shape, the "
             "table moved to meta (its torch.autocast(device_type=...) rejects meta; its einsum is an outer product, "
             "no counted FLOP)")


def _cpu_pos_embed_forward(self: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return type(self).forward(self, torch.zeros(ids.shape, dtype=ids.dtype, device="cpu")).to(ids.device)


def patch_pos_embed(model: nn.Module) -> None:
    """Make ``model.pos_embed`` run on CPU (idempotent)."""
    if not getattr(model.pos_embed, "_runs_on_cpu", False):
        model.pos_embed.forward = types.MethodType(_cpu_pos_embed_forward, model.pos_embed)
        model.pos_embed._runs_on_cpu = True
        model._measure_notes = (*getattr(model, "_measure_notes", ()), ROPE_NOTE)


@input_builder("ErnieImageTransformer2DModel", settings=("height", "width", "text_len"))
def _ernie_image_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """One row as ``ErnieImagePipeline.__call__`` feeds it (pipeline_ernie_image.py:346-352): hidden_states
    (1, in_channels, H/16, W/16), timestep (1,), text_bth (1, text_len, text_in_dim), text_lens (1,) int64;
    ``model.pos_embed`` made to run on CPU."""
    patch_pos_embed(model)
    return {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], LATENT_FACTOR, "height"),
                              _exact_div(s["width"], LATENT_FACTOR, "width")),
        "timestep": _f32(1),
        "text_bth": _f32(1, s["text_len"], _cfg(model, "text_in_dim")),
        "text_lens": TensorSpec((1,), torch.int64),
    }


input_builder("Mistral3Model", settings=("seq_len",))(_sdpa_text_inputs)
