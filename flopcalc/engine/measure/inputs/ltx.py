"""Input builders for LTX-Video: ``LTXVideoTransformer3DModel`` and ``AutoencoderKLLTXVideo``
(imported by ``flopcalc.engine.measure.harness``; see validation/README.md).

Settings are pipeline-level: ``height``/``width`` in video pixels, ``num_frames`` video frames,
``text_len`` T5 tokens. The geometry is ``LTXPipeline``'s (diffusers
``pipelines/ltx/pipeline_ltx.py``): latent frames ``(num_frames - 1) // t + 1`` and latent sides
``height // s`` with the VAE's temporal / spatial compression ratios ``t`` / ``s`` (8 and 32 for the
0.9 VAEs), latents packed into ``(T / p_t)(h / p)(w / p)`` tokens by ``_pack_latents``.

Nothing needs help on the meta device: the rotary tables (``LTXVideoRotaryPosEmbed``) are
``arange``/``meshgrid``/``linspace`` and elementwise products, built from the python ints the
pipeline passes; the causal convolutions pad by repeating frames; ``inject_noise`` draws
``torch.randn`` on meta. The pipeline's python ints (``num_frames``, ``height``, ``width``) and
the float triple ``rope_interpolation_scale`` are passed as wrapper constants (not thop inputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import torch
from flopcalc.engine.measure.harness import (
    TensorSpec, _cfg, _exact_div as _div, enable_sized_tiling, input_builder, model_builder,
)
from torch import nn

#: ``LTXPipeline.__call__``'s default ``frame_rate`` (only scales the rotary grid).
FRAME_RATE = 25


class _Constant:
    """Marks a python value the harness passes as a wrapper constant: it records ``shape`` and,
    as its "dtype", words saying what it is."""

    shape: tuple[int, ...] = ()
    dtype: str = ""


class _ConstInt(int, _Constant):
    def __new__(cls, value: int, what: str) -> Self:
        obj = super().__new__(cls, value)
        obj.dtype = what
        return obj


class _ConstTuple(tuple, _Constant):
    def __new__(cls, value: tuple, what: str) -> Self:
        obj = super().__new__(cls, value)
        obj.shape = (len(value),)
        obj.dtype = what
        return obj


class _ConstantSpec(TensorSpec):
    """A :class:`TensorSpec` whose ``make()`` returns the python constant (not a tensor: the
    wrapper passes it as a constant and thop does not see it)."""

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, "shape", getattr(value, "shape", ()))
        object.__setattr__(self, "dtype", torch.float32)
        object.__setattr__(self, "value", value)

    def make(self) -> Any:  # type: ignore[override]
        return self.value


#: The 0.9 VAE of the LTX-Video card: 32× spatial, 8× temporal (LTXPipeline's fallbacks too).
PIPELINE_SPATIAL, PIPELINE_TEMPORAL = 32, 8


def latent_grid(s: Mapping[str, int], spatial: int = PIPELINE_SPATIAL, temporal: int = PIPELINE_TEMPORAL
                ) -> tuple[int, int, int]:
    """``(latent frames, latent height, latent width)`` as ``LTXPipeline.prepare_latents`` computes them."""
    return ((s["num_frames"] - 1) // temporal + 1, _div(s["height"], spatial, "height"),
            _div(s["width"], spatial, "width"))


@input_builder("LTXVideoTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("per_token_timesteps", "extra_tokens"))
def _ltx_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``LTXPipeline`` calls it at batch 1 (with the card's 32×/8× VAE): hidden_states
    (1, N, in_channels), N = (T/p_t)(h/p)(w/p) packed tokens; encoder_hidden_states
    (1, text_len, caption_channels); timestep (1,); encoder_attention_mask (1, text_len);
    num_frames/height/width the token grid (python ints) and rope_interpolation_scale
    (8/25, 32, 32) as the pipeline passes them (constants). ``per_token_timesteps`` 1: timestep (1, N), one
    per token, as ``LTXImageToVideoPipeline`` passes ``t · (1 − conditioning_mask)``. ``extra_tokens`` E:
    ``LTXConditionPipeline``'s conditioning tokens appended to the N latent tokens (hidden_states (1, N + E, C),
    with ``video_coords`` (1, 3, N + E) for the rotary tables, as that pipeline passes them)."""
    frames, rows, cols = latent_grid(s)
    p, pt = _cfg(model, "patch_size"), _cfg(model, "patch_size_t")
    gt, gh, gw = _div(frames, pt, "latent frames"), _div(rows, p, "latent height"), _div(cols, p, "latent width")
    tokens = gt * gh * gw + s.get("extra_tokens", 0)
    inputs = {
        "hidden_states": TensorSpec((1, tokens, _cfg(model, "in_channels"))),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "caption_channels"))),
        "timestep": TensorSpec((1, tokens) if s.get("per_token_timesteps") else (1,)),
        "encoder_attention_mask": TensorSpec((1, s["text_len"])),
        "num_frames": _ConstantSpec(_ConstInt(gt, "python int: token-grid frames (a wrapper constant)")),
        "height": _ConstantSpec(_ConstInt(gh, "python int: token-grid rows (a wrapper constant)")),
        "width": _ConstantSpec(_ConstInt(gw, "python int: token-grid columns (a wrapper constant)")),
        "rope_interpolation_scale": _ConstantSpec(_ConstTuple(
            (PIPELINE_TEMPORAL / FRAME_RATE, PIPELINE_SPATIAL, PIPELINE_SPATIAL),
            "python tuple (8/25, 32, 32): rope_interpolation_scale as LTXPipeline passes it (a wrapper constant)")),
    }
    if s.get("extra_tokens"):
        inputs["video_coords"] = TensorSpec((1, 3, tokens))
    return inputs


