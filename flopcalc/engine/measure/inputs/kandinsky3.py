"""Input builders for Kandinsky 3 (``Kandinsky3Pipeline``): the ``Kandinsky3UNet`` and the MoVQ
``VQModel``. Imported by ``flopcalc.engine.measure.harness``."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder


@input_builder("Kandinsky3UNet", settings=("height", "width", "text_len"))
def _kandinsky3_unet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """sample (1, in_channels, H/8, W/8), timestep (1,), encoder_hidden_states
    (1, text_len, encoder_hid_dim) and encoder_attention_mask (1, text_len), as
    ``Kandinsky3Pipeline`` passes them (the mask is required: ``Kandinsky3AttentionPooling``
    calls ``context_mask.to(...)``; its values never change the count)."""
    return {
        "sample": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], 8, "height"),
                       _exact_div(s["width"], 8, "width")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "encoder_hid_dim")),
        "encoder_attention_mask": _f32(1, s["text_len"]),
    }


@input_builder("VQModel", settings=("height", "width", "force_not_quantize"), calls=("decode", "encode"))
def _vq_model_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: h (1, vq_embed_dim, H/f, W/f), f = 2**(len(block_out_channels)-1). With the setting
    ``force_not_quantize`` = 1 the call is the one the Kandinsky pipelines make,
    ``movq.decode(h, force_not_quantize=True)`` (no codebook lookup): the harness passes tensors
    and None only, so the builder binds the keyword on this model instance
    (``model.decode = functools.partial(model.decode, force_not_quantize=True)``) and the fixture's
    ``settings`` record it. (With 0 the quantizer runs: ``cdist``/``argmin``/embedding lookup,
    which neither counter counts, so both give the same numbers.)
    encode: x (1, in_channels, H, W); ``force_not_quantize`` does not apply."""
    if call == "encode":
        return {"x": _f32(1, _cfg(model, "in_channels"), s["height"], s["width"])}
    if s["force_not_quantize"]:
        model.decode = functools.partial(model.decode, force_not_quantize=True)
    factor = 2 ** (len(_cfg(model, "block_out_channels")) - 1)
    vq_dim = _cfg(model, "vq_embed_dim") or _cfg(model, "latent_channels")
    return {"h": _f32(1, vq_dim, _exact_div(s["height"], factor, "height"), _exact_div(s["width"], factor, "width"))}


_vq_model_inputs.method_note = (  # type: ignore[attr-defined]
    "VQModel.decode is bound with force_not_quantize=True (functools.partial on the instance), as the Kandinsky "
    "pipelines call movq.decode: no codebook lookup; the setting force_not_quantize=1 records it"
)
