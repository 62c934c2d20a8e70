r"""Parts shared by every transformer block: the attention module and the feed-forward.

Attention module (diffusers ``attention_processor.Attention`` with ``AttnProcessor2_0`` /
``JointAttnProcessor2_0``, and ``transformer_flux.FluxAttention``), for :math:`n` query tokens
of width :math:`d`, inner width :math:`d_i = h d_h`, and optionally :math:`m` context tokens
projected by ``add_{q,k,v}_proj`` and attended jointly (MMDiT):

.. math::

   \mathrm{MACs} = \underbrace{3 n d d_i + 3 m d_c d_i}_{\text{QKV}}
                 + \underbrace{2 h (n+m)^2 d_h}_{\text{QK}^\top,\ \text{AV}}
                 + \underbrace{n d_i d + m d_i d}_{\text{out, add\_out}}

Feed-forward (diffusers ``attention.FeedForward`` with ``GELU``: ``net.0.proj``, ``net.2``):
:math:`\mathrm{MACs} = 2 n d\,(\mathrm{mult}\cdot d)`.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.engine.gradients import Attend, Join, Layer, Step

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("feed_forward", "attention", "identity_attention")


def qk_norm_cost(kind: str | None, vectors: Any, head_dim: int) -> Cost:
    """Two per-head norms (on q and on k) over ``vectors`` head vectors of width ``head_dim``.

    ``kind`` is the config's ``qk_norm``: ``rms_norm`` (diffusers ``RMSNorm`` / ``nn.RMSNorm``,
    affine), ``layer_norm`` (``nn.LayerNorm``, affine), ``fp32_layer_norm`` (``FP32LayerNorm`` without
    affine, a subclass thop does not hook) or ``None``.
    """
    if kind is None:
        return Cost()
    if kind == "rms_norm":
        return ops.rms_norm(vectors, head_dim) * 2
    if kind == "layer_norm":
        return ops.layer_norm(vectors, head_dim) * 2
    if kind == "fp32_layer_norm":
        return ops.layer_norm(vectors, head_dim, affine=False, thop_rule=False) * 2
    raise ValueError(f"qk_norm {kind!r} is not supported")


def attention_module(
    name: str,
    *,
    tokens: Any,
    dim: int,
    heads: int,
    head_dim: int,
    qk_norm: str | None = None,
    context_tokens: Any = 0,
    context_dim: int | None = None,
    context_out: bool = True,
    out: bool = True,
    bias: bool = True,
    context_bias: bool = True,
    out_bias: bool = True,
) -> Node:
    """One attention module: q/k/v projections of ``tokens`` tokens, optionally ``context_tokens``
    more projected by ``add_{q,k,v}_proj`` and attended jointly (``context_dim`` given), the
    per-head q/k norms, scaled dot-product attention over all of them, and the output
    projections (``to_out.0`` unless ``out`` is False, i.e. ``pre_only``; ``to_add_out`` unless
    ``context_out`` is False, i.e. ``context_pre_only``). ``bias``: of q/k/v; ``context_bias``:
    of ``add_{q,k,v}_proj`` (``added_proj_bias``); ``out_bias``: of both output projections.
    """
    inner = heads * head_dim
    cost = qk_norm_cost(qk_norm, tokens * heads, head_dim)
    projections = [Node(p, ops.linear(tokens, dim, inner, bias=bias)) for p in ("to_q", "to_k", "to_v")]
    seq = tokens
    if context_dim is not None:
        projections += [Node(p, ops.linear(context_tokens, context_dim, inner, bias=context_bias))
                        for p in ("add_q_proj", "add_k_proj", "add_v_proj")]
        cost = cost + qk_norm_cost(qk_norm, context_tokens * heads, head_dim)
        seq = tokens + context_tokens
        if context_out:
            projections.append(Node("to_add_out", ops.linear(context_tokens, inner, context_dim, bias=out_bias)))
    cost = cost + ops.attention(seq, seq, heads, head_dim)
    if out:
        projections.append(Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=out_bias)),)))
    return Node(name, cost, tuple(projections), formula="attention")


def identity_attention(name: str, *, tokens: Any, dim: int, inner: int, bias: bool = True,
                       out_bias: bool = True, idle: Cost = Cost()) -> Node:
    r"""The perturbed row of perturbed-attention guidance in a self-attention layer (diffusers
    ``attention_processor.PAGCFGIdentitySelfAttnProcessor2_0`` :5215-5229 and its HunyuanDiT / Sana
    linear-attention twins): the attention map is the identity, so only ``to_v`` and ``to_out`` run:
    :math:`\mathrm{MACs} = 2 n d d_i` (no q, k, scores). The module keeps its parameters: ``to_q`` and
    ``to_k`` and ``idle`` (the q/k norms' parameters, at no work) count in ``params`` only."""
    cost = (ops.linear(tokens, dim, inner, bias=bias) + ops.linear(tokens, inner, dim, bias=out_bias)
            + ops.linear(0, dim, inner, bias=bias) * 2 + idle)
    return Node(name, cost, formula="identity_attention")


def cross_attention(name: str, *, tokens: Any, dim: int, context_tokens: Any, context_dim: int, heads: int,
                    head_dim: int, bias: bool = False, out_bias: bool = True) -> Node:
    r"""Cross-attention (``Attention(query_dim=d, cross_attention_dim=d_c)``): queries from the
    ``tokens`` image tokens, keys and values from ``context_tokens`` context vectors of width
    ``context_dim``. :math:`\mathrm{MACs} = 2 n d d_i + 2 m d_c d_i + 2 h n m d_h`.
    The projections are children named as the real module's (``to_q``, ``to_k``, ``to_v``,
    ``to_out.0``): ``to_k``/``to_v`` read the context, which may be a model input (no gradient)."""
    inner = heads * head_dim
    projections = (
        Node("to_q", ops.linear(tokens, dim, inner, bias=bias)),
        Node("to_k", ops.linear(context_tokens, context_dim, inner, bias=bias)),
        Node("to_v", ops.linear(context_tokens, context_dim, inner, bias=bias)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=out_bias)),)),
    )
    return Node(name, ops.attention(tokens, context_tokens, heads, head_dim), projections,
                formula="cross_attention")


