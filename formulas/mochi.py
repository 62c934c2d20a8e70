r"""Mochi (``MochiTransformer3DModel``) blocks and embedders: diffusers ``models/transformers/transformer_mochi.py``
(``MochiTransformerBlock``, ``MochiRMSNormZero``, ``MochiLayerNormContinuous``, ``MochiModulatedRMSNorm``, ``MochiRoPE``),
``models/attention_processor.py`` (``MochiAttention``, ``MochiAttnProcessor2_0``) and ``models/embeddings.py``
(``MochiCombinedTimestepCaptionEmbedding``, ``MochiAttentionPool``).

Symbols: :math:`N` video tokens of width :math:`d = h d_h`, :math:`T` text tokens of width :math:`c`
(``pooled_projection_dim``: the smaller text stream), feed-forward widths :math:`f = \lfloor 8d/3 \rfloor` and
:math:`f_c = \lfloor 8c/3 \rfloor` (SwiGLU: the up projection is twice as wide).

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 d^2 + 4 d c}_{\text{norm1, norm1\_context}}
       + \underbrace{4 N d^2 + 3 T c d + T d c}_{\text{attn1 projections}} + \underbrace{2 h (N+T)^2 d_h}_{\text{joint attention}}
       + \underbrace{3 N d f + 3 T c f_c}_{\text{ff, ff\_context}}

(the last block, ``context_pre_only``: ``norm1_context`` is ``MochiLayerNormContinuous`` (:math:`dc`), and there is no
``to_add_out`` nor ``ff_context``). The joint attention runs, per sample, on the video tokens and the prompt's valid
text tokens (transformer_mochi/attention_processor.py:1066-1083); flopcalc counts a prompt that fills the ``T``
tokens (an all-ones mask), the upper bound.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.transformer_parts import feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("mochi_transformer_block")


def mochi_modulated_norm(name: str, tokens: Any, dim: int) -> Node:
    """``MochiModulatedRMSNorm``: a ``RMSNorm(0, eps, False)`` child ``norm`` (no affine), then a scale."""
    return Node(name, children=(Node("norm", ops.rms_norm(tokens, dim, affine=False)),))


def mochi_rms_norm_zero(name: str, *, dim: int, out_dim: int, tokens: Any) -> Node:
    r"""``MochiRMSNormZero(d, 4·out_dim)`` (transformer_mochi.py:88): ``linear`` (d → 4·out_dim, bias) on SiLU of
    the conditioning vector, and ``norm`` (an RMSNorm without affine) on the ``tokens``.

    .. math:: \mathrm{MACs} = 4 d\,\text{out\_dim}
    """
    return Node(name, ops.activation(dim), (
        Node("linear", ops.linear(1, dim, 4 * out_dim)),
        Node("norm", ops.rms_norm(tokens, out_dim, affine=False)),
    ))


def mochi_layer_norm_continuous(name: str, *, dim: int, cond_dim: int, tokens: Any) -> Node:
    r"""``MochiLayerNormContinuous(c, d)`` (transformer_mochi.py:59): ``linear_1`` (d → c, bias) on SiLU of the
    conditioning vector, ``norm`` (``MochiModulatedRMSNorm``) on the ``tokens``. :math:`\mathrm{MACs} = d c`."""
    return Node(name, ops.activation(cond_dim), (
        Node("linear_1", ops.linear(1, cond_dim, dim)),
        mochi_modulated_norm("norm", tokens, dim),
    ))


def mochi_attention(name: str, *, tokens: Any, dim: int, text_tokens: Any, text_dim: int, heads: int, head_dim: int,
                    context_pre_only: bool) -> Node:
    r"""``MochiAttention`` with ``MochiAttnProcessor2_0`` (attention_processor.py:932-1100): ``to_q/k/v`` (d → d, no
    bias) on the video tokens, ``add_q/k/v_proj`` (c → d, no bias) on the text tokens, affine per-head RMS norms of
    the four query/key sets, RoPE on the video queries and keys (elementwise), one attention over the joined
    :math:`N + T` sequence, ``to_out.0`` (d → d, bias) and, unless ``context_pre_only``, ``to_add_out`` (d → c, bias).

    .. math:: \mathrm{MACs} = 4 N d^2 + 3 T c d + [T d c] + 2 h (N+T)^2 d_h
    """
    inner = heads * head_dim
    seq = tokens + text_tokens
    children = [
        Node("norm_q", ops.rms_norm(tokens * heads, head_dim)),
        Node("norm_k", ops.rms_norm(tokens * heads, head_dim)),
        Node("norm_added_q", ops.rms_norm(text_tokens * heads, head_dim)),
        Node("norm_added_k", ops.rms_norm(text_tokens * heads, head_dim)),
        Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_k", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_v", ops.linear(tokens, dim, inner, bias=False)),
        Node("add_k_proj", ops.linear(text_tokens, text_dim, inner, bias=False)),
        Node("add_v_proj", ops.linear(text_tokens, text_dim, inner, bias=False)),
        Node("add_q_proj", ops.linear(text_tokens, text_dim, inner, bias=False)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim)),)),
    ]
    if not context_pre_only:
        children.append(Node("to_add_out", ops.linear(text_tokens, inner, text_dim)))
    return Node(name, ops.attention(seq, seq, heads, head_dim), tuple(children), formula="attention")


@lru_cache(maxsize=256)
def mochi_transformer_block(*, dim: int, heads: int, head_dim: int, text_dim: int, tokens: Any, text_tokens: Any,
                            context_pre_only: bool) -> Node:
    """One ``MochiTransformerBlock`` (transformer_mochi.py:119), names as in diffusers."""
    n, t = tokens, text_tokens
    if context_pre_only:
        norm1_context = mochi_layer_norm_continuous("norm1_context", dim=text_dim, cond_dim=dim, tokens=t)
    else:
        norm1_context = mochi_rms_norm_zero("norm1_context", dim=dim, out_dim=text_dim, tokens=t)
    children = [
        mochi_rms_norm_zero("norm1", dim=dim, out_dim=dim, tokens=n),
        norm1_context,
        mochi_attention("attn1", tokens=n, dim=dim, text_tokens=t, text_dim=text_dim, heads=heads, head_dim=head_dim,
                        context_pre_only=context_pre_only),
        mochi_modulated_norm("norm2", n, dim),
        mochi_modulated_norm("norm3", n, dim),
        feed_forward("ff", n, dim, inner=(4 * dim * 2) // 3, gated=True, bias=False),
        mochi_modulated_norm("norm4", n, dim),
    ]
    if not context_pre_only:
        children += [
            mochi_modulated_norm("norm2_context", t, text_dim),
            mochi_modulated_norm("norm3_context", t, text_dim),
            feed_forward("ff_context", t, text_dim, inner=(4 * text_dim * 2) // 3, gated=True, bias=False),
            mochi_modulated_norm("norm4_context", t, text_dim),
        ]
    return Node("block", children=tuple(children), formula="mochi_transformer_block")


def mochi_time_embed(*, dim: int, text_dim: int, text_embed_dim: int, time_embed_dim: int, text_tokens: Any,
                     pool_heads: int = 8) -> Node:
    r"""``MochiCombinedTimestepCaptionEmbedding`` (embeddings.py:1561): ``timestep_embedder`` (``time_embed_dim`` →
    d → d), the ``pooler`` (``MochiAttentionPool``, embeddings.py:1724: ``to_kv`` (e → 2e) on the mean-pooled token
    and the :math:`T` text tokens, ``to_q`` (e → e) on the pooled token, one-query attention of 8 heads, ``to_out``
    (e → d)) and ``caption_proj`` (e → c) on the text tokens; e = ``text_embed_dim``.

    .. math:: \mathrm{MACs} = t d + d^2 + 2 (T+1) e^2 + e^2 + 2 (T+1) e + e d + T e c
    """
    e = text_embed_dim
    kv = text_tokens + 1
    pooler = Node("pooler", ops.attention(1, kv, pool_heads, e // pool_heads), (
        Node("to_kv", ops.linear(kv, e, 2 * e)),
        Node("to_q", ops.linear(1, e, e)),
        Node("to_out", ops.linear(1, e, dim)),
    ))
    return Node("time_embed", children=(
        mlp_embedder("timestep_embedder", time_embed_dim, dim),
        pooler,
        Node("caption_proj", ops.linear(text_tokens, e, text_dim)),
    ), formula="mochi_time_embed")


def mochi_rope(*, tokens: Any, heads: int, head_dim: int) -> Node:
    r"""``MochiRoPE`` (transformer_mochi.py:246): the positions (N × 3) times ``pos_frequencies`` (3 × h × d_h/2) in
    one ``einsum`` (a matmul torch counts), then cos and sin. :math:`\mathrm{MACs} = 3 N h d_h / 2`."""
    return Node("rope", ops.matmul(tokens, 3, heads * (head_dim // 2)))
