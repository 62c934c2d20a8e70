"""Input builders for the Bria family (imported by ``flopcalc.engine.measure.harness``; see validation/README.md):
``BriaTransformer2DModel``, ``BriaFiboTransformer2DModel`` and FIBO's SmolLM3 text encoder. Nothing needs help on
meta: the rotary tables (``BriaEmbedND``, ``BriaFiboEmbedND``) are computed from the position ids the pipelines
pass, with no matmul. BRIA 3.x's VAE is an ``AutoencoderKL`` and its text encoder a ``T5EncoderModel`` (the
harness's own builders); FIBO's VAE is an ``AutoencoderKLWan`` (``wan.py``'s builder); SmolLM3 gets the SDPA
text-encoder inputs (token ids, no mask; ``text_encoders.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, input_builder
from flopcalc.engine.measure.inputs.qwen_image import _PythonConstant
from flopcalc.engine.measure.inputs.text_encoders import _sdpa_text_inputs

#: ``BriaPipeline``: latents of H/8 × W/8 packed 2×2 (16 pixels per token side).
TOKEN_SIDE = 16


@input_builder("BriaTransformer2DModel", settings=("height", "width", "text_len"))
def _bria_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """As ``BriaPipeline.__call__`` feeds one row (pipeline_bria.py:682-690): hidden_states (1, (H/16)(W/16),
    in_channels), the packed latent; timestep (1,); encoder_hidden_states (1, text_len, joint_attention_dim);
    txt_ids (text_len, 3) and img_ids ((H/16)(W/16), 3), 2-D as the pipeline passes them."""
    tokens = _exact_div(s["height"], TOKEN_SIDE, "height") * _exact_div(s["width"], TOKEN_SIDE, "width")
    return {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "txt_ids": _f32(s["text_len"], 3),
        "img_ids": _f32(tokens, 3),
    }


@input_builder("BriaFiboTransformer2DModel", settings=("height", "width", "text_len"))
def _bria_fibo_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``BriaFiboPipeline.__call__`` feeds one row (pipeline_bria_fibo.py, denoising loop, ``do_patching`` off):
    hidden_states (1, (H/16)(W/16), in_channels), one token per latent pixel of the ×16 VAE; timestep (1,);
    encoder_hidden_states (1, text_len, joint_attention_dim); text_encoder_layers, a python list of one
    (1, text_len, text_encoder_dim) tensor per block; txt_ids (text_len, 3), img_ids ((H/16)(W/16), 3). No mask
    (every text token valid)."""
    tokens = _exact_div(s["height"], TOKEN_SIDE, "height") * _exact_div(s["width"], TOKEN_SIDE, "width")
    blocks = _cfg(model, "num_layers") + _cfg(model, "num_single_layers")
    layer = (1, s["text_len"], _cfg(model, "text_encoder_dim"))
    return {
        "hidden_states": _f32(1, tokens, _cfg(model, "in_channels")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, s["text_len"], _cfg(model, "joint_attention_dim")),
        "text_encoder_layers": _PythonConstant([torch.zeros(layer, device="meta") for _ in range(blocks)],
                                               (blocks, *layer), "python list of one text-encoder layer per block "
                                               "(a wrapper constant, not a thop input)"),
        "txt_ids": _f32(s["text_len"], 3),
        "img_ids": _f32(tokens, 3),
    }


input_builder("SmolLM3ForCausalLM", settings=("seq_len",))(_sdpa_text_inputs)
