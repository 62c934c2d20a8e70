"""The T5-family encoder: ``T5EncoderModel`` (transformers ``models/t5/modeling_t5.py``) and
``UMT5EncoderModel`` (``models/umt5/modeling_umt5.py``), the same stack of blocks.

``num_layers`` blocks (``T5Block`` / ``UMT5Block``), each ``layer.0`` = RMS norm (``T5LayerNorm``)
+ self-attention with bias-free q/k/v/o of width ``num_heads·d_kv`` and ``layer.1`` = RMS norm + MLP,
gated (``wi_0``, ``wi_1``, ``wo``) for ``gated-*`` ``feed_forward_proj`` (T5 v1.1, FLAN, UMT5), then
``final_layer_norm``; ``shared`` (the token embedding) is tied to ``encoder.embed_tokens`` (counted
once). The variants differ only in where the relative position bias lives (an embedding lookup
added to the scores: parameters, no matmul): T5 builds ``relative_attention_bias`` in the first
block only, UMT5 in every block (``UMT5LayerSelfAttention`` passes ``has_relative_attention_bias=True``).
UMT5's unscaled attention (``scaling = 1``) changes no count.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.kaplan_transformer import mlp_in, self_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("kaplan_transformer")


def dense_relu_dense(tokens: Any, d_model: int, d_ff: int, gated: bool) -> Node:
    """``T5DenseActDense`` / ``T5DenseGatedActDense`` (``layer.1.DenseReluDense``): ``wi`` (gated: ``wi_0``,
    ``wi_1``) and the activation, then ``wo`` as a child: the module transformers keeps in float32 when
    loading in float16 (``_keep_in_fp32_modules = ["wo"]``, modeling_t5.py / modeling_umt5.py)."""
    return Node("DenseReluDense", mlp_in(tokens, d_model, d_ff, bias=False, gated=gated),
                (Node("wo", ops.linear(tokens, d_ff, d_model, bias=False)),))


def encoder_block(n: Any, d: int, heads: int, d_kv: int, d_ff: int, *, gated: bool, bias_buckets: int | None) -> Node:
    """One block on ``n`` tokens; ``bias_buckets``: the size of its ``relative_attention_bias`` table
    (``relative_attention_num_buckets``), None for a block without one."""
    attention = self_attention(n, d, heads, d_kv, bias=False)
    if bias_buckets is not None:
        attention = attention + ops.embedding(bias_buckets, heads)
    return Node(
        "block",
        children=(
            Node("layer", children=(
                Node("0", ops.rms_norm(n, d) + attention),
                Node("1", ops.rms_norm(n, d), (dense_relu_dense(n, d, d_ff, gated),)),
            )),
        ),
        formula="kaplan_transformer",
    )


def t5_family_encoder(n: Any, *, vocab_size: int, d_model: int, d_kv: int, d_ff: int, num_layers: int, num_heads: int,
                      buckets: int, feed_forward_proj: str, bias_in_every_block: bool, formula: str) -> Node:
    """The whole encoder on ``n`` tokens: ``shared``, ``encoder.block`` × ``num_layers``,
    ``encoder.final_layer_norm``. ``bias_in_every_block``: UMT5 (else T5: the first block only)."""
    d = d_model
    gated = str(feed_forward_proj).startswith("gated-")
    with_bias = encoder_block(n, d, num_heads, d_kv, d_ff, gated=gated, bias_buckets=buckets)
    rest = with_bias if bias_in_every_block else encoder_block(n, d, num_heads, d_kv, d_ff, gated=gated,
                                                                bias_buckets=None)
    blocks = [with_bias] + [rest] * (num_layers - 1) if num_layers else []
    return Node(
        "text_encoder",
        children=(
            Node("shared", ops.embedding(vocab_size, d)),
            Node("encoder", children=(module_list("block", blocks), Node("final_layer_norm", ops.rms_norm(n, d)))),
        ),
        formula=formula,
    )
