"""Qwen3 text encoders (transformers ``models/qwen3/modeling_qwen3.py``): ``Qwen3Model`` and
``Qwen3ForCausalLM``; Z-Image's text encoder (Qwen3-4B).

``ZImagePipeline._encode_prompt`` calls the model with ``output_hidden_states=True`` and keeps
``hidden_states[-2]`` (the second-to-last layer's output): every layer still runs, and so does the
final ``norm``, so all of them are counted. The pipeline loads ``Qwen3Model`` (its
``model_index.json`` class) from a ``Qwen3ForCausalLM`` checkpoint: no ``lm_head``. A
``Qwen3ForCausalLM`` built as such (a bare config) applies ``lm_head`` to every position
(``logits_to_keep=0``): that vocabulary projection counts, its weight shared with the token
embedding when ``tie_word_embeddings``.

Per layer (``Qwen3DecoderLayer``): ``input_layernorm``, ``self_attn`` (grouped-query, head width
``head_dim`` independent of ``hidden_size``, biases when ``attention_bias``, per-head ``q_norm`` and
``k_norm`` RMSNorms; sliding-window layers mask the dense scores), ``post_attention_layernorm``,
``mlp`` (``down(silu(gate(x)) · up(x))``, no biases). Block formulas:
:mod:`flopcalc.formulas.decoder_layer`.
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.architectures.llm_encoders import GEMMA_KAPLAN, decoder_model
from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, Config, boolean, declare_keys, positive_int
from flopcalc.engine.cost import Node
from flopcalc.formulas.decoder_layer import lm_head
from flopcalc.engine.loading import loading_rules, rotary_buffers
from flopcalc.engine.registry import RunShape, register

#: Kaplan's shape: Gemma's (queries of ``num_attention_heads · head_dim``, a width independent of
#: ``hidden_size``; the token embedding left out of N), and ``Qwen3ForCausalLM``'s ``lm_head`` (the
#: un-embedding) left out too.
QWEN3_KAPLAN = GEMMA_KAPLAN
QWEN3_CAUSAL_LM_KAPLAN = replace(GEMMA_KAPLAN, embeddings=("embed_tokens", "lm_head"))

#: ``Qwen3Config`` defaults (transformers ``models/qwen3/configuration_qwen3.py``).
DEFAULTS = {
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 22016,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "head_dim": 128,
    "attention_bias": False,
    "tie_word_embeddings": False,
}


#: Every config key ``Qwen3Model`` and ``Qwen3ForCausalLM`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys(("Qwen3Model", "Qwen3ForCausalLM"), {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE | NULL, "head_dim": SIZE, "attention_bias": FLAG,
    "tie_word_embeddings": FLAG,
})


@register("Qwen3Model", role="text_encoder", defaults=DEFAULTS, source="transformers/models/qwen3/modeling_qwen3.py",
          kaplan=QWEN3_KAPLAN)
def qwen3_model(config: Config, shape: RunShape) -> Node:
    """``Qwen3Model`` on ``seq_len`` tokens (the padded prompt: the mask never saves work)."""
    return decoder_model(config, shape.seq_len, qk_norm=True, formula="qwen3_model")


@register("Qwen3ForCausalLM", role="text_encoder", defaults=DEFAULTS,
          source="transformers/models/qwen3/modeling_qwen3.py", kaplan=QWEN3_CAUSAL_LM_KAPLAN)
def qwen3_for_causal_lm(config: Config, shape: RunShape) -> Node:
    """``Qwen3ForCausalLM``: ``model`` (a :func:`qwen3_model`) and ``lm_head`` on every token."""
    n = shape.seq_len
    d, vocab = positive_int(config, "hidden_size"), positive_int(config, "vocab_size")
    head = lm_head(n, d, vocab, tied=boolean(config, "tie_word_embeddings"))
    model = replace(qwen3_model(config, shape), name="model")
    return Node("text_encoder", children=(model, head), formula="qwen3_for_causal_lm")


# modeling_qwen3.py Qwen3RotaryEmbedding: non-persistent float32 inv_freq / original_inv_freq (head_dim / 2 each)
loading_rules("Qwen3Model", buffers=lambda c: rotary_buffers("rotary_emb", positive_int(c, "head_dim")),
              source="transformers/models/qwen3/modeling_qwen3.py")
# lm_head holds the last parameter: transformers' get_keys_to_not_convert keeps it out of a quantizer
loading_rules("Qwen3ForCausalLM", buffers=lambda c: rotary_buffers("model.rotary_emb", positive_int(c, "head_dim")),
              not_quantized=("lm_head",),
              source="transformers/models/qwen3/modeling_qwen3.py")
