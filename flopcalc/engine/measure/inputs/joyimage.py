"""Input builders for JoyImage-Edit (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``JoyImageEditTransformer3DModel`` and ``JoyImageEditPlusTransformer3DModel``. Nothing needs help on meta: the rotary tables are built on the CPU from the grid
(``get_rotary_pos_embed``; with ``rope_type`` "mrope" it reads the grid's maximum with ``.item()``, a CPU tensor).
The text encoder is a ``Qwen3VLForConditionalGeneration`` (``krea2.py``'s builder), the VAE an ``AutoencoderKLWan``
(``wan.py``'s builder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder
from flopcalc.engine.measure.inputs.qwen_image import _PythonConstant

#: ``JoyImageEditPipeline``: ``vae_scale_factor_spatial`` 8 (the Wan 2.1 VAE).
VAE_SCALE_FACTOR = 8


@input_builder("JoyImageEditTransformer3DModel", settings=("height", "width", "text_len"))
def _joyimage_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """One pass as ``JoyImageEditPipeline.__call__`` feeds it without an image (pipeline_joyimage_edit.py:820-825):
    hidden_states (1, 1, in_channels, 1, H/8, W/8), one item of one latent frame; timestep (1,);
    encoder_hidden_states (1, text_len, text_dim)."""
    h = _exact_div(s["height"], VAE_SCALE_FACTOR, "height")
    w = _exact_div(s["width"], VAE_SCALE_FACTOR, "width")
    return {
        "hidden_states": _f32(1, 1, _cfg(model, "in_channels"), 1, h, w),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "text_dim")),
    }


@input_builder("JoyImageEditPlusTransformer3DModel", settings=("height", "width", "text_len"))
def _joyimage_plus_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """One row as ``JoyImageEditPlusPipeline.__call__`` feeds it without images (pipeline_joyimage_edit_plus.py:692-699):
    hidden_states (1, N, in_channels, p_t, p_h, p_w), the N = (H/8/p_h)(W/8/p_w) patches of one latent frame;
    timestep (1,); encoder_hidden_states (1, text_len, text_dim) with encoder_hidden_states_mask (1, text_len) int64
    (the processor's mask: the pipeline passes it); shape_list [[(1, H/8/p_h, W/8/p_w)]]."""
    pt, ph, pw = _cfg(model, "patch_size")
    rows = _exact_div(_exact_div(s["height"], VAE_SCALE_FACTOR, "height"), ph, "latent height")
    cols = _exact_div(_exact_div(s["width"], VAE_SCALE_FACTOR, "width"), pw, "latent width")
    t = s["text_len"]
    return {
        "hidden_states": _f32(1, rows * cols, _cfg(model, "in_channels"), pt, ph, pw),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, t, _cfg(model, "text_dim")),
        "encoder_hidden_states_mask": TensorSpec((1, t), torch.int64),
        "shape_list": _PythonConstant([[(1, rows, cols)]], (1, 1, 3), f"python list [[(1, {rows}, {cols})]]: shape_list "
                                      "as JoyImageEditPlusPipeline passes it (a wrapper constant, not a thop input)"),
    }
