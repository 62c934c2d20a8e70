r"""Blocks of the Lumina DiTs: Lumina-Image-2.0 (diffusers ``models/transformers/transformer_lumina2.py``)
and Lumina-Next (``models/transformers/lumina_nextdit2d.py``).

Symbols: :math:`d` hidden size, :math:`h` query heads, :math:`h_{kv}` key/value heads,
:math:`d_h = d/h`, :math:`d_f` the feed-forward width (:func:`lumina_ffn_inner`),
:math:`c = \min(d, 1024)` the width of the conditioning vector ``temb``.

**Lumina-Image-2.0 block** (``Lumina2TransformerBlock`` with ``Lumina2AttnProcessor2_0``) on
:math:`n` tokens (image tokens in ``noise_refiner``, caption tokens in ``context_refiner``, both in
the joint ``layers``):

.. math::

   \mathrm{MACs} = \underbrace{n d d_h (2h + 2h_{kv})}_{\text{to\_q, to\_out: } h d_h;\ \text{to\_k, to\_v: } h_{kv} d_h}
                 + \underbrace{2 h n^2 d_h}_{\text{QK}^\top,\ \text{AV}}
                 + \underbrace{3 n d d_f}_{\text{linear\_1,2,3}}
                 + \underbrace{4 c d}_{\text{norm1.linear (modulation)}}

The attention term has :math:`h`, not :math:`h_{kv}`: the processor repeats K and V to every query
head before ``scaled_dot_product_attention``. A caption mask is a boolean SDPA mask: no MAC saved.

**Lumina-Next block** (``LuminaNextDiTBlock`` with ``LuminaAttnProcessor2_0``) on :math:`n`
image tokens and :math:`m` caption tokens of width :math:`d_c` (``cross_attention_dim``):
``attn1`` is self-attention without an output projection (``to_out = nn.Identity()``), ``attn2``
attends from the image tokens to the caption; the block adds the two (``attn2`` gated per head by
``tanh(gate)``) and itself calls ``attn2.to_out[0]`` once on the sum:

.. math::

   \mathrm{MACs} = \underbrace{n d d_h (h + 2h_{kv})}_{\text{attn1 q, k, v}} + 2 h n^2 d_h
                 + \underbrace{n d h d_h + 2 m d_c h_{kv} d_h}_{\text{attn2 q; k, v}} + 2 h n m d_h
                 + \underbrace{n h d_h d}_{\text{attn2.to\_out.0}} + 3 n d d_f + 4 c d

q/k norms (``qk_norm``: ``layer_norm_across_heads``) are affine ``nn.LayerNorm`` modules over
all heads at once (width :math:`h d_h` on q, :math:`h_{kv} d_h` on k): thop counts them
(:math:`4\,\cdot` numel each), FlopCounterMode does not. Every other norm of both models is
diffusers' ``RMSNorm`` (no thop rule); the final ``LuminaLayerNormContinuous`` holds an
``nn.LayerNorm`` without affine (thop: :math:`2\,\cdot` numel).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("lumina2_block", "lumina_next_block")


def lumina_ffn_inner(inner_dim: int, multiple_of: int, ffn_dim_multiplier: float | None) -> int:
    """``LuminaFeedForward``'s width (diffusers ``models/attention.py``):
    ``int(ffn_dim_multiplier · inner_dim)`` when a multiplier is set, rounded up to a multiple
    of ``multiple_of``. Lumina2 passes ``inner_dim = 4d``; Lumina-Next ``int(4·2·d/3)``."""
    if ffn_dim_multiplier is not None:
        inner_dim = int(ffn_dim_multiplier * inner_dim)
    return multiple_of * ((inner_dim + multiple_of - 1) // multiple_of)


def lumina_feed_forward(name: str, tokens: Any, dim: int, inner: int) -> Node:
    """``LuminaFeedForward``: ``linear_2(silu(linear_1(x)) * linear_3(x))``, three bias-free
    linears (:math:`3 n d d_f` MACs). Its ``FP32SiLU`` is a module subclass with no thop rule."""
    return Node(
        name,
        children=(
            Node("linear_1", ops.linear(tokens, dim, inner, bias=False) + ops.activation(tokens * inner)),
            Node("linear_2", ops.linear(tokens, inner, dim, bias=False)),
            Node("linear_3", ops.linear(tokens, dim, inner, bias=False)),
        ),
        formula="lumina_feed_forward",
    )


def lumina_rms_norm_zero(name: str, tokens: Any, dim: int) -> Node:
    r"""``LuminaRMSNormZero`` (``normalization.py``): ``linear(silu(temb))`` from
    :math:`c = \min(d, 1024)` to the four modulations (:math:`4 c d` MACs), and an affine
    ``RMSNorm(d)`` on the tokens."""
    cond = min(dim, 1024)
    return Node(
        name,
        children=(
            Node("linear", ops.activation(cond) + ops.linear(1, cond, 4 * dim)),
            Node("norm", ops.rms_norm(tokens, dim)),
        ),
        formula="lumina_rms_norm_zero",
    )


def lumina2_attention(name: str, *, tokens: Any, dim: int, heads: int, kv_heads: int, head_dim: int) -> Node:
    """``Attention(qk_norm="rms_norm", kv_heads, bias=False, out_bias=False)`` with
    ``Lumina2AttnProcessor2_0``: bias-free q (h heads) and k, v (h_kv heads) projections, per-head
    affine RMSNorms on q and k, K/V repeated to h heads, SDPA over ``tokens``, ``to_out.0``."""
    inner, kv_inner = heads * head_dim, kv_heads * head_dim
    return Node(
        name,
        ops.attention(tokens, tokens, heads, head_dim),  # the SDPA call: the module's own work
        children=(
            Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
            Node("to_k", ops.linear(tokens, dim, kv_inner, bias=False)),
            Node("to_v", ops.linear(tokens, dim, kv_inner, bias=False)),
            Node("norm_q", ops.rms_norm(tokens * heads, head_dim)),
            Node("norm_k", ops.rms_norm(tokens * kv_heads, head_dim)),
            Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=False)),)),
        ),
        formula="lumina2_attention",
    )


def lumina2_block(*, tokens: Any, dim: int, heads: int, kv_heads: int, ffn_inner: int, modulation: bool) -> Node:
    """One ``Lumina2TransformerBlock`` (``transformer_lumina2.py``) on ``tokens`` tokens: ``norm1``
    (``LuminaRMSNormZero`` with ``modulation``, else a plain ``RMSNorm``), ``attn``, ``norm2``,
    ``ffn_norm1``, ``feed_forward``, ``ffn_norm2`` (closed form in the module doc)."""
    head_dim = dim // heads
    norm1 = lumina_rms_norm_zero("norm1", tokens, dim) if modulation else Node("norm1", ops.rms_norm(tokens, dim))
    return Node(
        "block",
        children=(
            norm1,
            lumina2_attention("attn", tokens=tokens, dim=dim, heads=heads, kv_heads=kv_heads, head_dim=head_dim),
            Node("norm2", ops.rms_norm(tokens, dim)),
            Node("ffn_norm1", ops.rms_norm(tokens, dim)),
            lumina_feed_forward("feed_forward", tokens, dim, ffn_inner),
            Node("ffn_norm2", ops.rms_norm(tokens, dim)),
        ),
        formula="lumina2_block",
    )


def lumina_next_attention(name: str, *, tokens: Any, dim: int, context_tokens: Any, context_dim: int, heads: int,
                          kv_heads: int, head_dim: int, qk_norm: bool, out: bool) -> Node:
    """``Attention(kv_heads, qk_norm="layer_norm_across_heads", bias=False)`` with
    ``LuminaAttnProcessor2_0``: q from the ``tokens`` image tokens, k and v from ``context_tokens``
    vectors of width ``context_dim`` (the image tokens themselves for ``attn1``), q/k LayerNorms
    across heads, K/V repeated to h heads, SDPA. ``out``: the module holds ``to_out.0`` (``attn2``;
    ``attn1.to_out`` is ``nn.Identity``). The processor never calls ``to_out``: its cost is the
    block's (:func:`lumina_next_block`); only its parameters are here."""
    inner, kv_inner = heads * head_dim, kv_heads * head_dim
    children = [
        Node("to_q", ops.linear(tokens, dim, inner, bias=False)),
        Node("to_k", ops.linear(context_tokens, context_dim, kv_inner, bias=False)),
        Node("to_v", ops.linear(context_tokens, context_dim, kv_inner, bias=False)),
    ]
    if qk_norm:  # ``layer_norm_across_heads``: affine ``nn.LayerNorm`` over all heads (thop counts them)
        children += [Node("norm_q", ops.layer_norm(tokens, inner)),
                     Node("norm_k", ops.layer_norm(context_tokens, kv_inner))]
    if out:
        children.append(Node("to_out", children=(Node("0", ops.linear(0, inner, dim, bias=False)),)))
    sdpa = ops.attention(tokens, context_tokens, heads, head_dim)  # the SDPA call: the module's own work
    return Node(name, sdpa, children=tuple(children), formula="lumina_next_attention")


