"""Input builders for the LLM / BERT text encoders (``Gemma2Model``, ``GemmaModel``,
``Qwen2_5_VLForConditionalGeneration``, ``Qwen2_5_VLTextModel``, ``BertModel``): token ids ``(1, seq_len)``, batch 1.

The pipelines also pass the tokenizer's attention mask. A padding mask never changes the dense
matmuls that are counted (padded tokens count in full), so the fixtures record:

* ``Gemma2Model`` (eager attention: transformers 5 refuses SDPA for Gemma-2's soft-capping):
  an all-ones ``attention_mask`` ``(1, seq_len)`` as SANA / Lumina-Image-2.0 pass it; the eager
  mask code runs on meta.
* ``GemmaModel``, ``Qwen2_5_VLForConditionalGeneration``, ``Qwen2_5_VLTextModel``, ``BertModel`` (SDPA): no mask
  (``attention_mask`` passed as the constant ``None``, which the fixture's method names). With a
  padding mask their SDPA mask preparation calls ``Tensor.item()``, which meta tensors refuse.
  Without a mask Qwen2.5-VL's language model builds the text-only positions itself
  (``arange(seq_len)`` on all three mRoPE axes), the positions a text prompt gets; no image,
  so its vision tower does not run (its builder, with condition images, is in ``qwen_image_edit.py``).

Qwen-Image also passes ``output_hidden_states=True``: it only collects the layer outputs that are
computed anyway, so it is left out. No module is patched.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, input_builder


@input_builder("Gemma2Model", settings=("seq_len",))
def _gemma2_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """Token ids and an all-ones attention mask, both ``(1, seq_len)`` int64."""
    shape = (1, int(s["seq_len"]))
    return {"input_ids": TensorSpec(shape, torch.int64), "attention_mask": TensorSpec(shape, torch.int64)}


@input_builder("GemmaModel", "BertModel", "XLMRobertaModel", "Qwen2_5_VLTextModel", settings=("seq_len",))
def _sdpa_text_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids ``(1, seq_len)`` int64; ``attention_mask`` the constant ``None`` (see module doc)."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None}
