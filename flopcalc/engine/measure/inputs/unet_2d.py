"""Input builders for the classic pipelines' ``UNet2DModel`` (DDPM, DDIM, latent-diffusion super-resolution,
consistency models) and ``LDMBertModel`` (latent-diffusion text-to-image). Imported by
``flopcalc.engine.measure.harness``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _ids, input_builder, model_builder


@input_builder("UNet2DModel", settings=("height", "width"), optional=("vae_scale",))
def _unet_2d_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """sample (1, in_channels, H / f, W / f) with f = ``vae_scale`` (default 1: the pixel-space UNets of DDPM /
    DDIM / consistency models see the image itself), timestep (1,); ``class_labels`` (1,) int64 where the model has
    a class embedding (a consistency model's ImageNet class, or a sinusoid-embedded label)."""
    f = s.get("vae_scale", 1)
    inputs: dict[str, TensorSpec] = {
        "sample": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], f, "height"),
                       _exact_div(s["width"], f, "width")),
        # a learned time embedding (nn.Embedding) looks the integer timestep up
        "timestep": _ids(1) if _cfg(model, "time_embedding_type") == "learned" else _f32(1),
    }
    if _cfg(model, "class_embed_type") == "identity":  # the label is the embedding itself
        inputs["class_labels"] = _f32(1, _cfg(model, "time_embedding_dim") or 4 * _cfg(model, "block_out_channels")[0])
    elif _cfg(model, "class_embed_type") is not None or _cfg(model, "num_class_embeds") is not None:
        inputs["class_labels"] = _ids(1)
    return inputs


@model_builder("LDMBertModel")
def _ldm_bert(config_dir: Path) -> nn.Module:
    """``LDMBertModel`` is a transformers ``PreTrainedModel`` that diffusers defines (``model_type`` "ldmbert",
    unknown to ``AutoConfig``): its ``LDMBertConfig`` built from the folder's config.json, the model on meta."""
    import json

    import torch
    from diffusers.pipelines.latent_diffusion.pipeline_latent_diffusion import LDMBertConfig, LDMBertModel

    values = json.loads((config_dir / "config.json").read_text())
    config = LDMBertConfig(**{k: v for k, v in values.items() if not k.startswith("_") and k != "architectures"})
    with torch.device("meta"):
        return LDMBertModel(config)


@input_builder("LDMBertModel", settings=("seq_len",))
def _ldm_bert_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """Token ids (1, seq_len): ``LDMTextToImagePipeline`` pads to 77."""
    return {"input_ids": _ids(1, s["seq_len"])}