def lumina_next_block(*, tokens: Any, context_tokens: Any, dim: int, context_dim: int, heads: int, kv_heads: int,
                      ffn_inner: int, qk_norm: bool) -> Node:
    """One ``LuminaNextDiTBlock`` (``lumina_nextdit2d.py``): ``norm1`` (``LuminaRMSNormZero``),
    ``attn1`` (self), ``norm1_context`` (RMSNorm on the caption), ``attn2`` (to the caption),
    ``gate`` (one parameter per head), then ``attn2.to_out[0]`` called by the block on the sum of
    both attentions (its MACs are this node's own: FlopCounterMode books them to the block, not to
    ``attn2``), ``norm2``, ``ffn_norm1``, ``feed_forward``, ``ffn_norm2`` (module doc)."""
    head_dim = dim // heads
    inner = heads * head_dim
    common = {"tokens": tokens, "dim": dim, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
              "qk_norm": qk_norm}
    to_out_call = Cost(linear=ops.linear(tokens, inner, dim, bias=False).linear)  # parameters: attn2.to_out.0
    return Node(
        "block",
        to_out_call,
        children=(
            Node("gate", ops.parameters(heads)),
            lumina_rms_norm_zero("norm1", tokens, dim),
            lumina_next_attention("attn1", context_tokens=tokens, context_dim=dim, out=False, **common),
            Node("norm1_context", ops.rms_norm(context_tokens, context_dim)),
            lumina_next_attention("attn2", context_tokens=context_tokens, context_dim=context_dim, out=True, **common),
            Node("norm2", ops.rms_norm(tokens, dim)),
            Node("ffn_norm1", ops.rms_norm(tokens, dim)),
            lumina_feed_forward("feed_forward", tokens, dim, ffn_inner),
            Node("ffn_norm2", ops.rms_norm(tokens, dim)),
        ),
        formula="lumina_next_block",
    )


def lumina_layer_norm_continuous(name: str, *, tokens: Any, dim: int, out_dim: int) -> Node:
    r"""``LuminaLayerNormContinuous(d, c, elementwise_affine=False, out_dim)`` (``normalization.py``):
    ``linear_1(silu(temb))`` (:math:`c \to d`, one scale), ``nn.LayerNorm(d)`` without affine on the
    tokens, ``linear_2`` (:math:`d \to` ``out_dim``) on every token:
    :math:`\mathrm{MACs} = c d + n d\,\text{out\_dim}`."""
    cond = min(dim, 1024)
    return Node(
        name,
        children=(
            Node("linear_1", ops.activation(cond) + ops.linear(1, cond, dim)),
            Node("norm", ops.layer_norm(tokens, dim, affine=False)),
            Node("linear_2", ops.linear(tokens, dim, out_dim)),
        ),
        formula="lumina_layer_norm_continuous",
    )
