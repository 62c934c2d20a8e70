"""UMT5 encoder: ``UMT5EncoderModel`` (transformers ``models/umt5/modeling_umt5.py``), Wan's text encoder.

The T5 v1.1 encoder layout (``flopcalc/architectures/t5.py``) with one difference that matters
here: every ``UMT5Attention`` of the encoder is built with ``has_relative_attention_bias=True``
(``UMT5LayerSelfAttention``), so each of the ``num_layers`` blocks holds its own
``relative_attention_bias`` table (``nn.Embedding(relative_attention_num_buckets, num_heads)``), where
T5 keeps one in the first block. The bias is looked up and added to the scores (no matmul); the
attention is unscaled (``scaling = 1``), which changes no count.

Per block (``UMT5Block``): ``layer.0`` = RMS norm (``UMT5LayerNorm``) + self-attention with bias-free
q/k/v/o of width ``num_heads·d_kv``; ``layer.1`` = RMS norm + MLP, gated (``wi_0``, ``wi_1``, ``wo``)
for ``gated-*`` ``feed_forward_proj`` (the UMT5 default, ``gated-gelu``). ``UMT5Config`` forces
``tie_word_embeddings``, so ``shared`` is ``encoder.embed_tokens`` (counted once).
"""

from __future__ import annotations

from flopcalc.config import LAYERS, SIZE, TEXT, Config, count_int, declare_keys, positive_int
from flopcalc.cost import Node, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp, self_attention
from flopcalc.registry import RunShape, register

#: ``UMT5Config`` defaults (transformers configuration_umt5.py).
DEFAULTS = {
    "vocab_size": 250112,
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 1024,
    "num_layers": 8,
    "num_heads": 6,
    "relative_attention_num_buckets": 32,
    "feed_forward_proj": "gated-gelu",
}


#: Every config key ``UMT5EncoderModel`` reads (assemblers and pipeline plan), as
#: :func:`flopcalc.config.declare_keys` validates it.
declare_keys("UMT5EncoderModel", {
    "vocab_size": SIZE, "d_model": SIZE, "d_kv": SIZE, "d_ff": SIZE, "num_layers": LAYERS, "num_heads": SIZE,
    "relative_attention_num_buckets": SIZE, "feed_forward_proj": TEXT,
})


@register("UMT5EncoderModel", role="text_encoder", defaults=DEFAULTS,
          source="transformers/models/umt5/modeling_umt5.py")
def umt5_encoder(config: Config, shape: RunShape) -> Node:
    n = shape.seq_len
    d = positive_int(config, "d_model")
    heads = positive_int(config, "num_heads")
    gated = str(config["feed_forward_proj"]).startswith("gated-")
    attention = (self_attention(n, d, heads, positive_int(config, "d_kv"), bias=False)
                 + ops.embedding(positive_int(config, "relative_attention_num_buckets"), heads))
    block = Node(
        "block",
        children=(
            Node("layer", children=(
                Node("0", ops.rms_norm(n, d) + attention),
                Node("1", ops.rms_norm(n, d) + mlp(n, d, positive_int(config, "d_ff"), bias=False, gated=gated)),
            )),
        ),
        formula="kaplan_transformer",
    )
    return Node(
        "text_encoder",
        children=(
            Node("shared", ops.embedding(positive_int(config, "vocab_size"), d)),
            Node("encoder", children=(module_list("block", [block] * count_int(config, "num_layers")),
                                      Node("final_layer_norm", ops.rms_norm(n, d)))),
        ),
        formula="umt5_encoder",
    )
