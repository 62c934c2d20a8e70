"""Input builder for ``ZImageTransformer2DModel`` (imported by ``measure.py``; see validation/README.md).

``ZImagePipeline`` calls the transformer with Python lists: one latent ``(C, 1, H/8, W/8)`` per image
and one caption ``(T, cap_feat_dim)`` per prompt (the encoder's hidden states at the prompt's real
tokens). The builder passes such one-element lists of meta tensors as wrapper constants (not thop
inputs); the timestep is a tensor. Nothing else needs help on meta: the rotary tables are computed
on CPU by the model itself and moved to the latents' device. The ``AutoencoderKL`` uses ``measure.py``'s
builder.

The text encoder (``Qwen3Model``, and ``Qwen3ForCausalLM`` for a bare config) gets the SDPA
text-encoder inputs of ``inputs_text_encoders.py``: token ids ``(1, seq_len)`` and no mask (the pipeline's
padding mask never changes the dense work; building it reads data on meta). ``use_cache`` keeps its
default (True): transformers 5 needs it on meta. ``output_hidden_states=True``, which the pipeline passes
to read ``hidden_states[-2]``, only collects outputs that are computed anyway: left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.inputs.qwen_image import _PythonConstant
from flopcalc.engine.measure.inputs.text_encoders import _sdpa_text_inputs
from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, input_builder, model_builder

#: ``ZImagePipeline``: ``vae_scale_factor`` 8 (``AutoencoderKL``); the transformer patches 2×2 itself.
VAE_SCALE_FACTOR = 8


@dataclass(frozen=True)
class _TensorListSpec(TensorSpec):
    """A one-element Python list holding a meta tensor of ``shape``, passed as a wrapper constant."""

    what: str = ""

    def make(self) -> Any:  # type: ignore[override]
        return _PythonConstant([torch.zeros(self.shape, dtype=self.dtype, device="meta")], self.shape, self.what)


@input_builder("ZImageTransformer2DModel", settings=("height", "width", "text_len"))
def _z_image_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``ZImagePipeline`` calls it for one image without CFG: x [(in_channels, 1, H/8, W/8)],
    t (1,), cap_feats [(text_len, cap_feat_dim)]; ``patch_size`` 2 and ``f_patch_size`` 1 are the
    forward's defaults, which the pipeline keeps."""
    h = _exact_div(s["height"], VAE_SCALE_FACTOR, "height")
    w = _exact_div(s["width"], VAE_SCALE_FACTOR, "width")
    return {
        "x": _TensorListSpec((_cfg(model, "in_channels"), 1, h, w),
                             what="python list [latent (C, 1, H/8, W/8)] as ZImagePipeline passes it "
                                  "(a wrapper constant, not a thop input)"),
        "t": TensorSpec((1,)),
        "cap_feats": _TensorListSpec((s["text_len"], _cfg(model, "cap_feat_dim")),
                                     what="python list [caption (T, cap_feat_dim)] as ZImagePipeline passes it "
                                          "(a wrapper constant, not a thop input)"),
    }


_z_image_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "x and cap_feats are passed as the one-element python lists of tensors ZImagePipeline builds, constants of the "
    "wrapper, not thop inputs"
)

input_builder("Qwen3Model", "Qwen3ForCausalLM", settings=("seq_len",))(_sdpa_text_inputs)


@model_builder("ZImageControlNetModel")
def _z_image_controlnet(config_dir) -> nn.Module:
    """``ZImageControlNetModel`` as ``ZImageControlNetPipeline.__init__`` makes it: built on meta from its config, then
    given the transformer's embedders, refiners and pad tokens by ``from_transformer`` (the transformer built on meta
    from the sibling ``transformer`` folder of the pipeline folder). Those modules' parameters are the transformer's:
    ``_measure_shared`` names them, so the harness counts the ControlNet's own parameters only (their work is the
    ControlNet's, under their own names)."""
    from diffusers import ZImageControlNetModel, ZImageTransformer2DModel

    from flopcalc.engine.architectures.controlnet_z_image import SHARED

    with torch.device("meta"):
        controlnet = ZImageControlNetModel.from_config(ZImageControlNetModel.load_config(str(config_dir)))
        transformer = ZImageTransformer2DModel.from_config(
            ZImageTransformer2DModel.load_config(str(config_dir.parent / "transformer")))
    controlnet = ZImageControlNetModel.from_transformer(controlnet, transformer)
    controlnet._measure_shared = (*SHARED, "x_pad_token", "cap_pad_token")
    controlnet._measure_transformer_config = transformer.config
    controlnet._measure_notes = [
        "built as ZImageControlNetPipeline.__init__ builds it: ZImageControlNetModel.from_transformer(controlnet, "
        "transformer), the transformer from the pipeline folder's transformer/config.json; the transformer's modules "
        "it runs count here by their work and with the transformer by their parameters (left out of params)"]
    return controlnet


@input_builder("ZImageControlNetModel", settings=("height", "width", "text_len"))
def _z_image_controlnet_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``ZImageControlNetPipeline`` calls it for one image without CFG: the transformer's x, t and cap_feats
    (channels and caption width from the transformer's config) and control_context [(control_in_dim, 1, H/8, W/8)]:
    the control image's latent (zero-padded, or with the mask and the masked image's latent)."""
    transformer = model._measure_transformer_config
    h = _exact_div(s["height"], VAE_SCALE_FACTOR, "height")
    w = _exact_div(s["width"], VAE_SCALE_FACTOR, "width")
    wrapped = "as ZImageControlNetPipeline passes it (a wrapper constant, not a thop input)"
    return {
        "x": _TensorListSpec((transformer["in_channels"], 1, h, w),
                             what=f"python list [latent (C, 1, H/8, W/8)] {wrapped}"),
        "t": TensorSpec((1,)),
        "cap_feats": _TensorListSpec((s["text_len"], transformer["cap_feat_dim"]),
                                     what=f"python list [caption (T, cap_feat_dim)] {wrapped}"),
        "control_context": _TensorListSpec(
            (_cfg(model, "control_in_dim"), 1, h, w),
            what=f"python list [control latent (control_in_dim, 1, H/8, W/8)] {wrapped}"),
    }
