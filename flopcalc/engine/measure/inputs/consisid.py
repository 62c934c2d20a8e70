"""Input builder for ``ConsisIDTransformer3DModel`` (imported by ``flopcalc.engine.measure.harness``; see
validation/README.md). Its VAE (``AutoencoderKLCogVideoX``) and T5 text encoder use the CogVideoX builders.

Shapes as ``ConsisIDPipeline`` (diffusers ``pipelines/consisid/pipeline_consisid.py``, :906-915) calls it at batch 1:
CogVideoX's inputs (``flopcalc/engine/measure/inputs/cogvideox.py``: the ``(1, T, in_channels, H/8, W/8)`` latent
with the image latent on channels, the T5 states, the rotary tables the pipeline computes) and, when
``is_train_face``, the face: ``id_cond`` (1, ``LFE_id_dim``) and ``id_vit_hidden``, ``LFE_num_scale`` ViT hidden
states of (1, ``image_tokens``, ``LFE_vit_dim``) (577 tokens by default: the EVA-CLIP ViT-L/14 at 336 px). Setting
``rows`` 2: the pipeline's call under classifier-free guidance, the latent, text and timestep doubled and the one face
shared (the face modules run once per call).

What needed help: ``id_vit_hidden`` is a list, passed as a constant of meta tensors; the rotary tables too (a list of
the pipeline's (cos, sin), which the attention unpacks as it does the tuple), so that the fixture records both by
shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, input_builder

FACE_VIT_TOKENS = 577


class _TensorList(list):
    """A constant list of meta tensors the harness passes as is and records by its ``shape`` and, as its ``dtype``,
    what it is: ``id_vit_hidden``, and the (cos, sin) rotary tables (the CogVideoX builder's tuple, as a list: the
    attention unpacks either alike)."""

    shape: tuple[int, ...]
    dtype: str

    def __init__(self, tensors: list[torch.Tensor], what: str) -> None:
        super().__init__(tensors)
        self.shape = (len(tensors), *tensors[0].shape)
        self.dtype = what


class _CogVideoXView:
    """The model with the CogVideoX keys ConsisID does not take (``patch_size_t``, ``ofs_embed_dim``) read as absent,
    for the shared CogVideoX builder."""

    def __init__(self, model: nn.Module) -> None:
        from diffusers.configuration_utils import FrozenDict

        self.config = FrozenDict({**dict(model.config), "patch_size_t": None, "ofs_embed_dim": None})


@input_builder("ConsisIDTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("image_tokens", "rows"))
def _consisid_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """CogVideoX's inputs and, with ``is_train_face``, id_cond and the list id_vit_hidden (module doc)."""
    from flopcalc.engine.measure.inputs.cogvideox import _cogvideox_transformer_inputs

    inputs = _cogvideox_transformer_inputs(_CogVideoXView(model), call, s)
    rows = int(s.get("rows", 1))
    if rows > 1:  # the pipeline's CFG-doubled call: every row its own latent, text and timestep, one face
        for key in ("hidden_states", "encoder_hidden_states", "timestep"):
            inputs[key] = TensorSpec((rows, *inputs[key].shape[1:]))
    if "image_rotary_emb" in inputs:
        rotary = inputs["image_rotary_emb"]
        inputs["image_rotary_emb"] = _TensorList(list(rotary), rotary.dtype)
    if _cfg(model, "is_train_face"):
        tokens = int(s.get("image_tokens", FACE_VIT_TOKENS))
        inputs["id_cond"] = TensorSpec((1, _cfg(model, "LFE_id_dim")))
        inputs["id_vit_hidden"] = _TensorList([torch.empty(1, tokens, _cfg(model, "LFE_vit_dim"), device="meta")
                                               for _ in range(_cfg(model, "LFE_num_scale"))],
                                              "list of the face ViT's hidden states (meta tensors, a wrapper constant)")
    return inputs
