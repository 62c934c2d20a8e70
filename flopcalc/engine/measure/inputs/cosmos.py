"""Input builder for ``CosmosTransformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Its T5 text encoder and Wan VAE use the existing builders.

Shapes as ``Cosmos2TextToImagePipeline`` (diffusers ``pipelines/cosmos/pipeline_cosmos2_text2image.py``) feeds it
at batch 1: the ``1 × H/8 × W/8`` one-frame latent (``in_channels`` channels), a 1-D timestep, the prompt's T5
states (``text_len`` tokens of ``text_embed_dim``) and ``padding_mask`` (1, 1, H, W) of zeros (line 557); and as
``Cosmos2VideoToWorldPipeline`` does (``pipeline_cosmos2_video2world.py``): a ``T``-frame latent plus the condition
mask channel, and one timestep per latent frame.

What needed help: the model resizes ``padding_mask`` to the latent with ``torchvision.transforms.functional.resize``
(``InterpolationMode.NEAREST``), and torchvision is not a dependency. Where it is not installed, the module is given
a stand-in ``transforms`` whose ``resize`` is ``torch.nn.functional.interpolate(mode="nearest-exact")`` to the same
size (PIL-style nearest, as torchvision's tensor resize): a resampling, no counted work, the same output shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder

#: The Wan 2.1 VAE's factors (``2 ** len(temperal_downsample)``, ``2 ** sum(...)``), which the pipelines read.
VAE_SCALE_SPATIAL, VAE_SCALE_TEMPORAL = 8, 4
#: The Cosmos 1.0 tokenizer's ``temporal_compression_ratio`` (CV8x8x8), which the Cosmos 1.0 pipelines read.
COSMOS1_SCALE_TEMPORAL = 8


def _resize(tensor: torch.Tensor, size: list[int], interpolation: Any = None) -> torch.Tensor:
    """``transforms.functional.resize`` of a ``(B, C, H, W)`` tensor to ``size``, nearest."""
    return torch.nn.functional.interpolate(tensor, size=tuple(size), mode="nearest-exact")


def _ensure_transforms() -> None:
    import diffusers.models.controlnets.controlnet_cosmos as controlnet
    import diffusers.models.transformers.transformer_cosmos as module

    for m in (module, controlnet):
        if not hasattr(m, "transforms"):
            m.transforms = SimpleNamespace(functional=SimpleNamespace(resize=_resize),
                                           InterpolationMode=SimpleNamespace(NEAREST="nearest"))


def _text_width(model: nn.Module) -> int:
    """The width of the text states the pipeline hands the model: Qwen2.5-VL's concatenated hidden states
    (``crossattn_proj_in_channels``) with ``use_crossattn_projection`` (Cosmos 2.5), else ``text_embed_dim``."""
    return _cfg(model, "crossattn_proj_in_channels" if _cfg(model, "use_crossattn_projection") else "text_embed_dim")


def _with_image_context(model: nn.Module, tokens: int) -> dict[str, Any]:
    """Cosmos 2.5 Transfer hands the model ``encoder_hidden_states=(text, image context)``
    (pipeline_cosmos2_5_transfer.py:790-806). A tuple is no tensor input of the harness, so the model's ``forward``
    is wrapped to take the image context as its own keyword ``img_context`` and pass the pair on (no work added)."""
    real = model.forward

    def forward(*args: Any, img_context: torch.Tensor, **kwargs: Any) -> Any:
        kwargs["encoder_hidden_states"] = (kwargs["encoder_hidden_states"], img_context)
        return real(*args, **kwargs)

    model.forward = forward
    model._measure_notes = [
        "model.forward was wrapped to take img_context as a keyword and pass encoder_hidden_states=(text, "
        "img_context), the pair Cosmos2_5_TransferPipeline passes (a tuple is not a tensor input)."]
    return {"img_context": TensorSpec((1, tokens, _cfg(model, "img_context_dim_in")))}


@input_builder("CosmosTransformer3DModel", settings=("height", "width", "text_len"),
               optional=("num_frames", "image_tokens", "world"))
def _cosmos_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """Text-to-image: hidden_states (1, in_channels, 1, H/8, W/8); timestep (1,); encoder_hidden_states
    (1, text_len, text_embed_dim); padding_mask (1, 1, H, W). Video2World (setting ``num_frames``:
    T = (num_frames − 1) // 4 + 1 latent frames): hidden_states (1, in_channels − 1, T, H/8, W/8), condition_mask
    (1, 1, T, H/8, W/8) and a per-frame timestep (1, 1, T, 1, 1), as ``Cosmos2VideoToWorldPipeline`` and the Cosmos
    2.5 pipelines pass. Cosmos 2.5 (``use_crossattn_projection``): the text states are Qwen2.5-VL's every layer
    concatenated (``crossattn_proj_in_channels`` wide); Transfer (setting ``image_tokens``): the image context too
    (``img_context_num_tokens`` × ``img_context_dim_in`` zeros), see :func:`_with_image_context`. Cosmos 1.0
    (setting ``world`` with ``num_frames``; the 8× tokenizer: T = (num_frames − 1) // 8 + 1, one timestep per
    sample): ``world`` 1, ``CosmosTextToWorldPipeline``: hidden_states (1, in_channels, T, H/8, W/8), no condition
    mask; ``world`` 2, ``CosmosVideoToWorldPipeline``: hidden_states (1, in_channels − 1, T, H/8, W/8) and
    condition_mask (1, 1, T, H/8, W/8) (pipeline_cosmos_text2world.py:582-589, pipeline_cosmos_video2world.py:
    718-726)."""
    _ensure_transforms()
    h = _div(s["height"], VAE_SCALE_SPATIAL, "height")
    w = _div(s["width"], VAE_SCALE_SPATIAL, "width")
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), 1, h, w)),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _text_width(model))),
        "padding_mask": TensorSpec((1, 1, s["height"], s["width"])),
    }
    if s.get("num_frames") and s.get("world"):
        frames = (int(s["num_frames"]) - 1) // COSMOS1_SCALE_TEMPORAL + 1
        extra = 1 if int(s["world"]) == 2 else 0
        inputs["hidden_states"] = TensorSpec((1, _cfg(model, "in_channels") - extra, frames, h, w))
        if extra:
            inputs["condition_mask"] = TensorSpec((1, 1, frames, h, w))
    elif s.get("num_frames"):
        frames = (int(s["num_frames"]) - 1) // VAE_SCALE_TEMPORAL + 1
        inputs["hidden_states"] = TensorSpec((1, _cfg(model, "in_channels") - 1, frames, h, w))
        inputs["condition_mask"] = TensorSpec((1, 1, frames, h, w))
        inputs["timestep"] = TensorSpec((1, 1, frames, 1, 1))
    if s.get("image_tokens"):
        inputs.update(_with_image_context(model, s["image_tokens"]))
    return inputs


@input_builder("CosmosControlNetModel", settings=("height", "width", "text_len", "num_frames"),
               optional=("image_tokens",))
def _cosmos_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``Cosmos2_5_TransferPipeline`` calls it (pipeline_cosmos2_5_transfer.py:934-943), T = (num_frames − 1) // 4
    + 1 latent frames: controls_latents (1, 16, T, H/8, W/8) (the control video's Wan latent; zero-padded inside to
    ``in_channels`` − 2), latents (1, ``latent_channels`` − 2, T, H/8, W/8), a per-frame timestep (1, 1, T, 1, 1),
    the text states (and, setting ``image_tokens``, the image context: :func:`_with_image_context`), condition_mask
    (1, 1, T, H/8, W/8) and padding_mask (1, 1, H, W)."""
    _ensure_transforms()
    h = _div(s["height"], VAE_SCALE_SPATIAL, "height")
    w = _div(s["width"], VAE_SCALE_SPATIAL, "width")
    frames = (int(s["num_frames"]) - 1) // VAE_SCALE_TEMPORAL + 1
    inputs: dict[str, Any] = {
        "controls_latents": TensorSpec((1, 16, frames, h, w)),
        "latents": TensorSpec((1, _cfg(model, "latent_channels") - 2, frames, h, w)),
        "timestep": TensorSpec((1, 1, frames, 1, 1)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _text_width(model))),
        "condition_mask": TensorSpec((1, 1, frames, h, w)),
        "padding_mask": TensorSpec((1, 1, s["height"], s["width"])),
    }
    if s.get("image_tokens"):
        inputs.update(_with_image_context(model, s["image_tokens"]))
    return inputs
