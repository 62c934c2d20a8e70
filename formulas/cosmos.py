r"""Cosmos (Predict2) transformer block and embedders: diffusers ``models/transformers/transformer_cosmos.py``
(``CosmosTransformerBlock``, ``CosmosAdaLayerNormZero``, ``CosmosAdaLayerNorm``, ``CosmosEmbedding``,
``CosmosAttnProcessor2_0``).

Symbols: :math:`N` video tokens, :math:`T` text tokens of width :math:`d_t`, width :math:`d = h d_h`, adaLN-LoRA
width :math:`r`, feed-forward width :math:`f`, and :math:`n_t` modulation rows (1 per sample for a 1-D timestep;
one per token for the per-frame ``(B, 1, T, 1, 1)`` timestep, which ``forward`` expands to every token).

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{3 n_t (d r + 3 r d)}_{\text{norm1..3}}
       + \underbrace{4 N d^2 + 2 h N^2 d_h}_{\text{attn1}}
       + \underbrace{2 N d^2 + 2 T d_t d + 2 h N T d_h}_{\text{attn2}} + \underbrace{2 N d f}_{\text{ff}}

Derivation: each ``CosmosAdaLayerNormZero(d, r)`` maps SiLU of the embedded timestep through ``linear_1``
(d → r) and ``linear_2`` (r → 3d), both without bias, and normalises the tokens with a LayerNorm without affine;
``attn1`` is ``Attention(d, heads, d_h, qk_norm="rms_norm", out_bias=False)`` (q/k/v without bias, per-head RMS
norms, RoPE applied elementwise), ``attn2`` the same with keys and values from the text; ``ff`` is
``FeedForward(d, mult=mlp_ratio, activation_fn="gelu", bias=False)``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module, feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cosmos_transformer_block")


def cosmos_ada_norm(name: str, *, dim: int, lora_dim: int, tokens: Any, rows: Any, chunks: int) -> Node:
    r"""``CosmosAdaLayerNormZero(d, r)`` (``chunks`` 3) or ``CosmosAdaLayerNorm(d, r)`` (``chunks`` 2, the output
    norm): SiLU, ``linear_1`` (d → r), ``linear_2`` (r → chunks·d) on the ``rows`` embedded timesteps, and
    ``norm`` (``nn.LayerNorm(d, elementwise_affine=False)``) on the ``tokens``.

    .. math:: \mathrm{MACs} = n_t (d r + r\,\text{chunks}\,d)
    """
    return Node(name, ops.activation(rows * dim), (
        Node("norm", ops.layer_norm(tokens, dim, affine=False)),
        Node("linear_1", ops.linear(rows, dim, lora_dim, bias=False)),
        Node("linear_2", ops.linear(rows, lora_dim, chunks * dim, bias=False)),
    ), formula="cosmos_ada_norm")


def cosmos_cross_attention(name: str, *, tokens: Any, dim: int, context_tokens: Any, context_dim: int, heads: int,
                           head_dim: int) -> Node:
    r"""``Attention(query_dim=d, cross_attention_dim=d_t, qk_norm="rms_norm", out_bias=False)`` with
    ``CosmosAttnProcessor2_0``: ``to_q`` on the tokens, ``to_k``/``to_v`` on the text, per-head RMS norms of q and
    k, attention, ``to_out.0``.

    .. math:: \mathrm{MACs} = 2 N d^2 + 2 T d_t d + 2 h N T d_h
    """
    inner = heads * head_dim
    cost = (ops.linear(tokens, dim, inner, bias=False) + ops.linear(context_tokens, context_dim, inner, bias=False) * 2
            + ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(context_tokens * heads, head_dim)
            + ops.attention(tokens, context_tokens, heads, head_dim) + ops.linear(tokens, inner, dim, bias=False))
    return Node(name, cost, formula="attention")


@lru_cache(maxsize=256)
def cosmos_transformer_block(*, dim: int, heads: int, head_dim: int, text_dim: int, lora_dim: int, ff_dim: int,
                             tokens: Any, text_tokens: Any, rows: Any) -> Node:
    """One ``CosmosTransformerBlock`` (no image context, no ControlNet projections): ``norm1``, ``attn1``,
    ``norm2``, ``attn2``, ``norm3``, ``ff``, names as in diffusers."""
    norm = dict(dim=dim, lora_dim=lora_dim, tokens=tokens, rows=rows, chunks=3)
    return Node("block", children=(
        cosmos_ada_norm("norm1", **norm),
        attention_module("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, qk_norm="rms_norm",
                         bias=False, out_bias=False),
        cosmos_ada_norm("norm2", **norm),
        cosmos_cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=text_tokens, context_dim=text_dim,
                               heads=heads, head_dim=head_dim),
        cosmos_ada_norm("norm3", **norm),
        feed_forward("ff", tokens, dim, inner=ff_dim, bias=False),
    ), formula="cosmos_transformer_block")


def cosmos_time_embed(*, dim: int, rows: Any) -> Node:
    r"""``CosmosEmbedding(d, d)`` on the ``rows`` timesteps: the sinusoidal ``time_proj`` (no parameters),
    ``t_embedder`` (``linear_1`` d → d, SiLU, ``linear_2`` d → 3d, no bias) and ``norm`` (an affine RMSNorm of
    the sinusoidal projection: the embedded timestep).

    .. math:: \mathrm{MACs} = n_t (d^2 + 3 d^2)
    """
    return Node("time_embed", children=(
        Node("t_embedder", children=(
            Node("linear_1", ops.linear(rows, dim, dim, bias=False) + ops.activation(rows * dim)),
            Node("linear_2", ops.linear(rows, dim, 3 * dim, bias=False)),
        ), formula="mlp_embedder"),
        Node("norm", ops.rms_norm(rows, dim)),
    ), formula="cosmos_time_embed")

