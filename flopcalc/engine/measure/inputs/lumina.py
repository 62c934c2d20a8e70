"""Input builders for the Lumina family: ``Lumina2Transformer2DModel`` (Lumina-Image-2.0) and
``LuminaNextDiT2DModel`` (Lumina-Next-SFT). Their VAEs are ``AutoencoderKL`` (built in ``flopcalc/engine/measure/harness.py``).

Both need help on the meta device, in two different places:

* ``Lumina2RotaryPosEmbed.forward`` reads the caption mask's data (``attention_mask.sum(dim=1).tolist()``),
  which a meta tensor has none of. The builder swaps ``model.rope_embedder`` for
  :class:`CpuLumina2RotaryPosEmbed`: a CPU copy of the same parameter-free module (same theta,
  axes_dim, axes_lens, patch_size) run on CPU zeros of the input's shape and a full (all-ones)
  mask, its tensor outputs moved to meta. Nothing inside it is a matmul (index gathers, a concat
  and a patchify reshape), so no counted FLOP moves off the counter. A full mask is the upper
  bound of the run: every caption token is valid, so the joint stream is ``text_len + image tokens``.
* ``LuminaNextDiT2DModel`` takes its rotary table from the pipeline: ``LuminaPipeline.__call__``
  computes ``get_2d_rotary_pos_embed_lumina(transformer.head_dim, 384, 384, linear_factor,
  ntk_factor)`` every step. The builder calls that same helper on CPU and moves the table to meta.
  The model's blocks splat ``**cross_attention_kwargs``, so it is passed as the pipeline passes
  it, ``{"base_sequence_length": ...}``, with ``None`` instead of the pipeline's
  ``(default_image_size // 16) ** 2`` (the harness passes no ints; the value only rescales the
  softmax, it changes no FLOP).

Notes the builders leave on the model (``model._measure_notes``) reach the fixture's ``method``
text through the harness.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _ids, input_builder

#: Both Lumina pipelines hard-code ``self.vae_scale_factor = 8`` (pipeline_lumina.py, pipeline_lumina2.py).
LUMINA_LATENT_FACTOR = 8
#: ``LuminaPipeline.__call__`` asks ``get_2d_rotary_pos_embed_lumina`` for a 384 × 384 grid.
LUMINA_NEXT_ROPE_GRID = 384

ROPE_NOTE_LUMINA2 = (
    "Lumina2RotaryPosEmbed reads the caption mask's data (attention_mask.sum().tolist()), impossible on "
    "meta: model.rope_embedder was replaced by a CPU copy of the same parameter-free module (same theta, "
    "axes_dim, axes_lens, patch_size) run on CPU zeros of the input's shape and an all-ones mask (every "
    "caption token valid: the joint stream is text_len + image tokens, the upper bound), its tensor "
    "outputs moved to meta; it holds no matmul, so no counted FLOP leaves the counter."
)
ROPE_NOTE_LUMINA_NEXT = (
    "image_rotary_emb is the pipeline's own table: diffusers.models.embeddings."
    "get_2d_rotary_pos_embed_lumina(transformer.head_dim, 384, 384, linear_factor, ntk_factor) computed on "
    "CPU (as LuminaPipeline.__call__ does each step) and moved to meta; cross_attention_kwargs is "
    "{'base_sequence_length': None} (the pipeline passes (default_image_size // 16) ** 2 with "
    "proportional_attn; it only rescales the softmax)."
)


def _add_note(model: nn.Module, note: str) -> None:
    notes = list(getattr(model, "_measure_notes", ()))
    if note not in notes:
        notes.append(note)
    model._measure_notes = tuple(notes)




# --------------------------------------------------------------------------- Lumina-Image-2.0


class CpuLumina2RotaryPosEmbed(nn.Module):
    """``Lumina2RotaryPosEmbed`` run on CPU for a meta model (see the module doc)."""

    def __init__(self, rope: nn.Module) -> None:
        super().__init__()
        from diffusers.models.transformers.transformer_lumina2 import Lumina2RotaryPosEmbed

        with torch.device("cpu"):
            self.rope_on_cpu = Lumina2RotaryPosEmbed(theta=rope.theta, axes_dim=rope.axes_dim, axes_lens=rope.axes_lens,
                                             patch_size=rope.patch_size)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor):
        device = hidden_states.device
        out = self.rope_on_cpu(torch.zeros(hidden_states.shape, dtype=hidden_states.dtype, device="cpu"),
                       torch.ones(attention_mask.shape, dtype=attention_mask.dtype, device="cpu"))
        return tuple(o.to(device) if isinstance(o, torch.Tensor) else o for o in out)


def patch_lumina2_rope(model: nn.Module) -> None:
    """Swap ``model.rope_embedder`` for its CPU twin when the model is on meta (idempotent)."""
    rope = model.rope_embedder
    on_meta = any(p.is_meta for p in model.parameters())
    if on_meta and not isinstance(rope, CpuLumina2RotaryPosEmbed):
        model.rope_embedder = CpuLumina2RotaryPosEmbed(rope)
        _add_note(model, ROPE_NOTE_LUMINA2)


@input_builder("Lumina2Transformer2DModel", settings=("height", "width", "text_len"))
def _lumina2_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``Lumina2Pipeline.__call__`` feeds one pass (pipeline_lumina2.py, denoising loop):
    hidden_states (1, in_channels, H/8, W/8), timestep (1,), encoder_hidden_states
    (1, text_len, cap_feat_dim) (Gemma-2's ``hidden_states[-2]``), encoder_attention_mask
    (1, text_len) int64 (the tokenizer's mask). Patches the rotary module for meta."""
    patch_lumina2_rope(model)
    f = LUMINA_LATENT_FACTOR
    return {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], f, "height"),
                              _exact_div(s["width"], f, "width")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "cap_feat_dim")),
        "encoder_attention_mask": _ids(1, s["text_len"]),
    }


