"""Input builders for Kandinsky 2.1 (``KandinskyPipeline``): ``MultilingualCLIP``, the text encoder diffusers
defines (``pipelines/kandinsky/text_encoder.py``; its ``MCLIPConfig`` is unknown to ``AutoConfig``). The decoder's
``UNet2DConditionModel`` (``text_image``) is built by the UNet builder in the harness, the MoVQ by the Kandinsky 3
one. Imported by ``flopcalc.engine.measure.harness``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _ids, input_builder, model_builder


@model_builder("MultilingualCLIP")
def _multilingual_clip(config_dir: Path) -> nn.Module:
    """``MCLIPConfig`` from the folder's config.json (``transformerDimensions`` / ``numDims`` as saved), the model on
    meta, as ``from_pretrained`` builds it."""
    from diffusers.pipelines.kandinsky.text_encoder import MCLIPConfig, MultilingualCLIP

    values = json.loads((config_dir / "config.json").read_text())
    kwargs = {k: v for k, v in values.items() if not k.startswith("_") and k not in ("architectures", "model_type")}
    config = MCLIPConfig(transformerDimSize=kwargs.pop("transformerDimensions", 1024),
                         imageDimSize=kwargs.pop("numDims", 768), **kwargs)
    with torch.device("meta"):
        model = MultilingualCLIP(config)
    # transformers' mask preparation asks whether the padding mask is all ones (Tensor.item(), which meta tensors
    # refuse); the mask the builder passes is all ones, so the XLM-R gets none (it masks nothing either way) and the
    # mean pooling still multiplies by it: the same matmuls
    transformer_forward = model.transformer.forward

    def forward_without_mask(*args, **kwargs):
        kwargs["attention_mask"] = None
        return transformer_forward(*args, **kwargs)

    model.transformer.forward = forward_without_mask
    model._measure_notes = ["The all-ones attention_mask is given to MultilingualCLIP's mean pooling but not to its "
                            "XLMRobertaModel (whose mask preparation reads the mask's values, refused on meta; an "
                            "all-ones mask masks nothing): the same matmuls are counted."]
    return model


@input_builder("MultilingualCLIP", settings=("seq_len",))
def _multilingual_clip_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """``input_ids`` and ``attention_mask`` (1, seq_len), as ``KandinskyPipeline._encode_prompt`` passes them (77)."""
    return {"input_ids": _ids(1, s["seq_len"]), "attention_mask": _ids(1, s["seq_len"])}
