"""T5 encoder: ``T5EncoderModel`` (transformers ``models/t5/modeling_t5.py``).

``num_layers`` ``T5Block``s, each an RMS-normed (``T5LayerNorm``) self-attention with bias-free
projections of width ``num_heads·d_kv`` and an RMS-normed MLP, gated for ``gated-*``
``feed_forward_proj`` (T5 v1.1, FLAN). The relative position bias is an embedding lookup in the
first block. ``shared`` (the token embedding) is tied to ``encoder.embed_tokens``.
"""

from __future__ import annotations

from flopcalc.config import LAYERS, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp, self_attention
from flopcalc.registry import RunShape, register

#: ``T5Config`` defaults (transformers configuration_t5.py).
DEFAULTS = {
    "vocab_size": 32128,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "feed_forward_proj": "relu",
}


#: Every config key ``T5EncoderModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("T5EncoderModel", {
    "vocab_size": SIZE, "d_model": SIZE, "d_kv": SIZE, "d_ff": SIZE, "num_layers": LAYERS, "num_heads": SIZE,
    "relative_attention_num_buckets": SIZE, "feed_forward_proj": TEXT,
})


@register("T5EncoderModel", role="text_encoder", defaults=DEFAULTS, source="transformers/models/t5/modeling_t5.py")
def t5_encoder(config: Config, shape: RunShape) -> Node:
    n = shape.seq_len
    d = positive_int(config, "d_model")
    heads = positive_int(config, "num_heads")
    gated = str(config["feed_forward_proj"]).startswith("gated-")

    def block(first: bool) -> Node:
        attn = self_attention(n, d, heads, positive_int(config, "d_kv"), bias=False)
        if first:
            attn = attn + ops.embedding(positive_int(config, "relative_attention_num_buckets"), heads)
        return Node(
            "block",
            children=(
                Node("layer", children=(
                    Node("0", ops.rms_norm(n, d) + attn),
                    Node("1", ops.rms_norm(n, d) + mlp(n, d, positive_int(config, "d_ff"), bias=False, gated=gated)),
                )),
            ),
            formula="kaplan_transformer",
        )

    layers = count_int(config, "num_layers")
    first, rest = block(True), block(False)  # only the first block holds the relative position bias
    blocks = [first] + [rest] * (layers - 1) if layers else []
    return Node(
        "text_encoder",
        children=(
            Node("shared", ops.embedding(positive_int(config, "vocab_size"), d)),
            Node("encoder", children=(module_list("block", blocks), Node("final_layer_norm", ops.rms_norm(n, d)))),
        ),
        formula="t5_encoder",
    )
