"""Input builders for the Qwen-Image family: ``QwenImageTransformer2DModel`` and
``AutoencoderKLQwenImage`` (imported by ``flopcalc.engine.measure.harness``; see validation/README.md).

No module needs help on meta: the rotary tables (``QwenEmbedRope``) are built at init under
``torch.device("meta")`` and only sliced and concatenated per call; the causal VAE runs its
one-frame chunk as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, enable_sized_tiling, input_builder

#: ``QwenImagePipeline``: ``vae_scale_factor = 2 ** len(vae.temperal_downsample)`` (8), latents packed 2×2.
VAE_SCALE_FACTOR = 8
PACKING = 2


class _PythonConstant(list):
    """A non-tensor keyword input (a Python list) that the harness passes as a wrapper constant.

    The harness records each input's ``shape`` and ``dtype``; this list reports the nesting shape
    and, as its "dtype", words saying what it is, so the fixture states that it was passed."""

    def __init__(self, value: list, shape: tuple[int, ...], what: str) -> None:
        super().__init__(value)
        self.shape = shape
        self.dtype = what


@dataclass(frozen=True)
class _ConstantSpec(TensorSpec):
    """A :class:`TensorSpec` whose ``make()`` gives a :class:`_PythonConstant` (not a tensor, so the
    wrapper passes it as a constant and thop does not see it)."""

    value: tuple = ()
    what: str = ""

    def make(self) -> Any:  # type: ignore[override]
        return _PythonConstant([list(v) for v in self.value], self.shape, self.what)


def _img_shapes(*grids: tuple[int, int, int]) -> _ConstantSpec:
    """``img_shapes = [[(1, H/16, W/16), <reference images>...]] * batch_size`` as the Qwen-Image pipelines
    build it."""
    who = ("QwenImagePipeline passes it" if len(grids) == 1
           else "the edit pipelines pass it (reference images after the output latent)")
    return _ConstantSpec(shape=(1, len(grids), 3), dtype=torch.int64, value=(grids,),
                         what=f"python list [{list(grids)}]: img_shapes as {who} "
                              "(a wrapper constant, not a thop input)")


@input_builder("QwenImageTransformer2DModel", settings=("height", "width", "text_len"),
               optional=("reference_height", "reference_width", "references", "frames"))
def _qwen_image_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``QwenImagePipeline`` calls it at batch 1: hidden_states (1, (H/16)(W/16), in_channels),
    the 2×2-packed latent; encoder_hidden_states (1, text_len, joint_attention_dim); timestep (1,);
    img_shapes [[(1, H/16, W/16)]]; no mask (one prompt: the pipeline drops an all-ones mask) and no
    guidance (``guidance_embeds`` false). ``use_additional_t_cond`` models also get
    additional_t_cond (1,) int64 (the layered pipeline's input). The edit pipelines
    (``reference_height`` × ``reference_width``, ``references`` images, default 1) append each reference
    latent's packed tokens to hidden_states and its ``(1, h/16, w/16)`` to img_shapes; the layered pipeline
    (``frames`` = layers + 1) stacks that many output latents before them."""
    rows = _div(s["height"], VAE_SCALE_FACTOR * PACKING, "height")
    cols = _div(s["width"], VAE_SCALE_FACTOR * PACKING, "width")
    grids = [(1, rows, cols)] * s.get("frames", 1)  # QwenImageLayeredPipeline: layers + 1 latents
    if "reference_height" in s:
        grids += [(1, _div(s["reference_height"], VAE_SCALE_FACTOR * PACKING, "reference_height"),
                   _div(s["reference_width"], VAE_SCALE_FACTOR * PACKING, "reference_width"))] * s.get("references", 1)
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, sum(r * c for _, r, c in grids), _cfg(model, "in_channels"))),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "joint_attention_dim"))),
        "timestep": TensorSpec((1,)),
        "img_shapes": _img_shapes(*grids),
    }
    if _cfg(model, "use_additional_t_cond"):
        inputs["additional_t_cond"] = TensorSpec((1,), torch.int64)
    return inputs


@input_builder("AutoencoderKLQwenImage", settings=("height", "width"), calls=("decode", "encode"),
               optional=("vae_tiling", "vae_tile"))
def _autoencoder_kl_qwen_image_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """One image as one frame, as ``QwenImagePipeline`` feeds it: decode z (1, z_dim, 1, H/f, W/f)
    with f = 2 ** len(temperal_downsample); encode x (1, input_channels, 1, H, W). ``vae_tiling`` 1 (optional)
    calls ``enable_tiling()`` first (defaults: tiles of 256 px every 192 px, autoencoder_kl_qwenimage.py:727-732),
    ``vae_tile`` another tile size (:func:`~flopcalc.engine.measure.harness.enable_sized_tiling`)."""
    enable_sized_tiling(model, s)
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "input_channels"), 1, s["height"], s["width"]))}
    factor = 2 ** len(_cfg(model, "temperal_downsample"))
    return {"z": TensorSpec((1, _cfg(model, "z_dim"), 1, _div(s["height"], factor, "height"),
                             _div(s["width"], factor, "width")))}


_qwen_image_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "img_shapes is passed as the python list QwenImagePipeline builds ([[(1, H/16, W/16)]]), a constant of the "
    "wrapper, not a thop input"
)
