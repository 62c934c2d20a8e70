"""``LlamaModel`` (transformers ``models/llama/modeling_llama.py``): HunyuanVideo's text encoder
(the text tower of llava-llama-3-8b); ``LlamaForCausalLM``: HiDream-I1's ``text_encoder_4``
(Llama-3.1-8B-Instruct).

``HunyuanVideoPipeline._get_llama_prompt_embeds`` calls the whole model with
``output_hidden_states=True`` and keeps ``hidden_states[-(num_hidden_layers_to_skip + 1)]`` (the
output of the third-to-last layer, the skip being 2): every layer still runs, and so does the
final ``norm`` (on the last hidden state), so all of them are counted. ``LlamaModel`` has no
``lm_head``.

Per layer (``LlamaDecoderLayer``): ``input_layernorm`` (RMSNorm), ``self_attn`` (grouped-query:
``q_proj``/``o_proj`` h·d_h wide, ``k_proj``/``v_proj`` h_kv·d_h, biases when ``attention_bias``;
the causal mask is dense), ``post_attention_layernorm``, ``mlp`` (``down(silu(gate(x)) · up(x))``,
biases when ``mlp_bias``). Block formulas: :mod:`flopcalc.formulas.decoder_layer`. The rotary
tables (``position_ids[..., None] * inv_freq``) are a broadcast product: no counted work.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from flopcalc.engine.config import FLAG, LAYERS, NULL, POSITIONS, SIZE, Config, boolean, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import (
    gated_mlp,
    gqa_self_attention,
    lm_head,
    rotary_embedding,
)
from flopcalc.engine.registry import KaplanShape, RunShape, register

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("decoder_layer")
from flopcalc.engine.loading import loading_rules, rotary_buffers

#: ``LlamaConfig`` defaults (transformers ``models/llama/configuration_llama.py``).
DEFAULTS = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": None,
    "head_dim": None,
    "attention_bias": False,
    "mlp_bias": False,
}


@lru_cache(maxsize=256)
def llama_decoder_layer(*, tokens: Any, dim: int, heads: int, kv_heads: int, head_dim: int, d_ff: int,
                        attention_bias: bool, mlp_bias: bool) -> Node:
    r"""``LlamaDecoderLayer``: :math:`n d d_h (2h + 2h_{kv}) + 2 h n^2 d_h + 3 n d d_f` MACs."""
    norm = ops.rms_norm(tokens, dim)
    return Node("layer", children=(
        Node("input_layernorm", norm),
        gqa_self_attention("self_attn", tokens=tokens, dim=dim, heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                           qkv_bias=attention_bias, out_bias=attention_bias),
        Node("post_attention_layernorm", norm),
        gated_mlp("mlp", tokens, dim, d_ff, bias=mlp_bias),
    ), formula="decoder_layer")


def _heads(config: Config) -> tuple[int, int, int]:
    """(query heads, key/value heads, head width): ``num_key_value_heads`` None means one per query
    head; ``head_dim`` None means ``hidden_size // num_attention_heads`` (``LlamaAttention``)."""
    heads = positive_int(config, "num_attention_heads")
    kv = heads if config["num_key_value_heads"] is None else positive_int(config, "num_key_value_heads")
    if heads % kv:
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} is not a multiple of "
                          f"num_key_value_heads {kv}")
    head_dim = config["head_dim"]
    if head_dim is None:
        dim = positive_int(config, "hidden_size")
        if dim % heads:
            raise ConfigError(f"{config.component}/config.json: hidden_size {dim} is not a multiple of "
                              f"num_attention_heads {heads} (and head_dim is not set)")
        head_dim = dim // heads
    else:
        head_dim = positive_int(config, "head_dim")
    return heads, kv, head_dim


#: Every config key ``LlamaModel`` and ``LlamaForCausalLM`` read (assemblers and pipeline plans), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys(("LlamaModel", "LlamaForCausalLM"), {
    "hidden_size": SIZE, "intermediate_size": SIZE, "num_attention_heads": SIZE,
    "num_key_value_heads": SIZE | NULL, "head_dim": SIZE | NULL, "num_hidden_layers": LAYERS,
    "vocab_size": SIZE, "attention_bias": FLAG, "mlp_bias": FLAG, "tie_word_embeddings": FLAG,
    "max_position_embeddings": POSITIONS,
})


def _kaplan_layers(config: Config) -> tuple[int, int]:
    heads, _, head_dim = _heads(config)
    return count_int(config, "num_hidden_layers"), heads * head_dim


@register("LlamaModel", role="text_encoder", defaults=DEFAULTS, source="transformers/models/llama/modeling_llama.py",
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens",)))
def llama_model(config: Config, shape: RunShape) -> Node:
    """``embed_tokens`` (a lookup), ``num_hidden_layers`` decoder layers, ``norm``, ``rotary_emb``."""
    n = shape.seq_len
    d = positive_int(config, "hidden_size")
    heads, kv, head_dim = _heads(config)
    layer = llama_decoder_layer(tokens=n, dim=d, heads=heads, kv_heads=kv, head_dim=head_dim,
                                d_ff=positive_int(config, "intermediate_size"),
                                attention_bias=boolean(config, "attention_bias"), mlp_bias=boolean(config, "mlp_bias"))
    return Node("text_encoder", children=(
        Node("embed_tokens", ops.embedding(positive_int(config, "vocab_size"), d)),
        module_list("layers", [layer] * count_int(config, "num_hidden_layers")),
        Node("norm", ops.rms_norm(n, d)),
        rotary_embedding("rotary_emb", n, head_dim),
    ), formula="llama_model")


loading_rules("LlamaModel", buffers=lambda c: rotary_buffers("rotary_emb", _heads(c)[2]),
              source="transformers/models/llama/modeling_llama.py (LlamaRotaryEmbedding)")


@register("LlamaForCausalLM", role="text_encoder", defaults={**DEFAULTS, "tie_word_embeddings": False},
          source="transformers/models/llama/modeling_llama.py",
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "lm_head")))
def llama_for_causal_lm(config: Config, shape: RunShape) -> Node:
    """``LlamaForCausalLM``: ``model`` (a :func:`llama_model`) and ``lm_head`` d → vocabulary on every token
    (``forward``'s ``logits_to_keep=0`` keeps them all: HiDream's ``_get_llama3_prompt_embeds`` reads only the
    hidden states, but the logits are computed), its weight the token embedding's when ``tie_word_embeddings``.
    ``output_attentions=True`` (HiDream passes it) returns the attention maps: the same two matmuls."""
    n = shape.seq_len
    d, vocab = positive_int(config, "hidden_size"), positive_int(config, "vocab_size")
    head = lm_head(n, d, vocab, tied=boolean(config, "tie_word_embeddings"))
    model = replace(llama_model(config, shape), name="model")
    return Node("text_encoder", children=(model, head), formula="llama_for_causal_lm")


# lm_head holds the last parameter: transformers' get_keys_to_not_convert keeps it out of a quantizer
loading_rules("LlamaForCausalLM", buffers=lambda c: rotary_buffers("model.rotary_emb", _heads(c)[2]),
              not_quantized=("lm_head",), source="transformers/models/llama/modeling_llama.py (LlamaRotaryEmbedding)")
