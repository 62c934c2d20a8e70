"""Input builders for the HunyuanImage 2.1 family: ``HunyuanImageTransformer2DModel`` and
``AutoencoderKLHunyuanImage`` (imported by ``flopcalc.engine.measure.harness``; see validation/README.md). The
text encoder, ``Qwen2_5_VLForConditionalGeneration``, has its builder in ``text_encoders.py``.

Settings are pipeline level: ``height``/``width`` in pixels (the latent is ``H/32 × W/32``,
``HunyuanImagePipeline.prepare_latents`` with the VAE's ``spatial_compression_ratio`` 32), ``text_len``
Qwen2.5-VL tokens and ``text_len_2`` byT5 glyph tokens the transformer sees.

One thing needs help on meta. ``forward`` (transformer_hunyuanimage.py:818) reorders each sample's text
tokens with boolean masks (``text_2[text_mask_2]``, ``text[~text_mask]``, ...): a data-dependent
``nonzero`` that a meta tensor cannot run. Whatever the masks hold, the joined sequence has ``T₁ + T₂``
tokens (valid and padded tokens are both kept, only their order changes). The builder passes each
mask as a :class:`KnownMask`: a meta tensor that knows it is all ones (the Qwen mask: a prompt filling
the tokens) or all zeros (the glyph mask of a prompt without quoted text, as ``encode_prompt`` builds it),
so boolean indexing with it selects everything or nothing, as it would on real data. Every other
operation sees the plain meta tensor. The model is not patched, and the reorder holds no matmul.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder

#: ``HunyuanImagePipeline.vae_scale_factor`` without a VAE (pipeline_hunyuanimage.py:215).
VAE_SCALE_FACTOR = 32


class KnownMask(torch.Tensor):
    """A meta mask whose every element is known to be ``value`` (see the module doc)."""

    value: bool

    @staticmethod
    def of(tensor: torch.Tensor, value: bool) -> "KnownMask":
        mask = tensor.as_subclass(KnownMask)
        mask.value = value
        return mask

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self = args[0] if args else None
        if func is torch.Tensor.__getitem__ and isinstance(args[1], KnownMask):
            source = _plain(self)
            return source if args[1].value else source[: 0]
        if isinstance(self, KnownMask) and func in (torch.Tensor.bool, torch.Tensor.unbind, torch.Tensor.__invert__,
                                                    torch.Tensor.bitwise_not):
            if func is torch.Tensor.unbind:  # iteration over the batch (``zip`` in forward)
                return tuple(KnownMask.of(row, self.value) for row in _plain(self).unbind(*args[1:], **kwargs))
            value = self.value if func is torch.Tensor.bool else not self.value
            return KnownMask.of(_plain(self).bool(), value)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*[_plain(a) for a in args], **{k: _plain(v) for k, v in kwargs.items()})


def _plain(value: Any) -> Any:
    return value.as_subclass(torch.Tensor) if isinstance(value, KnownMask) else value


@dataclass(frozen=True)
class KnownMaskSpec(TensorSpec):
    """A mask input made as a :class:`KnownMask` of ``value``."""

    value: bool = True

    def make(self) -> torch.Tensor:  # type: ignore[override]
        return KnownMask.of(super().make(), self.value)


@input_builder("HunyuanImageTransformer2DModel", settings=("height", "width", "text_len", "text_len_2"))
def _hunyuan_image_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``HunyuanImagePipeline`` calls it at batch 1 (pipeline_hunyuanimage.py:801): hidden_states
    (1, C, H/32, W/32); timestep (1,); encoder_hidden_states (1, text_len, text_embed_dim) with its
    encoder_attention_mask (1, text_len) int64, all ones; encoder_hidden_states_2 (1, text_len_2,
    text_embed_2_dim) with encoder_attention_mask_2 (1, text_len_2) int64, all zeros (no quoted text),
    when ``text_embed_2_dim`` is set; timestep_r (1,) when ``use_meanflow``; guidance (1,) when
    ``guidance_embeds``."""
    t, t2 = s["text_len"], s["text_len_2"]
    inputs: dict[str, TensorSpec] = {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), _div(s["height"], VAE_SCALE_FACTOR, "height"),
                                     _div(s["width"], VAE_SCALE_FACTOR, "width"))),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, t, _cfg(model, "text_embed_dim"))),
        "encoder_attention_mask": KnownMaskSpec((1, t), torch.int64, value=True),
    }
    if _cfg(model, "text_embed_2_dim") is not None:
        inputs["encoder_hidden_states_2"] = TensorSpec((1, t2, _cfg(model, "text_embed_2_dim")))
        inputs["encoder_attention_mask_2"] = KnownMaskSpec((1, t2), torch.int64, value=False)
    if _cfg(model, "use_meanflow"):
        inputs["timestep_r"] = TensorSpec((1,))
    if _cfg(model, "guidance_embeds"):
        inputs["guidance"] = TensorSpec((1,))
    return inputs


@input_builder("AutoencoderKLHunyuanImage", settings=("height", "width"), calls=("decode", "encode"))
def _hunyuan_image_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, H/r, W/r) (r: ``spatial_compression_ratio``); encode: x (1,
    in_channels, H, W)."""
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["height"], s["width"]))}
    r = _cfg(model, "spatial_compression_ratio")
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), _div(s["height"], r, "height"),
                            _div(s["width"], r, "width")))}


_hunyuan_image_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "Inputs as HunyuanImagePipeline passes them. The text masks are KnownMask meta tensors (Qwen mask all ones, "
    "glyph mask all zeros: a prompt without quoted text) so that forward's boolean reordering of the text tokens "
    "runs on meta; the joined sequence has text_len + text_len_2 tokens whatever the masks hold. Nothing is patched."
)
