"""Input and model builders for ``HiDreamImageTransformer2DModel`` (imported by
``flopcalc.engine.measure.harness``; see validation/README.md).

Settings are pipeline level: ``height``/``width`` in pixels (the latent is ``C × H/8 × W/8``, the FLUX VAE's
factor 8 that ``HiDreamImagePipeline`` reads; the model itself patchifies it, and pads a non-square latent
to ``max_seq`` tokens), ``text_len`` T5 tokens and ``text_len_2`` Llama tokens. The inputs are what
``HiDreamImagePipeline.__call__`` (pipeline_hidream_image.py:933-941) passes: the latent, one timestep,
the T5 hidden states ``(1, T, caption_channels[0])``, the stacked Llama hidden states
``(layers, 1, L, caption_channels[1])`` (``max(llama_layers) + 1`` layers: ``forward`` indexes them by
``llama_layers``) and the pooled CLIP embedding ``(1, text_emb_dim)``.

Help on meta: in eval, ``MOEFeedForwardSwiGLU.moe_infer`` (transformer_hidream_image.py:386-404) routes
with ``flat_expert_indices.bincount().cpu().numpy()``, data a meta tensor does not hold. The model
builder replaces each MoE layer's ``moe_infer`` by :func:`even_moe_infer`, the same computation with the
``k·n`` (token, expert) rows dealt out evenly over the experts instead of by the gate's choice. Each
expert is the same ``HiDreamImageFeedForwardSwiGLU``, so its matmuls are linear in the rows it gets, and
the experts' sum (``…ff_i.experts``), every other module and the total are the real routing's, whatever
the routing; only the split among ``experts.0 … experts.E-1`` differs, which no fixture records (module
depth 5 stops at ``experts``). ``unpatchify`` slices the output with the ``img_sizes`` tensor ``patchify``
made; :func:`sizes_as_ints` has ``patchify`` give them as Python ints (no matmul either way).
``tests/test_hidream_moe.py`` proves it: a tiny random config run on CPU
with real tensors and its own routing counts the same as the stand-in on meta, total and per module path.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder, model_builder
from flopcalc.engine.measure.inputs.hunyuan_video import _llama_inputs

#: ``HiDreamImagePipeline.vae_scale_factor`` with the FLUX VAE (``2 ** (len(block_out_channels) - 1)``).
VAE_SCALE = 8

STAND_IN_NOTE = (
    "MOEFeedForwardSwiGLU.moe_infer (bincount().cpu() routing, impossible on meta) is replaced on each MoE "
    "layer by flopcalc.engine.measure.inputs.hidream.even_moe_infer: the same expert calls with the k·n (token, "
    "expert) rows dealt out evenly over the experts; the experts' sum, every other module and the total "
    "equal any routing's (tests/test_hidream_moe.py runs the real routing on CPU against it)."
)


SIZES_NOTE = (
    "patchify is wrapped to return img_sizes as Python ints (the patch grid of the latent's shape), which "
    "unpatchify slices with (x[i, :pH*pW] needs the values; no matmul there)."
)


@torch.no_grad()
def even_moe_infer(self: nn.Module, x: torch.Tensor, flat_expert_indices: torch.Tensor,
                   flat_expert_weights: torch.Tensor) -> torch.Tensor:
    """``MOEFeedForwardSwiGLU.moe_infer`` with a fixed routing: row ``j`` of the ``k·n`` (token, expert)
    rows (token ``j // k``) goes to the expert whose even share of the rows holds ``j``. Same calls, same
    shapes in sum: ``expert(x[rows])``, ``mul_`` by the routing weights, ``scatter_reduce_`` into the
    output."""
    k = self.num_activated_experts
    experts = len(self.experts)
    rows = x.shape[0] * k
    expert_cache = torch.zeros_like(x)
    token_idxs = torch.arange(rows, device=x.device) // k
    start = 0
    for i, expert in enumerate(self.experts):
        end = start + rows // experts + (1 if i < rows % experts else 0)
        if start == end:
            continue
        exp_token_idx = token_idxs[start:end]
        expert_out = expert(x[exp_token_idx])
        expert_out.mul_(flat_expert_weights[start:end])
        expert_cache = expert_cache.to(expert_out.dtype)
        expert_cache.scatter_reduce_(0, exp_token_idx.view(-1, 1).repeat(1, x.shape[-1]), expert_out, reduce="sum")
        start = end
    return expert_cache


def use_even_routing(model: nn.Module) -> nn.Module:
    """Bind :func:`even_moe_infer` as ``moe_infer`` of every ``MOEFeedForwardSwiGLU`` in ``model``."""
    from diffusers.models.transformers.transformer_hidream_image import MOEFeedForwardSwiGLU

    for module in model.modules():
        if isinstance(module, MOEFeedForwardSwiGLU):
            module.moe_infer = types.MethodType(even_moe_infer, module)
    model._measure_notes = [*getattr(model, "_measure_notes", []), STAND_IN_NOTE]
    return model


def sizes_as_ints(model: nn.Module) -> nn.Module:
    """``patchify`` returning the patch grid as Python ints: ``unpatchify`` slices ``x[i, :pH·pW]`` with the
    ``img_sizes`` tensor ``patchify`` builds, which a meta tensor cannot give values for. Same grid, no matmul."""
    patchify = model.patchify
    p = model.config.patch_size

    def patchify_with_int_sizes(hidden_states: torch.Tensor):
        tokens, masks, _sizes, ids = patchify(hidden_states)
        batch, _channels, height, width = hidden_states.shape
        return tokens, masks, [(height // p, width // p)] * batch, ids

    model.patchify = patchify_with_int_sizes
    model._measure_notes = [*getattr(model, "_measure_notes", []), SIZES_NOTE]
    return model


@model_builder("HiDreamImageTransformer2DModel")
def _build_transformer(config_dir: Path) -> nn.Module:
    """The diffusers class from its config on meta, with :func:`use_even_routing`."""
    from diffusers import HiDreamImageTransformer2DModel

    config = HiDreamImageTransformer2DModel.load_config(str(config_dir))
    with torch.device("meta"):
        model = HiDreamImageTransformer2DModel.from_config(config)
    return sizes_as_ints(use_even_routing(model))


@input_builder("HiDreamImageTransformer2DModel", settings=("height", "width", "text_len", "text_len_2"))
def _transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec]:
    """The pipeline's transformer call at batch 1 (see the module doc)."""
    t5_dim, llama_dim = _cfg(model, "caption_channels")
    layers = max(_cfg(model, "llama_layers")) + 1
    return {
        "hidden_states": TensorSpec((1, _cfg(model, "in_channels"), _div(s["height"], VAE_SCALE, "height"),
                                     _div(s["width"], VAE_SCALE, "width"))),
        "timesteps": TensorSpec((1,)),
        "encoder_hidden_states_t5": TensorSpec((1, s["text_len"], t5_dim)),
        "encoder_hidden_states_llama3": TensorSpec((layers, 1, s["text_len_2"], llama_dim)),
        "pooled_embeds": TensorSpec((1, _cfg(model, "text_emb_dim"))),
    }


#: ``text_encoder_4`` (``LlamaForCausalLM``, Llama-3.1-8B-Instruct): token ids ``(1, seq_len)``; the pipeline's
#: padding mask and ``output_hidden_states`` / ``output_attentions`` (:309-314) change no counted matmul and are
#: left out, as for HunyuanVideo's ``LlamaModel`` (the SDPA mask preparation reads data on meta).
input_builder("LlamaForCausalLM", settings=("seq_len",))(_llama_inputs)