@input_builder("AutoencoderKLLTXVideo", settings=("height", "width", "num_frames"), calls=("decode", "encode"),
               optional=("vae_tiling", "vae_tile"))
def _ltx_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """decode: z (1, latent_channels, T, h, w) on the latent grid the VAE's compression ratios give,
    plus temb (1,) (``decode_timestep``) when ``timestep_conditioning``, else temb None (LTXPipeline
    passes ``timestep = None`` then); encode: x (1, in_channels, num_frames, height, width).
    Tiling is off (the VAE's default; LTXPipeline does not enable it); ``vae_tiling`` 1 (optional) calls
    ``enable_tiling()`` first (its defaults: spatial tiles of 512 px every 448 px, autoencoder_kl_ltx.py:1177-1184,
    1212; ``vae_tile`` another tile side, :func:`~flopcalc.engine.measure.harness.enable_sized_tiling`):
    ``tiled_decode`` (:1389) runs each tile over all latent frames when a side exceeds the tile
    (``use_framewise_decoding`` stays off: enable_tiling does not set it)."""
    enable_sized_tiling(model, s)
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    spatial, temporal = model.spatial_compression_ratio, model.temporal_compression_ratio
    frames, rows, cols = latent_grid(s, spatial, temporal)
    inputs: dict[str, Any] = {"z": TensorSpec((1, _cfg(model, "latent_channels"), frames, rows, cols))}
    inputs["temb"] = TensorSpec((1,)) if _cfg(model, "timestep_conditioning") else None
    return inputs


_ltx_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "num_frames, height and width (the token grid, python ints) and rope_interpolation_scale (8/25, 32, 32) are "
    "passed as LTXPipeline passes them, as wrapper constants (not thop inputs); encoder_attention_mask is a meta "
    "(1, text_len) tensor, turned into an additive bias by the model (a mask changes no dense FLOP)."
)
_ltx_vae_inputs.method_note = (  # type: ignore[attr-defined]
    "Untiled, one call over all frames: use_tiling and use_framewise_decoding are off, the VAE's defaults, which "
    "LTXPipeline keeps."
)


@model_builder("LTXLatentUpsamplerModel")
def _build_latent_upsampler(config_dir: Path) -> nn.Module:
    """Not exported at diffusers' top level: ``diffusers.pipelines.ltx.modeling_latent_upsampler``'s class, from
    its config, on meta."""
    from diffusers.pipelines.ltx.modeling_latent_upsampler import LTXLatentUpsamplerModel

    with torch.device("meta"):
        return LTXLatentUpsamplerModel.from_config(LTXLatentUpsamplerModel.load_config(str(config_dir)))


@input_builder("LTXLatentUpsamplerModel", settings=("height", "width", "num_frames"))
def _ltx_latent_upsampler_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``LTXLatentUpsamplePipeline`` calls it: hidden_states (1, in_channels, T, h, w), the latent of a
    ``num_frames``-frame ``height × width`` video under the 0.9.5/0.9.7 VAE (32× spatial, 8× temporal)."""
    frames, rows, cols = latent_grid(s)
    return {"hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, rows, cols))}
