"""Input builders for the Wan 2.1 family: ``WanTransformer3DModel``, ``AutoencoderKLWan`` and the
``UMT5EncoderModel`` text encoder (imported by ``flopcalc.engine.measure.harness``; see validation/README.md).

Shapes as ``WanPipeline.__call__`` (diffusers ``pipelines/wan/pipeline_wan.py``) feeds them at batch 1:
``num_frames`` video frames become ``(num_frames − 1) // 4 + 1`` latent frames
(``prepare_latents``, ``vae.config.scale_factor_temporal``), ``height × width`` pixels an
``H/8 × W/8`` latent (``scale_factor_spatial``); the transformer sees the prompt's UMT5 states
(``max_sequence_length`` tokens, 512) and one timestep; ``vae.decode`` gets the whole latent video.

What needed help: nothing in the transformer or the VAE (the rotary tables are buffers sliced per call;
the causal VAE's per-frame loop and feature cache run on meta as is). The text encoder is measured
without the tokenizer's attention mask (``attention_mask`` the constant ``None``): with a mask,
UMT5's bidirectional-mask preparation calls ``Tensor.item()``, which meta tensors refuse; a padding
mask never changes the dense matmuls counted.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, enable_sized_tiling, input_builder

#: The Wan 2.1 VAE's ``scale_factor_spatial`` / ``scale_factor_temporal``, which ``WanPipeline`` reads
#: (the transformer's builder does not see the VAE).
VAE_SCALE_SPATIAL = 8
VAE_SCALE_TEMPORAL = 4


def _latent_frames(num_frames: int, temporal: int) -> int:
    if num_frames % temporal != 1:
        raise ValueError(f"num_frames={num_frames} is not {temporal}k + 1 (WanPipeline would round it)")
    return (num_frames - 1) // temporal + 1


@input_builder("WanTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("vae_scale", "expand_timesteps", "image_tokens"))
def _wan_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """hidden_states (1, in_channels, T, H/f, W/f) with T = (num_frames − 1)/4 + 1 and f the VAE's
    ``scale_factor_spatial`` (setting ``vae_scale``, default 8; Wan 2.2 TI2V: 16); timestep (1,), or
    with ``expand_timesteps`` 1 (Wan 2.2 TI2V) one per token, (1, T·(H/f/2)·(W/f/2)) as
    ``mask[0][0][:, ::2, ::2] · t`` flattened; encoder_hidden_states (1, text_len, text_dim), as
    ``WanPipeline`` calls it (once per guidance pass); with ``image_tokens`` (Wan 2.1 I2V, a config with
    ``image_dim``) also encoder_hidden_states_image (1, image_tokens, image_dim), the CLIP vision
    ``hidden_states[-2]`` ``WanImageToVideoPipeline`` passes."""
    f = s.get("vae_scale", VAE_SCALE_SPATIAL)
    frames = _latent_frames(s["num_frames"], VAE_SCALE_TEMPORAL)
    h, w = _div(s["height"], f, "height"), _div(s["width"], f, "width")
    timestep = (1, frames * ((h + 1) // 2) * ((w + 1) // 2)) if s.get("expand_timesteps") else (1,)
    inputs = {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, h, w)),
        "timestep": TensorSpec(timestep),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_dim"))),
    }
    if s.get("image_tokens"):
        inputs["encoder_hidden_states_image"] = TensorSpec((1, s["image_tokens"], _cfg(model, "image_dim")))
    return inputs


@input_builder("WanVACETransformer3DModel", settings=("height", "width", "num_frames", "text_len"))
def _wan_vace_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """The Wan transformer's inputs, and control_hidden_states (1, vace_in_channels, T, H/8, W/8): the control
    latent on the noise latent's grid, as ``WanVACEPipeline`` passes it (no reference images)."""
    inputs = _wan_transformer_inputs(model, call, s)
    _, _, frames, h, w = inputs["hidden_states"].shape
    inputs["control_hidden_states"] = TensorSpec((1, _cfg(model, "vace_in_channels"), frames, h, w))
    return inputs


@input_builder("AutoencoderKLWan", settings=("height", "width"), calls=("decode", "encode"),
               optional=("num_frames", "vae_tiling", "vae_tile"))
def _autoencoder_kl_wan_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, z_dim, T, H/f, W/f), f = ``scale_factor_spatial``, T = (num_frames − 1)/
    ``scale_factor_temporal`` + 1 (the latent ``WanPipeline`` decodes); encode: the RGB video
    x (1, in_channels / patch², num_frames, H, W) (``_encode`` patchifies it to ``in_channels``).
    Without ``num_frames``: one frame, an image pipeline's (``Cosmos2TextToImagePipeline`` sets ``num_frames = 1``
    and decodes that one-frame latent, pipeline_cosmos2_text2image.py:512, 352, 656). ``vae_tiling`` 1 (optional)
    calls ``enable_tiling()`` first (its defaults: tiles of 256 px every 192 px, autoencoder_kl_wan.py:1080-1085;
    ``vae_tile`` another tile side, :func:`~flopcalc.engine.measure.harness.enable_sized_tiling`): ``tiled_decode`` /
    ``tiled_encode`` run when a side exceeds the tile."""
    enable_sized_tiling(model, s)
    s = {**s, "num_frames": s.get("num_frames", 1)}
    if call == "encode":
        patch = _cfg(model, "patch_size") or 1
        return {"x": TensorSpec((1, _div(_cfg(model, "in_channels"), patch * patch, "in_channels"),
                                 s["num_frames"], s["height"], s["width"]))}
    f = _cfg(model, "scale_factor_spatial")
    return {"z": TensorSpec((1, _cfg(model, "z_dim"),
                             _latent_frames(s["num_frames"], _cfg(model, "scale_factor_temporal")),
                             _div(s["height"], f, "height"), _div(s["width"], f, "width")))}


@input_builder("UMT5EncoderModel", settings=("seq_len",))
def _umt5_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids (1, seq_len) int64; ``attention_mask`` the constant ``None`` (see the module doc)."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None}


_umt5_inputs.method_note = (  # type: ignore[attr-defined]
    "WanPipeline passes the tokenizer's attention mask; it is left out (None) because UMT5's mask "
    "preparation calls Tensor.item(), which meta tensors refuse, and a padding mask changes no dense count."
)
