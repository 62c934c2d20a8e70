"""Kolors' text encoder ``ChatGLMModel`` (ChatGLM3-6B): how it is built and fed on meta.

* **Build.** transformers does not ship ChatGLM (the Hub config's ``auto_map`` points at THUDM's remote
  code). diffusers vendors it for Kolors as ``diffusers.pipelines.kolors.text_encoder`` (``ChatGLMConfig``,
  ``ChatGLMModel``), the class a ``["kolors", "ChatGLMModel"]`` entry of ``model_index.json`` resolves to
  (``pipeline_loading_utils._get_library_or_raise``: ``hasattr(diffusers.pipelines, "kolors")``). It is
  built from ``ChatGLMConfig(**config.json)`` inside ``torch.device("meta")`` with ``empty_init=False``:
  the default ``empty_init=True`` wraps every submodule in ``torch.nn.utils.skip_init``, which builds on
  meta and then materialises the weights on the CPU (``to_empty(device="cpu")``); the module tree is the
  same either way.
* **Inputs.** ``KolorsPipeline.encode_prompt`` passes ``input_ids``, ``attention_mask`` and
  ``position_ids`` (all ``(1, max_sequence_length)``) with ``output_hidden_states=True``. The builder
  passes the token ids and positions; ``attention_mask`` is the constant ``None``: with it the model
  asks ``attention_mask.all()`` (data) and builds a boolean padding mask, and a mask changes no matmul
  (SDPA runs the same two products with ``is_causal=True`` instead). ``output_hidden_states`` only
  collects the layer outputs already computed and is left out.

The UNet's ``encoder_hid_dim_type: text_proj`` inputs are built by ``measure.py``'s UNet builder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, input_builder, model_builder


@model_builder("ChatGLMModel")
def _build_chatglm(config_dir: Path) -> nn.Module:
    """``ChatGLMModel(ChatGLMConfig(**config.json), empty_init=False)`` on meta (see the module doc)."""
    from diffusers.pipelines.kolors.text_encoder import ChatGLMConfig, ChatGLMModel

    values = json.loads((config_dir / "config.json").read_text(encoding="utf-8"))
    config = ChatGLMConfig(**values)
    with torch.device("meta"):
        model = ChatGLMModel(config, empty_init=False)
    model._measure_notes = ("ChatGLMModel is diffusers' vendored copy (diffusers.pipelines.kolors.text_encoder), "
                            "built from ChatGLMConfig(**config.json) with empty_init=False (skip_init would "
                            "materialise the weights on the CPU); attention_mask passed as None "
                            "(SDPA with is_causal=True: the same matmuls as with the padding mask).",)
    return model


@input_builder("ChatGLMModel", settings=("seq_len",))
def _chatglm_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """``input_ids`` and ``position_ids`` ``(1, seq_len)`` int64; ``attention_mask`` the constant ``None``."""
    shape = (1, int(s["seq_len"]))
    return {"input_ids": TensorSpec(shape, torch.int64), "position_ids": TensorSpec(shape, torch.int64),
            "attention_mask": None}
