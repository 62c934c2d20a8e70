r"""BRIA FIBO 2's blocks: the Z-Image block with gated text cross-attention, and the Perceiver that turns the text
encoder into gist tokens.

Mirrors diffusers ``models/transformers/transformer_bria_fibo2.py`` (0.42.1): ``BriaFibo2Attention`` (:258-284),
``BriaFibo2TransformerBlock`` (:287-368), ``BriaFibo2PerceiverLayer`` (:371-399), ``BriaFibo2PerceiverResampler``
(:402-427), ``FinalLayer`` (:103-131), ``TimestepEmbedder`` (:34-69) and ``compute_gist_count`` (:180-196).

Symbols: :math:`n` stream tokens, :math:`m` text tokens of width :math:`c` (``cap_feat_dim``), width :math:`d`,
:math:`h` heads of :math:`d_h = d/h`, feed-forward width :math:`d_f = \lfloor\lfloor 8d/3\rfloor/64\rfloor\cdot 64`,
modulation input width :math:`a = \min(d, 256)`, :math:`v` modulation vectors (1 global, 2 per-token: noisy and
clean).

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 n d^2 + 2 h n^2 d_h}_{\text{self-attention}}
     + \underbrace{3 n d d_f}_{\text{w1, w3, w2}} + \underbrace{4 v a d}_{\text{adaLN}}
     + [\text{injection}]\big(\underbrace{2 n d^2 + 2 m c d + 2 h n m d_h}_{\text{cross-attention}}\big)

   \mathrm{MACs}_\text{perceiver layer}(g, m) = \underbrace{2 g d^2 + 2 m c d + 2 h g m d_h}_{\text{cross}}
     + \underbrace{4 g d^2 + 2 h g^2 d_h}_{\text{self}} + 3 g d d_f

Every projection is bias-free (``to_q``/``to_k``/``to_v``/``to_out.0``), every attention has per-head ``norm_q`` /
``norm_k`` RMSNorms (on the query tokens and on the key tokens), the feed-forward is Z-Image's SwiGLU
(:func:`flopcalc.formulas.z_image.swiglu_feed_forward`). RoPE (complex products) and the modulation's ``tanh`` and
``torch.where`` selections are elementwise.
"""

from __future__ import annotations

import math
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module
from flopcalc.formulas.z_image import swiglu_feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("bria_fibo2_block", "bria_fibo2_perceiver_layer")

#: ``transformer_bria_fibo2.ADALN_EMBED_DIM`` (:30): the timestep embedding's width is ``min(dim, 256)``.
ADALN_EMBED_DIM = 256


def fibo2_ffn_width(dim: int) -> int:
    """``FeedForward(dim, hidden_dim=(dim * 8 // 3) // 64 * 64)`` (:293, :383)."""
    return (dim * 8 // 3) // 64 * 64


def gist_count(text_len: int, *, min_gist: int, max_gist: int, step: int, min_text: int, max_text: int) -> int:
    """``compute_gist_count`` (:180-196) for one prompt of ``text_len`` tokens: the length mapped linearly from
    ``[min_text, max_text]`` onto ``[min_gist, max_gist]``, rounded up to a multiple of ``step`` and clamped. The
    same float arithmetic as the real function (a rounded, clamped ceiling: no closed form in ``text_len``)."""
    ratio = min(1.0, max(0.0, (float(text_len) - min_text) / (max_text - min_text)))
    raw = min_gist + ratio * (max_gist - min_gist)
    return max(min_gist, min(max_gist, int(math.ceil(raw / step)) * step))


def fibo2_cross_attention(name: str, *, tokens: Any, dim: int, heads: int, context_tokens: Any,
                          context_dim: int) -> Node:
    """``BriaFibo2Attention(dim, heads, dim // heads, kv_dim=context_dim)`` (:264-274) with ``encoder_hidden_states``:
    ``to_q`` on the ``tokens`` queries, ``to_k``/``to_v`` on the ``context_tokens`` (width ``context_dim``), bias-free,
    ``norm_q`` on the query heads and ``norm_k`` on the key heads (:223-224), SDPA, ``to_out.0`` (:255)."""
    head_dim = dim // heads
    inner = heads * head_dim
    cost = (ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(context_tokens * heads, head_dim)
            + ops.attention(tokens, context_tokens, heads, head_dim))
    return Node(name, cost, (
        Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_k", ops.linear(context_tokens, context_dim, inner, bias=False)),
        Node("to_v", ops.linear(context_tokens, context_dim, inner, bias=False)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=False)),)),
    ), formula="cross_attention")


