"""Input builder for ``LlavaForConditionalGeneration`` as ``HunyuanVideoImageToVideoPipeline._get_llama_prompt_embeds``
calls it (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video_image2video.py:278-347``): token ids
``(1, seq_len)`` (the templated prompt padded to ``max_sequence_length + crop_start`` tokens, its one ``<image>``
token expanded to ``image_emb_len`` image tokens by ``_expand_input_ids_with_image_tokens``) and one image,
``pixel_values`` ``(1, num_channels, image_size, image_size)`` as ``CLIPImageProcessor`` gives it at the vision
tower's size. No attention mask and no ``position_ids`` (they change no matmul; see ``text_encoders.py``), and
``output_hidden_states=True`` is left out (it collects layer outputs that are computed anyway).

One parameter-free help makes the stock ``forward`` run on meta (the counts equal a CPU run of a small random
model on real token ids, ``tests/test_live_llava.py``): ``model.model.get_placeholder_mask`` returns the
``input_ids == image_token_id`` mask without the check that the image tokens match the image features (a
``Tensor.item()`` on meta); ``masked_scatter`` then places the projected image features as in the real call.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, input_builder


def _patch_for_meta(model: nn.Module) -> None:
    def placeholder_mask(self: nn.Module, input_ids: torch.Tensor, inputs_embeds: torch.Tensor,
                         image_features: torch.Tensor) -> Any:
        return (input_ids == self.config.image_token_id).unsqueeze(-1).to(inputs_embeds.device)

    model.model.get_placeholder_mask = types.MethodType(placeholder_mask, model.model)
    model._measure_notes = (
        "on meta, get_placeholder_mask skips its image token / feature count check (Tensor.item()); no matmul is "
        "touched",)


@input_builder("LlavaForConditionalGeneration", settings=("seq_len",))
def _llava_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids ``(1, seq_len)``, no mask, one image at the vision tower's ``image_size`` (module doc)."""
    vision = _cfg(model, "vision_config")
    _patch_for_meta(model)
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None,
            "pixel_values": TensorSpec((1, vision.num_channels, vision.image_size, vision.image_size))}
