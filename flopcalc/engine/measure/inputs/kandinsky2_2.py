"""Input builders for Kandinsky 2.2 (``KandinskyV22PriorPipeline``): the ``PriorTransformer``. The
decoder's ``UNet2DConditionModel`` (image embeddings) is built by the UNet builder in the harness, the
MoVQ by the Kandinsky 3 one. Imported by ``flopcalc.engine.measure.harness``."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _f32, input_builder


@input_builder("PriorTransformer", settings=("seq_len",), optional=("text_mask",))
def _prior_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, TensorSpec | None]:
    """hidden_states (1, embedding_dim), timestep (1,), proj_embedding (1, embedding_proj_dim),
    encoder_hidden_states (1, num_embeddings, embedding_dim), as ``KandinskyV22PriorPipeline``
    passes them (``text_embeds`` and ``last_hidden_state`` of the 77-token CLIP text encoder); no
    ``attention_mask`` (the pipeline's text mask and the causal mask change no dense count), unless
    ``text_mask`` is 1: then the prompt's boolean mask (1, num_embeddings), as the pipeline passes it
    (pipeline_kandinsky2_2_prior.py:492-498), which the prior turns into a per-head additive mask with its causal
    one (prior_transformer.py:290-297): tensors an activation peak holds.
    ``seq_len`` is the text length, which must be ``num_embeddings`` (77: what the pipeline passes)."""
    e = _cfg(model, "embedding_dim")
    if s["seq_len"] != _cfg(model, "num_embeddings"):
        raise ValueError(f"PriorTransformer is fed num_embeddings={_cfg(model, 'num_embeddings')} text states, "
                         f"got seq_len={s['seq_len']}")
    return {
        "hidden_states": _f32(1, e),
        "timestep": _f32(1),
        "proj_embedding": _f32(1, _cfg(model, "embedding_proj_dim") or e),
        "encoder_hidden_states": _f32(1, _cfg(model, "num_embeddings"), e),
        "attention_mask": TensorSpec((1, _cfg(model, "num_embeddings")), torch.bool) if s.get("text_mask") else None,
    }