def fibo2_self_attention(name: str, *, tokens: Any, dim: int, heads: int) -> Node:
    """``BriaFibo2Attention`` without ``encoder_hidden_states``: q, k, v of the same tokens (bias-free), per-head
    RMSNorms, SDPA, ``to_out.0`` (bias-free)."""
    return attention_module(name, tokens=tokens, dim=dim, heads=heads, head_dim=dim // heads, qk_norm="rms_norm",
                            bias=False, out_bias=False)


def fibo2_block(*, tokens: Any, dim: int, heads: int, modulation_vectors: int, text_tokens: Any = 0,
                cross_dim: int | None = None) -> Node:
    """One ``BriaFibo2TransformerBlock`` (:287-368) on ``tokens`` tokens. ``modulation_vectors``: how many times
    ``adaLN_modulation`` (``min(d, 256)`` → 4d) runs: 1 with one global timestep (``noise_mask`` None), 2 with the
    per-token noisy/clean modulation (:327-330). ``cross_dim``: an injection block (``cross_attention_dim`` set),
    whose gated ``cross_attention`` reads ``text_tokens`` text-encoder vectors (:357-363), with its two RMSNorms and
    the scalar ``cross_attn_gate``."""
    norm = ops.rms_norm(tokens, dim)
    children = [
        fibo2_self_attention("attention", tokens=tokens, dim=dim, heads=heads),
        swiglu_feed_forward("feed_forward", tokens, dim, fibo2_ffn_width(dim)),
        Node("attention_norm1", norm),
        Node("ffn_norm1", norm),
        Node("attention_norm2", norm),
        Node("ffn_norm2", norm),
        Node("adaLN_modulation", children=(
            Node("0", ops.linear(modulation_vectors, min(dim, ADALN_EMBED_DIM), 4 * dim)),)),
    ]
    if cross_dim is not None:
        children += [
            Node("cross_attn_norm1", norm),
            fibo2_cross_attention("cross_attention", tokens=tokens, dim=dim, heads=heads, context_tokens=text_tokens,
                                  context_dim=cross_dim),
            Node("cross_attn_norm2", norm),
            Node("cross_attn_gate", ops.parameters(1)),
        ]
    return Node("layer", children=tuple(children), formula="bria_fibo2_block")


def fibo2_perceiver_layer(*, gist: Any, dim: int, heads: int, text_tokens: Any, cross_dim: int) -> Node:
    """One ``BriaFibo2PerceiverLayer`` (:371-399) on ``gist`` gist tokens: RMS-normed cross-attention to the
    ``text_tokens`` vectors of width ``cross_dim``, RMS-normed self-attention, RMS-normed SwiGLU."""
    norm = ops.rms_norm(gist, dim)
    return Node("layer", children=(
        Node("cross_attn_norm", norm),
        fibo2_cross_attention("cross_attention", tokens=gist, dim=dim, heads=heads, context_tokens=text_tokens,
                              context_dim=cross_dim),
        Node("self_attn_norm", norm),
        fibo2_self_attention("self_attention", tokens=gist, dim=dim, heads=heads),
        Node("ffn_norm", norm),
        swiglu_feed_forward("ffn", gist, dim, fibo2_ffn_width(dim)),
    ), formula="bria_fibo2_perceiver_layer")


def fibo2_final_layer(*, tokens: Any, dim: int, out_channels: int) -> Node:
    """``FinalLayer`` (:103-131) with one global ``c``: ``norm_final`` (LayerNorm, no affine), ``linear`` d → out on the
    ``tokens`` image tokens, ``adaLN_modulation`` (SiLU, then ``min(d, 256)`` → d on one vector)."""
    adaln = min(dim, ADALN_EMBED_DIM)
    return Node("final_layer", children=(
        Node("norm_final", ops.layer_norm(tokens, dim, affine=False)),
        Node("linear", ops.linear(tokens, dim, out_channels)),
        Node("adaLN_modulation", ops.activation(adaln), (Node("1", ops.linear(1, adaln, dim)),)),
    ), formula="bria_fibo2_final_layer")
