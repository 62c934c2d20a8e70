"""Input builders for the HunyuanVideo family: ``HunyuanVideoTransformer3DModel``,
``AutoencoderKLHunyuanVideo`` and ``LlamaModel`` (imported by ``flopcalc.engine.measure.harness``; see validation/README.md).

Settings are pipeline level: ``height``/``width`` in pixels, ``num_frames`` video frames (the latent
has ``(num_frames - 1) // 4 + 1`` frames, ``HunyuanVideoPipeline.prepare_latents``), ``text_len``
Llama tokens the transformer sees, ``seq_len`` tokens a text encoder runs on. The spatial and
temporal factors are the VAE's ``spatial_compression_ratio`` (8) and ``temporal_compression_ratio``
(4), the pipeline's defaults without a VAE.

Nothing is patched. Everything runs on meta as is: the transformer's masks (the attention mask
built from ``encoder_attention_mask``, the refiner's pairwise mask) are built by comparisons and
broadcasts that need no data, its rotary tables come from ``arange`` grids, and the VAE's
``vae.decode(z)`` / ``vae.encode(x)`` take their default paths (``use_framewise_decoding`` /
``use_framewise_encoding`` on: temporal chunks; ``use_tiling`` off). ``LlamaModel`` gets no
attention mask (the pipeline's padding mask never changes the dense matmuls; without it the causal
mask is built from shapes alone) and the pipeline's ``output_hidden_states=True`` is left out (it only
collects layer outputs that are computed anyway).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder

#: ``HunyuanVideoPipeline`` without a VAE: ``vae_scale_factor_spatial`` 8, ``vae_scale_factor_temporal`` 4.
SPATIAL = 8
TEMPORAL = 4


def latent_frames(num_frames: int, temporal: int = TEMPORAL) -> int:
    """``(num_frames - 1) // vae_scale_factor_temporal + 1`` (``prepare_latents``)."""
    return (num_frames - 1) // temporal + 1


@input_builder("HunyuanVideoTransformer3DModel", settings=("height", "width", "num_frames", "text_len"))
def _hunyuan_video_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``HunyuanVideoPipeline`` calls it at batch 1: hidden_states (1, C, F_lat, H/8, W/8);
    timestep (1,); encoder_hidden_states (1, text_len, text_embed_dim) with its
    encoder_attention_mask (1, text_len) float (the pipeline casts the tokenizer mask to the
    transformer dtype); pooled_projections (1, pooled_projection_dim); guidance (1,) (always passed;
    used when ``guidance_embeds``)."""
    t = s["text_len"]
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), latent_frames(s["num_frames"]),
                                     _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width"))),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, t, _cfg(model, "text_embed_dim"))),
        "encoder_attention_mask": TensorSpec((1, t)),
        "pooled_projections": TensorSpec((1, _cfg(model, "pooled_projection_dim"))),
        "guidance": TensorSpec((1,)),
    }


@input_builder("AutoencoderKLHunyuanVideo", settings=("height", "width", "num_frames"), calls=("decode", "encode"),
               optional=("vae_tiling",))
def _hunyuan_video_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, F_lat, H/s, W/s), the pipeline's latent (s: the VAE's
    ``spatial_compression_ratio``, F_lat from its ``temporal_compression_ratio``); encode: x (1,
    in_channels, num_frames, H, W). ``vae_tiling`` 1 (optional) calls ``enable_tiling()`` first (its default
    tile sizes and strides): the temporal chunks are then also split into spatial tiles."""
    if s.get("vae_tiling"):
        model.enable_tiling()
        model._measure_notes = [("vae.enable_tiling() was called before measuring (default tile sizes and strides): "
                                 "spatial tiles within the temporal chunks ran.")]
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    f = _cfg(model, "spatial_compression_ratio")
    frames = latent_frames(s["num_frames"], _cfg(model, "temporal_compression_ratio"))
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), frames, _div(s["height"], f, "height"),
                             _div(s["width"], f, "width")))}


@input_builder("LlamaModel", settings=("seq_len",))
def _llama_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """Token ids ``(1, seq_len)`` int64 (the Llama prompt padded to max_sequence_length + the
    template's crop_start); ``attention_mask`` the constant ``None`` (see module doc)."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None}


_hunyuan_video_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "Inputs as HunyuanVideoPipeline passes them (encoder_attention_mask and guidance included); nothing is "
    "patched: the attention masks built from the text mask are dense, so they save no counted work."
)
_hunyuan_video_vae_inputs.method_note = (  # type: ignore[attr-defined]
    "The model's defaults, as HunyuanVideoPipeline runs it: use_framewise_decoding / use_framewise_encoding on "
    "(_temporal_tiled_decode: 5 latent frames every 3 when there are more than 4; _temporal_tiled_encode: 17 "
    "frames every 12 when there are more than 16; each chunk a separate decoder / encoder call, overlaps "
    "counted in full), use_tiling off. Nothing is patched."
)
