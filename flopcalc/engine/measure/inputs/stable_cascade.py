"""Input builders for Stable Cascade: ``StableCascadeUNet`` (prior and decoder) and ``PaellaVQModel``
(built by :func:`_build_paella`: diffusers exports it only from its deprecated Würstchen pipelines).
Imported by ``flopcalc.engine.measure.harness``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, input_builder, model_builder
from flopcalc.engine.pipelines.stable_cascade import IMAGE_EMBEDDINGS, decoder_latent_side, prior_latent_side


@input_builder("StableCascadeUNet", settings=("height", "width", "text_len"), optional=("reference_images",))
def _stable_cascade_unet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As the pipelines call it. A prior (no ``effnet_in_channels``; ``StableCascadePriorPipeline``):
    ``sample`` (1, in_channels, ⌈H/42.67⌉, ⌈W/42.67⌉), ``timestep_ratio`` (1,), ``clip_text_pooled``
    (1, 1, pooled width), ``clip_text`` (1, text_len, clip_text_in_channels) and ``clip_img`` (1, 1,
    clip_image_in_channels: the zero embedding without images; ``reference_images`` embeddings when that setting is
    given) when the config has those mappers. A decoder
    (``StableCascadeDecoderPipeline``): ``sample`` at ``int(⌈side/42.67⌉ · 10.67)``, ``clip_text_pooled`` and
    ``effnet`` (1, effnet_in_channels, ⌈H/42.67⌉, ⌈W/42.67⌉), the prior's latent."""
    prior = prior_latent_side(s["height"]), prior_latent_side(s["width"])
    effnet = _cfg(model, "effnet_in_channels")
    latent = prior if effnet is None else (decoder_latent_side(prior[0]), decoder_latent_side(prior[1]))
    inputs = {
        "sample": _f32(1, _cfg(model, "in_channels"), *latent),
        "timestep_ratio": _f32(1),
        "clip_text_pooled": _f32(1, 1, _cfg(model, "clip_text_pooled_in_channels")),
    }
    text, image = _cfg(model, "clip_text_in_channels"), _cfg(model, "clip_image_in_channels")
    if effnet is None and text is not None and image is not None:
        inputs["clip_text"] = _f32(1, s["text_len"], text)
        inputs["clip_img"] = _f32(1, s.get("reference_images") or IMAGE_EMBEDDINGS, image)
    if effnet is not None:
        inputs["effnet"] = _f32(1, effnet, *prior)
    return inputs


@model_builder("PaellaVQModel")
def _build_paella(config_dir: Path) -> nn.Module:
    """``PaellaVQModel.from_config`` on meta, from ``diffusers.pipelines.deprecated.wuerstchen`` (what a
    ``["wuerstchen", "PaellaVQModel"]`` index entry loads)."""
    from diffusers.pipelines.deprecated.wuerstchen.modeling_paella_vq_model import PaellaVQModel

    config = PaellaVQModel.load_config(str(config_dir))
    with torch.device("meta"):
        return PaellaVQModel.from_config(config)


@input_builder("PaellaVQModel", settings=("height", "width"), calls=("decode", "encode"))
def _paella_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: ``h`` (1, latent_channels, H/f, W/f), f = up_down_scale_factor · 2^(levels−1) (4 for Stable
    Cascade); ``force_not_quantize`` defaults to True, as ``StableCascadeDecoderPipeline`` calls it.
    encode: ``x`` (1, in_channels, H, W)."""
    if call == "encode":
        return {"x": _f32(1, _cfg(model, "in_channels"), s["height"], s["width"])}
    f = _cfg(model, "up_down_scale_factor") * 2 ** (_cfg(model, "levels") - 1)
    if s["height"] % f or s["width"] % f:
        raise ValueError(f"height and width must be multiples of {f}")
    return {"h": _f32(1, _cfg(model, "latent_channels"), s["height"] // f, s["width"] // f)}