# --------------------------------------------------------------------------- Lumina-Next


def lumina_next_rotary_table(model: nn.Module, height: int, width: int) -> torch.Tensor:
    """The table ``LuminaPipeline.__call__`` passes as ``image_rotary_emb`` (its first step:
    ``current_timestep`` 0 is below ``scaling_watershed`` 1.0, so ``linear_factor`` is the size's
    ``scaling_factor`` and ``ntk_factor`` 1; the shape is the same at every step), on meta."""
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    default_image_size = _cfg(model, "sample_size") * LUMINA_LATENT_FACTOR
    scaling_factor = math.sqrt(width * height / default_image_size**2)
    table = get_2d_rotary_pos_embed_lumina(model.head_dim, LUMINA_NEXT_ROPE_GRID, LUMINA_NEXT_ROPE_GRID,
                                           linear_factor=scaling_factor, ntk_factor=1.0)
    return table.to("meta")


@input_builder("LuminaNextDiT2DModel", settings=("height", "width", "text_len"))
def _lumina_next_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | torch.Tensor | None]:
    """As ``LuminaPipeline.__call__`` feeds one pass (pipeline_lumina.py, denoising loop):
    hidden_states (1, in_channels, H/8, W/8), timestep (1,), encoder_hidden_states
    (1, text_len, cross_attention_dim) (Gemma's ``hidden_states[-2]``), encoder_mask (1, text_len)
    int64, image_rotary_emb (384, 384, head_dim/2) complex (the pipeline's helper, on CPU, moved
    to meta) and cross_attention_kwargs ``{"base_sequence_length": None}``."""
    f = LUMINA_LATENT_FACTOR
    h, w = _exact_div(s["height"], f, "height"), _exact_div(s["width"], f, "width")
    _add_note(model, ROPE_NOTE_LUMINA_NEXT)
    return {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), h, w),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "cross_attention_dim")),
        "encoder_mask": _ids(1, s["text_len"]),
        "image_rotary_emb": lumina_next_rotary_table(model, s["height"], s["width"]),
        "cross_attention_kwargs.base_sequence_length": None,
    }