def feed_forward(name: str, tokens: Any, dim: int, *, mult: int = 4, inner: int | None = None,
                 gated: bool = False, bias: bool = True) -> Node:
    """diffusers ``FeedForward``: ``net.0.proj`` (d → f, or d → 2f for ``geglu``, whose
    ``hidden · gelu(gate)`` halves it again), the activation, ``net.2`` (f → d); f = mult·d. The
    projections are children with the real module's paths (``net.0.proj``, ``net.2``)."""
    hidden = mult * dim if inner is None else inner
    up = ops.linear(tokens, dim, hidden * (2 if gated else 1), bias=bias)
    act = ops.activation(tokens * hidden) * (2 if gated else 1)
    net = Node("net", children=(Node("0", act, (Node("proj", up),)), Node("2", ops.linear(tokens, hidden, dim, bias=bias))))
    return Node(name, children=(net,), formula="feed_forward")


def self_cross_block_flow(ff: str = "ff") -> tuple[Step, ...]:
    """Which tensors a DiT block's layers read and write, for the backward of a LoRA run (:mod:`flopcalc.training.lora`):
    self-attention ``attn1`` on the image tokens ``img``, its output added through a conditioning gate; cross-
    attention ``attn2`` whose queries read the tokens and keys/values the text states ``txt``, added ungated; the
    feed-forward ``ff`` added through a gate. ``WanTransformerBlock`` (transformer_wan.py:462-504), PixArt's
    ``BasicTransformerBlock`` with ``ada_norm_single`` (attention.py:1000-1076) and ``LTXVideoTransformerBlock``
    (transformer_ltx.py:344-381) run this way."""
    return (
        *(Layer(f"attn1.{p}", ("img",), p) for p in ("to_q", "to_k", "to_v")),
        Attend("attn1", q=("to_q",), k=("to_k",), v=("to_v",), to="o"),
        Layer("attn1.to_out.0", ("o",), "a"),
        Join(("img", "a"), "img", gated="a"),
        Layer("attn2.to_q", ("img",), "q"),
        Layer("attn2.to_k", ("txt",), "k"),
        Layer("attn2.to_v", ("txt",), "v"),
        Attend("attn2", q=("q",), k=("k",), v=("v",), to="o"),
        Layer("attn2.to_out.0", ("o",), "a"),
        Join(("img", "a"), "img"),
        Layer(f"{ff}.net.0.proj", ("img",), "h"),
        Layer(f"{ff}.net.2", ("h",), "f"),
        Join(("img", "f"), "img", gated="f"),
    )
