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
                           head_dim: int, image_tokens: Any = None) -> Node:
    r"""``Attention(query_dim=d, cross_attention_dim=d_t, qk_norm="rms_norm", out_bias=False)`` with
    ``CosmosAttnProcessor2_0``: ``to_q`` on the tokens, ``to_k``/``to_v`` on the text, per-head RMS norms of q and
    k, attention, ``to_out.0``.

    .. math:: \mathrm{MACs} = 2 N d^2 + 2 T d_t d + 2 h N T d_h

    ``image_tokens`` (Cosmos 2.5 Transfer, ``img_context_dim_in`` set): ``CosmosAttention`` with
    ``CosmosAttnProcessor2_5`` (transformer_cosmos.py:215-338), which adds ``q_img`` on the tokens and
    ``k_img``/``v_img`` on the :math:`I` projected image-context tokens (``nn.Linear(d, d)``, no bias), per-head RMS
    norms ``q_img_norm``/``k_img_norm``, a second attention over the image tokens, its output added to the text
    attention's before ``to_out.0``: :math:`+\,2 N d^2 + 2 I d^2 + 2 h N I d_h`.
    """
    inner = heads * head_dim
    cost = (ops.linear(tokens, dim, inner, bias=False) + ops.linear(context_tokens, context_dim, inner, bias=False) * 2
            + ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(context_tokens * heads, head_dim)
            + ops.attention(tokens, context_tokens, heads, head_dim) + ops.linear(tokens, inner, dim, bias=False))
    if image_tokens is not None:
        cost = (cost + ops.linear(tokens, dim, inner, bias=False) + ops.linear(image_tokens, dim, inner, bias=False) * 2
                + ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(image_tokens * heads, head_dim)
                + ops.attention(tokens, image_tokens, heads, head_dim))
    return Node(name, cost, formula="attention")


@lru_cache(maxsize=256)
def cosmos_transformer_block(*, dim: int, heads: int, head_dim: int, text_dim: int, lora_dim: int, ff_dim: int,
                             tokens: Any, text_tokens: Any, rows: Any, image_tokens: Any = None,
                             before_proj: bool = False, after_proj: bool = False) -> Node:
    """One ``CosmosTransformerBlock``: ``norm1``, ``attn1``, ``norm2``, ``attn2`` (with the image-context branch on
    ``image_tokens`` tokens when set: :func:`cosmos_cross_attention`), ``norm3``, ``ff``, names as in diffusers;
    and the ControlNet's zero projections (transformer_cosmos.py:394-399, 418-419, 448-451): ``before_proj``
    (``nn.Linear(d, d)``, on the tokens, its output added to the base latent's patch embedding) and
    ``after_proj`` (``nn.Linear(d, d)`` on the block's output: the residual handed to the transformer)."""
    norm = dict(dim=dim, lora_dim=lora_dim, tokens=tokens, rows=rows, chunks=3)
    projections = tuple(Node(p, ops.linear(tokens, dim, dim)) for p, on in (("before_proj", before_proj),
                                                                             ("after_proj", after_proj)) if on)
    return Node("block", children=(
        cosmos_ada_norm("norm1", **norm),
        attention_module("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, qk_norm="rms_norm",
                         bias=False, out_bias=False),
        cosmos_ada_norm("norm2", **norm),
        cosmos_cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=text_tokens, context_dim=text_dim,
                               heads=heads, head_dim=head_dim, image_tokens=image_tokens),
        cosmos_ada_norm("norm3", **norm),
        feed_forward("ff", tokens, dim, inner=ff_dim, bias=False),
        *projections,
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

