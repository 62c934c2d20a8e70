"""Input builders for EasyAnimate: ``EasyAnimateTransformer3DModel``, ``AutoencoderKLMagvit`` and the Qwen2-VL text
encoder ``Qwen2VLForConditionalGeneration``.

Shapes as the EasyAnimate pipelines (diffusers ``pipelines/easyanimate/``) feed them at batch 1: ``num_frames`` video
frames become ``(num_frames − 1) // 4 + 1`` latent frames (``prepare_latents``), ``H × W`` pixels an ``H/8 × W/8``
latent. The text encoder gets token ids without the tokenizer's mask (as the other Qwen-VL encoders here: with a padding
mask its SDPA mask preparation calls ``Tensor.item()``, which meta refuses; a mask changes no dense count). Nothing is
patched: the VAE's causal convolutions keep their frame cache between the decoder calls of one ``decode``/``encode``
on meta as on real data.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, enable_sized_tiling, input_builder

SPATIAL, TEMPORAL = 8, 4


@input_builder("Qwen2VLForConditionalGeneration", settings=("seq_len",))
def _qwen2_vl_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids (1, seq_len) int64; ``attention_mask`` the constant ``None`` (see the module doc)."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None}


@input_builder("EasyAnimateTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("control",))
def _easyanimate_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, C, T, H/8, W/8) with C the VAE's 16 latent channels, timestep (1,), encoder_hidden_states
    (1, text_len, text_embed_dim); the remaining input channels (``in_channels − C``) as the pipelines pass them:
    ``control_latents`` with ``control`` 1 (EasyAnimateControlPipeline: the control video's and the reference image's
    latents), else ``inpaint_latents`` (EasyAnimateInpaintPipeline: the mask and the masked video's latents) when
    ``in_channels`` exceeds 16."""
    h, w = _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width")
    frames = (s["num_frames"] - 1) // TEMPORAL + 1
    latent, extra = 16, _cfg(model, "in_channels") - 16
    inputs = {
        "hidden_states": TensorSpec((1, latent, frames, h, w)),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_embed_dim"))),
    }
    if extra > 0:
        inputs["control_latents" if s.get("control") else "inpaint_latents"] = TensorSpec((1, extra, frames, h, w))
    return inputs


@input_builder("AutoencoderKLMagvit", settings=("height", "width", "num_frames"), calls=("decode", "encode"),
               optional=("vae_tiling", "vae_tile"))
def _magvit_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, (F − 1)//4 + 1, H/8, W/8); encode: x (1, in_channels, F, H, W). ``vae_tiling``
    1: ``enable_tiling()`` first, at its defaults (512-pixel tiles every 448, autoencoder_kl_magvit.py:752-760,
    796-805), as a user calls it on an EasyAnimate pipeline's VAE."""
    enable_sized_tiling(model, s)
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    f = 2 ** (len(_cfg(model, "block_out_channels")) - 1)
    t = 2 ** (len(_cfg(model, "block_out_channels")) - 2)
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), (s["num_frames"] - 1) // t + 1,
                             _div(s["height"], f, "height"), _div(s["width"], f, "width")))}
