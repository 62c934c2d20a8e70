"""Input builder for ``Qwen3Model``, the text encoder of ``ZImagePipeline`` and ``OvisImagePipeline``
(diffusers 0.42.1, ``pipelines/z_image/pipeline_z_image.py`` ``_encode_prompt``:
``self.text_encoder(input_ids=..., attention_mask=..., output_hidden_states=True).hidden_states[-2]``,
the prompt padded to ``max_sequence_length``). flopcalc has no formula for it: this builder is what
``flopcalc estimate --measure`` counts it with.

Token ids ``(1, seq_len)`` int64; ``attention_mask`` the constant ``None``: a padding mask never
changes the dense matmuls counted (padded tokens count in full), and building the SDPA padding mask
reads data, which meta tensors refuse. ``use_cache`` keeps its default (``True``): without it
transformers 5 reads ``position_ids`` data on meta (../shared/MEASURING.md). ``output_hidden_states``
only collects layer outputs computed anyway, so it is left out.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.measure.harness import TensorSpec, input_builder


@input_builder("Qwen3Model", settings=("seq_len",))
def _qwen3_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids ``(1, seq_len)`` int64, ``attention_mask`` None (see module doc)."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None}
