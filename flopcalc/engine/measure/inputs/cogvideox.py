"""Input builders for the CogVideoX family: ``CogVideoXTransformer3DModel`` and
``AutoencoderKLCogVideoX`` (imported by ``flopcalc.engine.measure.harness``; see validation/README.md).

Settings are the pipeline's: ``height``/``width`` in pixels, ``num_frames`` video frames,
``text_len`` T5 tokens, ``vae_tiling`` (0/1: ``vae.enable_tiling()`` before the call).
``CogVideoXPipeline.__call__`` (diffusers 0.42.1 ``pipelines/cogvideo/pipeline_cogvideox.py``)
makes ``(num_frames - 1) // vae_scale_factor_temporal + 1`` latent frames of
``H / vae_scale_factor_spatial × W / vae_scale_factor_spatial``, pads them to a multiple of the
transformer's ``patch_size_t`` (CogVideoX 1.5), and decodes the unpadded latent.

Help on meta: only CogVideoX-5b style transformers (``use_rotary_positional_embeddings``) need
it: their rotary tables are computed by the pipeline (``_prepare_rotary_positional_embeddings``),
so the builder calls that helper on CPU and moves the tables to meta (no matmuls in it;
``apply_rotary_emb`` is elementwise). Everything else runs on meta as is: the 2b sincos table is
recomputed by ``CogVideoXPatchEmbed`` on the device of its input, the VAE's convolutions and
its frame-batched ``_decode``/``_encode`` (with their conv caches) only need shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder


def _latent_frames(num_frames: int, temporal: int) -> int:
    """``CogVideoXPipeline``: ``(num_frames - 1) // vae_scale_factor_temporal + 1``."""
    return (num_frames - 1) // temporal + 1


class _RotaryConstant(tuple):
    """``image_rotary_emb`` (cos, sin) as the pipeline passes it: a tuple of meta tensors that the
    harness passes as a wrapper constant (not a thop input). It reports a ``shape`` and ``dtype``
    for the fixture's input record."""

    shape: tuple[int, ...]
    dtype: str

    def __new__(cls, tables: tuple[torch.Tensor, torch.Tensor]) -> _RotaryConstant:
        obj = super().__new__(cls, tables)
        obj.shape = (2, *tables[0].shape)
        obj.dtype = ("tuple (freqs_cos, freqs_sin) from CogVideoXPipeline._prepare_rotary_positional_embeddings, "
                     "computed on CPU and moved to meta (a wrapper constant, not a thop input)")
        return obj


def _rotary_tables(model: nn.Module, height: int, width: int, latent_frames: int) -> _RotaryConstant:
    """The pipeline's own helper, unbound, on a stand-in ``self`` with the transformer's config and
    the 8× spatial VAE factor (``2 ** (len(block_out_channels) - 1)`` of every CogVideoX VAE)."""
    from diffusers.pipelines.cogvideo.pipeline_cogvideox import CogVideoXPipeline

    stand_in = SimpleNamespace(vae_scale_factor_spatial=8, transformer=model)
    cos, sin = CogVideoXPipeline._prepare_rotary_positional_embeddings(stand_in, height, width, latent_frames,
                                                                      torch.device("cpu"))
    return _RotaryConstant((cos.to("meta"), sin.to("meta")))


@input_builder("CogVideoXTransformer3DModel", settings=("height", "width", "num_frames", "text_len"))
def _cogvideox_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``CogVideoXPipeline`` calls it at batch 1: hidden_states (1, T, in_channels, H/8, W/8)
    with T = (num_frames − 1) // 4 + 1 latent frames (padded up to a multiple of ``patch_size_t``
    when set), encoder_hidden_states (1, text_len, text_embed_dim), timestep (1,);
    image_rotary_emb from the pipeline's helper when ``use_rotary_positional_embeddings``;
    ofs (1,) when ``ofs_embed_dim`` is set (the image-to-video pipelines pass it)."""
    frames = _latent_frames(s["num_frames"], _cfg(model, "temporal_compression_ratio"))
    p_t = _cfg(model, "patch_size_t")
    if p_t is not None and frames % p_t:
        frames += p_t - frames % p_t
    h, w = _div(s["height"], 8, "height"), _div(s["width"], 8, "width")
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, frames, _cfg(model, "in_channels"), h, w)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "text_embed_dim"))),
        "timestep": TensorSpec((1,)),
    }
    if _cfg(model, "ofs_embed_dim"):
        inputs["ofs"] = TensorSpec((1,))
    if _cfg(model, "use_rotary_positional_embeddings"):
        inputs["image_rotary_emb"] = _rotary_tables(model, s["height"], s["width"], frames)
        model._measure_notes = [(
            "image_rotary_emb: CogVideoXPipeline._prepare_rotary_positional_embeddings run on CPU (unbound, "
            "with the transformer's config and vae_scale_factor_spatial 8), its (cos, sin) moved to meta and "
            "passed as a wrapper constant (elementwise use only, no matmul)."
        )]
    return inputs


@input_builder("AutoencoderKLCogVideoX", settings=("height", "width", "num_frames", "vae_tiling"),
               calls=("decode", "encode"))
def _autoencoder_kl_cogvideox_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """decode: z (1, latent_channels, T, H/f, W/f), T = (num_frames − 1) // temporal_compression_ratio
    + 1, f = 2 ** (len(block_out_channels) − 1), as ``decode_latents`` passes it; encode: the video
    x (1, in_channels, num_frames, H, W). ``vae_tiling`` 1 calls ``enable_tiling()`` first (its
    default tile sizes and overlaps)."""
    if s["vae_tiling"]:
        model.enable_tiling()
        model._measure_notes = [(
            "vae.enable_tiling() was called before measuring (default tile sizes and overlap factors): "
            "tiled_decode / tiled_encode ran."
        )]
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    factor = 2 ** (len(_cfg(model, "block_out_channels")) - 1)
    frames = _latent_frames(s["num_frames"], int(_cfg(model, "temporal_compression_ratio")))
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), frames, _div(s["height"], factor, "height"),
                             _div(s["width"], factor, "width")))}

