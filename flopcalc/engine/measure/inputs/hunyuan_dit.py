"""Harness inputs for HunyuanDiT (diffusers ``HunyuanDiT2DModel``), as ``HunyuanDiTPipeline``
feeds them (``pipelines/hunyuandit/pipeline_hunyuandit.py``, ``__call__`` steps 3, 7 and 8).

The rotary embedding is computed by the pipeline, not by the model: this builder calls the
pipeline's own helpers (``get_resize_crop_region_for_grid`` from the pipeline module and
``get_2d_rotary_pos_embed`` from ``models/embeddings.py``, with the same arguments as step 7) on
CPU and moves the result to meta. The pipeline passes ``(cos, sin)`` as a tuple; the harness
passes tensors only, so the pair is stacked into one ``(2, N, head_dim)`` tensor, which
``apply_rotary_emb`` unpacks identically (``cos, sin = freqs_cis`` iterates the first axis).
Both are parameter-free and elementwise: nothing they do is counted.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div, _f32, _ids, input_builder

#: How image_rotary_emb was made, for the fixture's ``method`` (the harness has no hook for a
#: builder's note yet: attached to the builder as ``method_note`` for the harness to append).
METHOD_NOTE = (
    "image_rotary_emb as HunyuanDiTPipeline.__call__ step 7 computes it: get_2d_rotary_pos_embed(head_dim, "
    "get_resize_crop_region_for_grid((H/8/p, W/8/p), 512/8/p), (H/8/p, W/8/p), output_type='pt') on CPU (the "
    "pipeline's own helpers), the (cos, sin) pair stacked into one (2, N, head_dim) tensor (apply_rotary_emb "
    "unpacks it the same way) and moved to meta; parameter-free and elementwise, nothing in it is counted."
)

#: The pipeline hard-codes the latent factor 8 and a 512-pixel base size for the rotary grid (step 7).
_PIPELINE_VAE_FACTOR = 8
_PIPELINE_BASE_SIZE = 512


def hunyuan_rotary_emb(model: nn.Module, height: int, width: int) -> torch.Tensor:
    """``image_rotary_emb`` of ``HunyuanDiTPipeline.__call__`` step 7, computed on CPU by the
    pipeline's own helpers, stacked ``(cos, sin)`` and moved to meta."""
    from diffusers.models.embeddings import get_2d_rotary_pos_embed
    from diffusers.pipelines.hunyuandit.pipeline_hunyuandit import (
        get_resize_crop_region_for_grid,
    )

    patch = _cfg(model, "patch_size")
    grid_height = height // _PIPELINE_VAE_FACTOR // patch
    grid_width = width // _PIPELINE_VAE_FACTOR // patch
    base_size = _PIPELINE_BASE_SIZE // _PIPELINE_VAE_FACTOR // patch
    crops = get_resize_crop_region_for_grid((grid_height, grid_width), base_size)
    cos, sin = get_2d_rotary_pos_embed(model.inner_dim // model.num_heads, crops, (grid_height, grid_width),
                                       device="cpu", output_type="pt")
    return torch.stack([cos, sin]).to("meta")


@input_builder("HunyuanDiT2DModel", settings=("height", "width", "text_len"), optional=("pag",))
def _hunyuan_dit_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | torch.Tensor]:
    """hidden_states (1, C, H/8, W/8), timestep (1,), the BERT states (1, text_len − text_len_t5,
    cross_attention_dim) and mT5 states (1, text_len_t5, cross_attention_dim_t5) with their int64
    attention masks, image_meta_size (1, 6) and style (1,) int64 (the pipeline passes both for
    every version; v1.2 ignores them), and image_rotary_emb (see the module docstring).
    ``text_len`` is the BERT ⊕ mT5 total the blocks attend to; the model accepts exactly
    ``text_len + text_len_t5`` of its config (77 + 256)."""
    t5_len = _cfg(model, "text_len_t5")
    expected = _cfg(model, "text_len") + t5_len
    if s["text_len"] != expected:
        raise ValueError(f"HunyuanDiT2DModel takes text_len + text_len_t5 = {expected} text tokens, not {s['text_len']}")
    bert_len = s["text_len"] - t5_len
    inputs = {
        "hidden_states": _f32(1, _cfg(model, "in_channels"), _exact_div(s["height"], _PIPELINE_VAE_FACTOR, "height"),
                              _exact_div(s["width"], _PIPELINE_VAE_FACTOR, "width")),
        "timestep": _f32(1),
        "encoder_hidden_states": _f32(1, bert_len, _cfg(model, "cross_attention_dim")),
        "text_embedding_mask": _ids(1, bert_len),
        "encoder_hidden_states_t5": _f32(1, t5_len, _cfg(model, "cross_attention_dim_t5")),
        "text_embedding_mask_t5": _ids(1, t5_len),
        "image_meta_size": _f32(1, 6),
        "style": _ids(1),
        "image_rotary_emb": hunyuan_rotary_emb(model, s["height"], s["width"]),
    }
    if s.get("pag"):  # perturbed-attention guidance (HunyuanDiTPAGPipeline): its processors and batch
        from flopcalc.engine.measure.perturbed import perturb

        return perturb(model, s["pag"], inputs, unbatched=("image_rotary_emb",))
    return inputs


_hunyuan_dit_inputs.method_note = METHOD_NOTE  # type: ignore[attr-defined]
