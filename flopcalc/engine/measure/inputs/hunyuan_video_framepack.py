"""Input builder for ``HunyuanVideoFramepackTransformer3DModel`` (FramePack; its text encoders, VAE and SigLIP image
encoder use the existing builders).

Shapes as ``HunyuanVideoFramepackPipeline`` (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video_framepack.py``,
:940-956) feeds it at batch 1: the window's latent, the clean latents (the image's and one history frame), the 2× and
4× history (2 and 16 frames), each with its frame indices, the prompt's Llama states and mask, the pooled CLIP
embedding, the SigLIP image tokens and the guidance.

One thing needs help on meta. At batch 1 ``forward`` cuts the context to the mask's length
(``encoder_hidden_states[:, : effective_condition_sequence_length[0]]``, transformer_hunyuan_video_framepack.py:328-337):
a slice by a tensor's value, which a meta tensor cannot give. The mask is passed as a :class:`KnownOnes`: a meta
tensor known to be all ones (a prompt filling its tokens), which stays known through ``new_ones`` and ``torch.cat``
(the image tokens' mask is joined to it) and answers ``sum(dim=1)`` with its true value; every other operation sees
the plain meta tensor. The model is not patched, and the cut holds no matmul.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder

#: HunyuanVideo's VAE factors, which the pipeline reads.
SPATIAL, TEMPORAL = 8, 4
#: The history the pipeline packs (pipeline_hunyuan_video_framepack.py:869-906).
CLEAN_FRAMES, HISTORY_2X_FRAMES, HISTORY_4X_FRAMES = 2, 2, 16


class KnownOnes(torch.Tensor):
    """A meta mask known to be all ones (see the module doc)."""

    @staticmethod
    def of(tensor: torch.Tensor) -> "KnownOnes":
        return tensor.as_subclass(KnownOnes)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        plain = [_plain(a) for a in args]
        with torch._C.DisableTorchFunctionSubclass():
            if func is torch.Tensor.new_ones:
                return KnownOnes.of(func(*plain, **kwargs))
            if func is torch.cat and all(isinstance(t, KnownOnes) for t in args[0]):
                return KnownOnes.of(torch.cat([_plain(t) for t in args[0]], *args[1:], **kwargs))
            if func is torch.Tensor.sum and isinstance(args[0], KnownOnes):
                dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
                shape = list(args[0].shape)
                count = shape.pop(dim) if dim is not None else args[0].numel()
                return torch.full(shape, count, dtype=kwargs.get("dtype") or torch.int64)
            return func(*plain, **{k: _plain(v) for k, v in kwargs.items()})


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value.as_subclass(torch.Tensor) if isinstance(value, KnownOnes) else value


@dataclass(frozen=True)
class KnownOnesSpec(TensorSpec):
    """A mask input made as a :class:`KnownOnes`."""

    def make(self) -> torch.Tensor:  # type: ignore[override]
        return KnownOnes.of(super().make())


@input_builder("HunyuanVideoFramepackTransformer3DModel", settings=("height", "width", "text_len", "image_tokens"),
               optional=("num_frames", "latent_window_size"))
def _framepack_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """hidden_states (1, C, T_w, H/8, W/8) with T_w = (num_frames − 1) // 4 + 1 (``num_frames``: the section's
    frames, 33 for the default window of 9) or T_w = ``latent_window_size`` (the pipeline's argument, whatever the
    video's length: each section's latent is prepared at window_num_frames = (latent_window_size − 1)·4 + 1 frames,
    pipeline_hunyuan_video_framepack.py:817, 921-926), timestep (1,), encoder_hidden_states (1, text_len,
    text_embed_dim) with its mask (1, text_len) (all ones: :class:`KnownOnes`), pooled_projections (1,
    pooled_projection_dim),
    image_embeds (1, image_tokens, image_proj_dim), guidance (1,), latents_clean (1, C, 2, H/8, W/8),
    latents_history_2x (1, C, 2, ...) and latents_history_4x (1, C, 16, ...), and the frame indices of each (int64,
    as the pipeline's ``indices.split``)."""
    h, w = _div(s["height"], SPATIAL, "height"), _div(s["width"], SPATIAL, "width")
    if "latent_window_size" in s:
        frames = int(s["latent_window_size"])
    elif "num_frames" in s:
        frames = (s["num_frames"] - 1) // TEMPORAL + 1
    else:
        raise ValueError("give num_frames (the section's frames) or latent_window_size")
    c, t = _cfg(model, "in_channels"), s["text_len"]
    return {
        "hidden_states": TensorSpec((1, c, frames, h, w)),
        "timestep": TensorSpec((1,)),
        "encoder_hidden_states": TensorSpec((1, t, _cfg(model, "text_embed_dim"))),
        "encoder_attention_mask": KnownOnesSpec((1, t)),
        "pooled_projections": TensorSpec((1, _cfg(model, "pooled_projection_dim"))),
        "image_embeds": TensorSpec((1, s["image_tokens"], _cfg(model, "image_proj_dim"))),
        "indices_latents": TensorSpec((frames,), torch.int64),
        "guidance": TensorSpec((1,)),
        "latents_clean": TensorSpec((1, c, CLEAN_FRAMES, h, w)),
        "indices_latents_clean": TensorSpec((CLEAN_FRAMES,), torch.int64),
        "latents_history_2x": TensorSpec((1, c, HISTORY_2X_FRAMES, h, w)),
        "indices_latents_history_2x": TensorSpec((HISTORY_2X_FRAMES,), torch.int64),
        "latents_history_4x": TensorSpec((1, c, HISTORY_4X_FRAMES, h, w)),
        "indices_latents_history_4x": TensorSpec((HISTORY_4X_FRAMES,), torch.int64),
    }


_framepack_transformer_inputs.method_note = (  # type: ignore[attr-defined]
    "The text mask is a meta tensor known to be all ones (KnownOnes: new_ones, torch.cat and sum(dim=1) answer from "
    "that knowledge), so forward's batch-1 cut of the context to the mask's length runs on meta; nothing is patched."
)
