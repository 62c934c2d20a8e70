"""SmolLM3 text encoder (transformers ``models/smollm3/modeling_smollm3.py``): ``SmolLM3ForCausalLM``, BRIA FIBO's
text encoder (SmolLM3-3B).

A Llama-layout decoder: per layer (``SmolLM3DecoderLayer``) an RMS-normed grouped-query self-attention
(``q_proj``/``o_proj`` h·d_h wide, ``k_proj``/``v_proj`` h_kv·d_h, biases when ``attention_bias``; head width
``hidden_size / num_attention_heads``) and an RMS-normed gated MLP (biases when ``mlp_bias``). Every fourth layer
skips the rotary embedding (``no_rope_layers``) and some may use a sliding window: both change values, not the
dense matmuls. The layer formula is Llama's (:func:`flopcalc.engine.architectures.llama.llama_decoder_layer`).
``BriaFiboPipeline.get_prompt_embeds`` calls ``SmolLM3ForCausalLM`` with ``output_hidden_states=True`` and reads
every layer's output; ``forward`` still applies ``lm_head`` to every position (``logits_to_keep=0``): counted,
its weight the token embedding's when ``tie_word_embeddings`` (SmolLM3's default).
"""

from __future__ import annotations

from dataclasses import replace

from flopcalc.engine.architectures.llama import llama_decoder_layer
from flopcalc.engine.config import FLAG, LAYERS, NULL, SIZE, Config, Int, boolean, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.loading import loading_rules, rotary_buffers
from flopcalc.engine.registry import KaplanShape, RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import lm_head, rotary_embedding

SOURCE = "transformers/models/smollm3/modeling_smollm3.py"

#: ``SmolLM3Config`` defaults (configuration_smollm3.py: SmolLM3-3B).
DEFAULTS = {
    "vocab_size": 128256,
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": True,
    "pad_token_id": 128004,
}

declare_keys("SmolLM3ForCausalLM", {
    "vocab_size": SIZE, "hidden_size": SIZE, "intermediate_size": SIZE, "num_hidden_layers": LAYERS,
    "num_attention_heads": SIZE, "num_key_value_heads": SIZE, "attention_bias": FLAG, "mlp_bias": FLAG,
    "tie_word_embeddings": FLAG, "pad_token_id": Int(-(2**31), 2**31) | NULL,
})


def _heads(config: Config) -> tuple[int, int, int]:
    """(query heads, key/value heads, head width ``hidden_size // num_attention_heads``)."""
    d, heads, kv = (positive_int(config, k) for k in ("hidden_size", "num_attention_heads", "num_key_value_heads"))
    if heads % kv:
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} is not a multiple of "
                          f"num_key_value_heads {kv}")
    return heads, kv, d // heads


def _kaplan_layers(config: Config) -> tuple[int, int]:
    heads, _, head_dim = _heads(config)
    return count_int(config, "num_hidden_layers"), heads * head_dim


def smollm3_model(config: Config, shape: RunShape) -> Node:
    """``SmolLM3Model``: ``embed_tokens`` (a lookup), ``num_hidden_layers`` decoder layers, ``norm``, ``rotary_emb`` on ``seq_len``."""
    n, d = shape.seq_len, positive_int(config, "hidden_size")
    pad, vocab = config["pad_token_id"], positive_int(config, "vocab_size")
    if pad is not None and not -vocab <= pad < vocab:
        raise ConfigError(f"{config.component}/config.json: pad_token_id {pad} must index the {vocab}-entry embed_tokens "
                          "(nn.Embedding refuses it otherwise)")
    heads, kv, head_dim = _heads(config)
    layer = llama_decoder_layer(tokens=n, dim=d, heads=heads, kv_heads=kv, head_dim=head_dim,
                                d_ff=positive_int(config, "intermediate_size"),
                                attention_bias=boolean(config, "attention_bias"), mlp_bias=boolean(config, "mlp_bias"))
    return Node("text_encoder", children=(
        Node("embed_tokens", ops.embedding(positive_int(config, "vocab_size"), d)),
        module_list("layers", [layer] * count_int(config, "num_hidden_layers")),
        Node("norm", ops.rms_norm(n, d)),
        rotary_embedding("rotary_emb", n, head_dim),
    ), formula="smollm3_model")


@register("SmolLM3ForCausalLM", role="text_encoder", defaults=DEFAULTS, source=SOURCE,
          kaplan=KaplanShape(_kaplan_layers, embeddings=("embed_tokens", "lm_head")))
def smollm3_for_causal_lm(config: Config, shape: RunShape) -> Node:
    """``model`` (a :func:`smollm3_model`) and ``lm_head`` (d → vocabulary, bias-free) on every token."""
    n = shape.seq_len
    d, vocab = positive_int(config, "hidden_size"), positive_int(config, "vocab_size")
    head = lm_head(n, d, vocab, tied=boolean(config, "tie_word_embeddings"))
    model = replace(smollm3_model(config, shape), name="model")
    return Node("text_encoder", children=(model, head), formula="smollm3_for_causal_lm")


# lm_head holds the last parameter: transformers' get_keys_to_not_convert keeps it out of a quantizer
loading_rules("SmolLM3ForCausalLM", buffers=lambda c: rotary_buffers("model.rotary_emb", _heads(c)[2]),
              not_quantized=("lm_head",), source=SOURCE)
