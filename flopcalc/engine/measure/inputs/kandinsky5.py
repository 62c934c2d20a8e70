"""Input builder for ``Kandinsky5Transformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md).

Settings are pipeline-level, as the Kandinsky 5 pipelines (diffusers ``pipelines/kandinsky5``) shape the call:
``height`` / ``width`` pixels, ``num_frames`` frames (an image without it), the latent ``((F − 1)//4 + 1, H/8, W/8)``
channels-last (with ``visual_cond``: the latent, the condition and its mask, ``2C + 1`` channels), ``text_len``
Qwen2.5-VL tokens, the pooled CLIP vector. The rotary positions are passed as the pipelines build them:
``visual_rope_pos`` three ``arange`` s (latent frames, and the patched rows and columns: python lists, a wrapper
constant) and ``text_rope_pos`` an ``arange`` of the text length (an int64 meta tensor: the buffer lookup it indexes
does no counted work); ``scale_factor`` the pipeline's (``(1, 2, 2)`` between 480 and 854 pixels a side, else
``(1, 3.16, 3.16)``; it only scales the rotary angles); ``sparse_params`` None (the dense attention). Nothing needs
help on the meta device.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder
from flopcalc.engine.measure.inputs.ltx import _ConstantSpec

#: The VAEs' compression (HunyuanVideo VAE: 8× space, 4× time; FLUX VAE: 8×).
SPATIAL, TEMPORAL = 8, 4


class _Positions(list):
    """``visual_rope_pos`` as python lists (indexing a buffer with a list selects the same rows an ``arange`` tensor
    does), shown compactly in the fixture's method."""

    def __repr__(self) -> str:
        return "[" + ", ".join(f"arange({len(p)})" for p in self) + "]"


@input_builder("Kandinsky5Transformer3DModel", settings=("height", "width", "text_len"), optional=("num_frames",))
def _kandinsky5_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """hidden_states (1, F', H/8, W/8, C or 2C + 1), encoder_hidden_states (1, text_len, in_text_dim), timestep (1,),
    pooled_projections (1, in_text_dim2), the rotary positions and ``scale_factor`` as the pipelines pass them."""
    frames = (s["num_frames"] - 1) // TEMPORAL + 1 if "num_frames" in s else 1
    rows, cols = _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width")
    channels = _cfg(model, "in_visual_dim")
    if _cfg(model, "visual_cond"):
        channels = 2 * channels + 1
    pt, ph, pw = _cfg(model, "patch_size")
    between = all(480 <= x <= 854 for x in (s["height"], s["width"]))
    return {
        "hidden_states": TensorSpec((1, frames, rows, cols, channels)),
        "encoder_hidden_states": TensorSpec((1, s["text_len"], _cfg(model, "in_text_dim"))),
        "timestep": TensorSpec((1,)),
        "pooled_projections": TensorSpec((1, _cfg(model, "in_text_dim2"))),
        "visual_rope_pos": _ConstantSpec(_Positions([list(range(frames)), list(range(_div(rows, ph, "rows"))),
                                                     list(range(_div(cols, pw, "columns")))])),
        "text_rope_pos": TensorSpec((s["text_len"],), torch.int64),
        "scale_factor": _ConstantSpec((1, 2, 2) if between else (1, 3.16, 3.16)),
    }
