"""T5 encoder: ``T5EncoderModel`` (transformers ``models/t5/modeling_t5.py``).

``num_layers`` ``T5Block``s, each an RMS-normed (``T5LayerNorm``) self-attention with bias-free
projections of width ``num_heads·d_kv`` and an RMS-normed MLP, gated for ``gated-*``
``feed_forward_proj`` (T5 v1.1, FLAN). The relative position bias is an embedding lookup in the
first block. ``shared`` (the token embedding) is tied to ``encoder.embed_tokens``.
"""

from __future__ import annotations

from flopcalc.config import Config, count_int, positive_int
from flopcalc.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp_in, self_attention
from flopcalc.registry import RunShape, register
from flopcalc.weights import loading_rules

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


def dense_relu_dense(tokens, d_model: int, d_ff: int, gated: bool) -> Node:
    """``T5DenseActDense`` / ``T5DenseGatedActDense`` (``layer.1.DenseReluDense``): ``wi`` (gated: ``wi_0``,
    ``wi_1``) and the activation, then ``wo`` as a child: the module transformers keeps in float32 when
    loading in float16 (``T5PreTrainedModel._keep_in_fp32_modules = ["wo"]``, modeling_t5.py)."""
    return Node("DenseReluDense", mlp_in(tokens, d_model, d_ff, bias=False, gated=gated),
                (Node("wo", ops.linear(tokens, d_ff, d_model, bias=False)),))


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
                    Node("1", ops.rms_norm(n, d), (dense_relu_dense(n, d, positive_int(config, "d_ff"), gated),)),
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


# modeling_t5.py:537: _keep_in_fp32_modules = ["wo"], applied when loading in float16 (modeling_utils.py:3842)
loading_rules("T5EncoderModel", keep_in_fp32=("wo",), keep_in_fp32_dtypes=("fp16",),
              source="transformers/models/t5/modeling_t5.py:537")
