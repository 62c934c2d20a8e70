"""ChatGLM text encoder: ``ChatGLMModel`` (ChatGLM3-6B), Kolors' text encoder.

The Hub config (``model_type: chatglm``, ``auto_map`` to THUDM's remote code) names a class that
transformers does not ship; diffusers vendors the modelling code as
``diffusers/pipelines/kolors/text_encoder.py`` (``ChatGLMConfig``, ``ChatGLMModel``), which is what
a ``["kolors", "ChatGLMModel"]`` entry of ``model_index.json`` loads and what is mirrored here.

``ChatGLMModel.forward``: ``embedding.word_embeddings`` (a lookup), ``rotary_pos_emb`` (the cos/sin
cache for all ``seq_length`` positions of the config, built on every call: elementwise only), then
``encoder`` (``GLMTransformer``: ``num_layers`` :func:`~flopcalc.formulas.chatglm.glm_block` layers and
``final_layernorm`` when ``post_layer_norm``). ``output_layer`` (the LM head, hidden → vocabulary,
bias-free) is built and holds parameters, but ``ChatGLMModel.forward`` never applies it.
"""

from __future__ import annotations

from flopcalc.engine.config import FLAG, LAYERS, NULL, POSITIONS, SIZE, Config, count_int, declare_keys, positive_int
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError, FlopcalcError, UnknownArchitectureError
from flopcalc.formulas import ops
from flopcalc.formulas.chatglm import glm_block
from flopcalc.formulas.decoder_layer import rotary_embedding
from flopcalc.engine.loading import Buffer, loading_rules
from flopcalc.engine.registry import KaplanShape, RunShape, register

#: ``ChatGLMConfig.__init__`` defaults (diffusers pipelines/kolors/text_encoder.py).
DEFAULTS = {
    "num_layers": 28, "padded_vocab_size": 65024, "hidden_size": 4096, "ffn_hidden_size": 13696,
    "kv_channels": 128, "num_attention_heads": 32, "seq_length": 2048, "rmsnorm": True, "post_layer_norm": True,
    "add_bias_linear": False, "add_qkv_bias": False, "multi_query_attention": False, "multi_query_group_num": 1,
    "pre_seq_len": None,
}


#: Kaplan's shape: ``num_layers`` layers, queries of ``num_attention_heads · kv_channels``; the token embedding
#: and the LM head (built, never run) are embeddings.
KAPLAN = KaplanShape(lambda c: (count_int(c, "num_layers"), positive_int(c, "num_attention_heads")
                                * positive_int(c, "kv_channels")), embeddings=("word_embeddings", "output_layer"))


#: Every config key ``ChatGLMModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.engine.config.declare_keys` validates it.
declare_keys("ChatGLMModel", {
    "num_layers": LAYERS, "padded_vocab_size": SIZE, "hidden_size": SIZE, "ffn_hidden_size": SIZE,
    "kv_channels": SIZE, "num_attention_heads": SIZE, "seq_length": POSITIONS, "rmsnorm": FLAG,
    "post_layer_norm": FLAG, "add_bias_linear": FLAG, "add_qkv_bias": FLAG, "multi_query_attention": FLAG,
    "multi_query_group_num": SIZE, "pre_seq_len": SIZE | NULL,
})


@register("ChatGLMModel", role="text_encoder", defaults=DEFAULTS, source="diffusers/pipelines/kolors/text_encoder.py",
          kaplan=KAPLAN)
def chatglm_model(config: Config, shape: RunShape) -> Node:
    """``ChatGLMModel`` on ``seq_len`` tokens (see the module doc)."""
    n = shape.seq_len
    if config["pre_seq_len"] is not None:
        raise UnknownArchitectureError(f"{config.component}: ChatGLMModel with a prefix encoder (pre_seq_len) "
                                       "is not supported yet.")
    d = positive_int(config, "hidden_size")
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "kv_channels")
    positions = positive_int(config, "seq_length")
    if isinstance(n, int) and n > positions:
        raise FlopcalcError(f"{config.component}: ChatGLMModel builds its rotary table for seq_length {positions} "
                            f"positions and cannot encode {n} tokens; use a max_sequence_length of at most "
                            f"{positions}.")
    rmsnorm = bool(config["rmsnorm"])
    layer = glm_block(tokens=n, dim=d, heads=heads, kv_groups=_kv_groups(config, heads), head_dim=head_dim,
                      d_ff=positive_int(config, "ffn_hidden_size"), qkv_bias=bool(config["add_qkv_bias"]),
                      linear_bias=bool(config["add_bias_linear"]), rmsnorm=rmsnorm)
    encoder: list[Node] = [module_list("layers", [layer] * count_int(config, "num_layers"))]
    if config["post_layer_norm"]:
        encoder.append(Node("final_layernorm", ops.rms_norm(n, d) if rmsnorm else ops.layer_norm(n, d)))
    vocab = positive_int(config, "padded_vocab_size")
    return Node("text_encoder", children=(
        Node("embedding", children=(Node("word_embeddings", ops.embedding(vocab, d)),)),
        # RotaryEmbedding(rotary_dim // 2): a cache of seq_length positions × rotary_dim // 4 frequencies
        rotary_embedding("rotary_pos_emb", positions, head_dim // 2),
        Node("encoder", children=tuple(encoder)),
        Node("output_layer", ops.linear(0, d, vocab, bias=False), formula="not run"),
    ), formula="chatglm_model")


def _kv_groups(config: Config, heads: int) -> int:
    """Key/value heads: ``multi_query_group_num`` under ``multi_query_attention``, else one per head."""
    if not config["multi_query_attention"]:
        return heads
    groups = positive_int(config, "multi_query_group_num")
    if heads % groups:
        raise ConfigError(f"{config.component}/config.json: num_attention_heads {heads} is not a multiple of "
                          f"multi_query_group_num {groups}")
    return groups


def _inv_freq(config: Config) -> tuple[Buffer]:
    """``rotary_pos_emb.inv_freq`` (text_encoder.py:681-682, 762-766): a persistent buffer (loaded in the weights'
    dtype) of ``len(range(0, rotary_dim // 2, 2))`` frequencies, ``rotary_dim`` = ``kv_channels``."""
    return (Buffer("rotary_pos_emb.inv_freq", (positive_int(config, "kv_channels") // 2 + 1) // 2, "loaded"),)


# output_layer holds the last parameter: transformers' get_keys_to_not_convert keeps it out of a quantizer
loading_rules("ChatGLMModel", buffers=_inv_freq, not_quantized=("output_layer",),
              source="diffusers/pipelines/kolors/text_encoder.py:681, 766")
