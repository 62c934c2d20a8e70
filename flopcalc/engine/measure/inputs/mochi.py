"""Input builder for ``MochiTransformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see validation/README.md).
Its T5 text encoder uses the existing builder.

Shapes as ``MochiPipeline`` (diffusers ``pipelines/mochi/pipeline_mochi.py``) feeds it at batch 1 (lines 647-657): the
``12 × F × H/8 × W/8`` latent (``F = (num_frames − 1) // 6 + 1``, lines 402-404), a 1-D timestep, the prompt's T5
states (``text_len`` tokens of ``text_embed_dim``) and their boolean attention mask, all ones (a prompt that fills
the tokens: the upper bound the formula counts).

Two things need help on meta, neither changes a count:

* ``MochiAttnProcessor2_0`` keeps each sample's valid text tokens with ``torch.nonzero`` of the mask
  (attention_processor.py:1066-1072), which a meta tensor cannot run. The mask is passed as a :class:`PromptMask`,
  a meta tensor known to be all ones (HunyuanImage's :class:`KnownMask`, kept through indexing and ``flatten``),
  whose ``nonzero`` is every index, as it is on real data;
* ``MochiRoPE._create_rope`` enters ``torch.autocast(freqs.device.type, torch.float32)``
  (transformer_mochi.py:286), and autocast refuses the ``meta`` device type. The module's ``torch`` is given a
  stand-in whose ``autocast`` on ``meta`` is a no-op context (the einsum's inputs are float32 already).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder
from flopcalc.engine.measure.inputs.hunyuan_image import KnownMask, _plain

#: ``MochiPipeline.vae_spatial_scale_factor`` and ``vae_temporal_scale_factor`` (pipeline_mochi.py:185-186).
VAE_SCALE_SPATIAL, VAE_SCALE_TEMPORAL = 8, 6


class PromptMask(KnownMask):
    """A :class:`KnownMask` that stays known through integer/slice indexing and ``flatten``, and whose
    ``torch.nonzero`` gives every index (all ones) or none (all zeros)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self = args[0] if args else None
        if isinstance(self, PromptMask):
            if func is torch.nonzero:
                plain = _plain(self)
                count = plain.numel() if self.value else 0
                return torch.zeros((count, plain.dim()), dtype=torch.int64, device=plain.device)
            keeps = (func is torch.Tensor.flatten
                     or (func is torch.Tensor.__getitem__ and not isinstance(args[1], torch.Tensor)))
            if keeps:
                with torch._C.DisableTorchFunctionSubclass():
                    out = func(*[_plain(a) for a in args], **kwargs)
                mask = out.as_subclass(PromptMask)
                mask.value = self.value
                return mask
        return super().__torch_function__(func, types, args, kwargs)


@dataclass(frozen=True)
class PromptMaskSpec(TensorSpec):
    """A mask input made as a :class:`PromptMask` of ``value``."""

    value: bool = True

    def make(self) -> torch.Tensor:  # type: ignore[override]
        mask = super().make().as_subclass(PromptMask)
        mask.value = self.value
        return mask


class _TorchOnMeta(ModuleType):
    """``torch`` for transformer_mochi.py: everything as torch, except ``autocast`` on ``meta`` (a no-op)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def autocast(device_type: str, *args: Any, **kwargs: Any) -> Any:
        if device_type == "meta":
            return contextlib.nullcontext()
        return torch.autocast(device_type, *args, **kwargs)


def _ensure_meta_autocast() -> None:
    import diffusers.models.transformers.transformer_mochi as module

    if not isinstance(module.torch, _TorchOnMeta):
        module.torch = _TorchOnMeta("torch")


@input_builder("MochiTransformer3DModel", settings=("height", "width", "num_frames", "text_len"))
def _mochi_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """hidden_states (1, in_channels, (num_frames − 1)//6 + 1, H/8, W/8); timestep (1,); encoder_hidden_states
    (1, text_len, text_embed_dim); encoder_attention_mask (1, text_len) bool, all ones."""
    _ensure_meta_autocast()
    frames = (int(s["num_frames"]) - 1) // VAE_SCALE_TEMPORAL + 1
    t = s["text_len"]
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, _div(s["height"], VAE_SCALE_SPATIAL, "height"),
                                     _div(s["width"], VAE_SCALE_SPATIAL, "width"))),
        "encoder_hidden_states": TensorSpec((1, t, _cfg(model, "text_embed_dim"))),
        "timestep": TensorSpec((1,)),
        "encoder_attention_mask": PromptMaskSpec((1, t), torch.bool, value=True),
    }


_mochi_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "Inputs as MochiPipeline passes them. The text mask is a PromptMask meta tensor (all ones: a prompt filling the "
    "tokens) so that the processor's nonzero selection of valid text tokens runs on meta; RoPE's float32 autocast "
    "is a no-op on meta (autocast refuses the meta device type). No counted op is changed."
)


@input_builder("AutoencoderKLMochi", settings=("height", "width", "num_frames"), calls=("decode",),
               optional=("vae_tiling",))
def _mochi_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """decode: z (1, latent_channels, (num_frames − 1)//6 + 1, H/8, W/8), as ``MochiPipeline`` decodes its latent;
    ``vae_tiling`` 1 (optional) calls ``enable_tiling()`` first."""
    if s.get("vae_tiling"):
        model.enable_tiling()
    frames = (int(s["num_frames"]) - 1) // VAE_SCALE_TEMPORAL + 1
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), frames, _div(s["height"], VAE_SCALE_SPATIAL, "height"),
                            _div(s["width"], VAE_SCALE_SPATIAL, "width")))}
