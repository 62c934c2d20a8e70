"""Input builder for ``Qwen2_5_VLForConditionalGeneration`` as the Qwen-Image pipelines call it: token ids
``(1, seq_len)`` and no mask (see ``text_encoders.py``: a padding mask changes no dense count and its SDPA
preparation reads data), and, for the edit pipelines, the condition images.

With images (optional settings ``height`` × ``width``: the input image, ``condition_area``: the pixel
area the pipeline resizes it to for the processor, ``images``: how many), the builder gives what
``Qwen2VLProcessor`` makes of them: ``pixel_values`` ``(N, 3·2·14·14)`` for the ``N`` patches of the
smart-resized images and ``image_grid_thw`` (one ``(1, h/14, w/14)`` row per image), a CPU tensor of
values, because the vision tower reads it (``.tolist()``) to build its windows, rotary positions and
segments. Two parameter-free helps make the stock ``forward`` run on meta (the counts equal a CPU run
of a small random model, ``tests/test_live_qwen_image_edit.py``):

* ``model.visual.rotary_pos_emb``: the position ids it gets are built on the CPU from ``grid_thw``; they
  are moved to the meta device before the broadcast product (no matmul in that module);
* ``model.model.get_placeholder_mask``: returns the ``input_ids == image_token_id`` mask without the check
  that the image tokens match the features (a ``Tensor.item()`` on meta); ``masked_scatter`` then places
  the merged image tokens as in the real call.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, input_builder


@dataclass(frozen=True)
class _CpuValues(TensorSpec):
    """A small int64 CPU tensor of given values (``image_grid_thw``)."""

    values: tuple = ()

    def make(self) -> torch.Tensor:  # type: ignore[override]
        return torch.tensor([list(v) for v in self.values], dtype=torch.int64)


def _patch_for_meta(model: nn.Module) -> None:
    rotary = model.model.visual.rotary_pos_emb
    forward = type(rotary).forward

    def rotary_forward(self: nn.Module, x: torch.Tensor, position_ids: torch.Tensor) -> Any:
        return forward(self, x, position_ids.to(x.device))

    rotary.forward = types.MethodType(rotary_forward, rotary)

    def placeholder_mask(self: nn.Module, input_ids: torch.Tensor, inputs_embeds: torch.Tensor = None,
                         image_features: torch.Tensor = None, video_features: torch.Tensor = None) -> Any:
        mask = (input_ids == self.config.image_token_id).unsqueeze(-1).expand_as(inputs_embeds)
        return mask, mask

    model.model.get_placeholder_mask = types.MethodType(placeholder_mask, model.model)
    model._measure_notes = (
        "condition images as Qwen2VLProcessor makes them (pixel_values of the smart-resized patches, image_grid_thw "
        "a CPU tensor of values); on meta, visual.rotary_pos_emb gets its CPU-built position ids moved to meta, and "
        "get_placeholder_mask skips its token/feature count check (Tensor.item()); no matmul is touched",)


@input_builder("Qwen2_5_VLForConditionalGeneration", settings=("seq_len",),
               optional=("height", "width", "images", "condition_area"))
def _qwen2_5_vl_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids ``(1, seq_len)``, no mask; with ``height``/``width``: the condition images (module doc)."""
    inputs: dict[str, TensorSpec | None] = {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64),
                                            "attention_mask": None}
    if "height" not in s:
        return inputs
    from flopcalc.engine.pipelines.qwen_image_edit import TARGET_AREA, condition_image

    vision = _cfg(model, "vision_config")
    patch, temporal = vision.patch_size, vision.temporal_patch_size
    h, w = condition_image(int(s["height"]), int(s["width"]), int(s.get("condition_area", TARGET_AREA)))
    images = int(s.get("images", 1))
    grid = ((1, h // patch, w // patch),) * images
    _patch_for_meta(model)
    inputs["pixel_values"] = TensorSpec((images * (h // patch) * (w // patch), vision.in_channels * temporal
                                         * patch * patch))
    inputs["image_grid_thw"] = _CpuValues((images, 3), torch.int64, values=grid)
    return inputs
