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


def _resize(tensor: torch.Tensor, size: list[int], interpolation: Any = None) -> torch.Tensor:
    """``transforms.functional.resize`` of a ``(B, C, H, W)`` tensor to ``size``, nearest."""
    return torch.nn.functional.interpolate(tensor, size=tuple(size), mode="nearest-exact")


def _ensure_transforms() -> None:
    import diffusers.models.transformers.transformer_cosmos as module

    if not hasattr(module, "transforms"):
        module.transforms = SimpleNamespace(functional=SimpleNamespace(resize=_resize),
                                            InterpolationMode=SimpleNamespace(NEAREST="nearest"))


@input_builder("CosmosTransformer3DModel", settings=("height", "width", "text_len"), optional=("num_frames",))
def _cosmos_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """Text-to-image: hidden_states (1, in_channels, 1, H/8, W/8); timestep (1,); encoder_hidden_states
    (1, text_len, text_embed_dim); padding_mask (1, 1, H, W). Video2World (setting ``num_frames``:
    T = (num_frames − 1) // 4 + 1 latent frames): hidden_states (1, in_channels − 1, T, H/8, W/8), condition_mask
    (1, 1, T, H/8, W/8) and a per-frame timestep (1, 1, T, 1, 1), as ``Cosmos2VideoToWorldPipeline`` passes."""
    _ensure_transforms()
    h = _div(s["height"], VAE_SCALE_SPATIAL, "height")
    w = _div(s["width"], VAE_SCALE_SPATIAL, "width")
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), 1, h, w)),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_embed_dim"))),
        "padding_mask": TensorSpec((1, 1, s["height"], s["width"])),
    }
    if s.get("num_frames"):
        frames = (int(s["num_frames"]) - 1) // VAE_SCALE_TEMPORAL + 1
        inputs["hidden_states"] = TensorSpec((1, _cfg(model, "in_channels") - 1, frames, h, w))
        inputs["condition_mask"] = TensorSpec((1, 1, frames, h, w))
        inputs["timestep"] = TensorSpec((1, 1, frames, 1, 1))
    return inputs
