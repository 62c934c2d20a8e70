r"""Krea 2's blocks: gated grouped-query attention, SwiGLU MLPs, a text-fusion stage and the single-stream block.

Mirrors diffusers ``models/transformers/transformer_krea2.py`` (diffusers 0.42.1): ``Krea2Attention`` with
``Krea2AttnProcessor`` (:54-144), ``Krea2SwiGLU`` (:147-157), ``Krea2TextFusionBlock`` (:160-173),
``Krea2TextFusion`` (:176-222) and ``Krea2TransformerBlock`` (:225-255).

Symbols: :math:`n` tokens of one attention sequence, width :math:`d = h d_h`, key/value heads :math:`h_{kv}`,
MLP width :math:`d_f`.

.. math::

   \mathrm{MACs}_\text{attention} = \underbrace{n d (2 d + 2 h_{kv} d_h)}_{\text{q, out; k, v}}
     + \underbrace{n d^2}_{\text{to\_gate}} + \underbrace{2 h n^2 d_h}_{\text{QK}^\top,\ \text{AV}}
   \qquad \mathrm{MACs}_\text{SwiGLU} = 3 n d d_f

Derivation: q/k/v and the sigmoid output gate are bias-free linears on the same normed tokens; ``repeat_interleave``
expands the key/value heads before SDPA, so the two attention matmuls run over all :math:`h` heads. All norms are
``Krea2RMSNorm`` (a zero-centred gain: ``F.rms_norm`` with ``weight + 1``, elementwise). The text fusion runs two
blocks across the ``L_t`` tapped text-encoder layers of each text token (:math:`T` sequences of length
:math:`L_t`: :math:`2 h T L_t^2 d_h` attention MACs), a bias-free ``projector`` (:math:`L_t` → 1, on
:math:`T d` vectors), then two blocks across the :math:`T` tokens.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("krea2_attention", "krea2_swiglu", "krea2_block", "krea2_text_fusion_block")


def krea2_attention(name: str, *, sequences: Any, length: Any, dim: int, heads: int, kv_heads: int) -> Node:
    """``Krea2Attention`` on ``sequences`` independent sequences of ``length`` tokens each."""
    head_dim = dim // heads
    n = sequences * length
    return Node(name, ops.attention(length, length, heads, head_dim) * sequences, (
        Node("to_q", ops.linear(n, dim, heads * head_dim, bias=False)),
        Node("to_k", ops.linear(n, dim, kv_heads * head_dim, bias=False)),
        Node("to_v", ops.linear(n, dim, kv_heads * head_dim, bias=False)),
        Node("to_gate", ops.linear(n, dim, dim, bias=False) + ops.activation(n * dim) * 2),  # sigmoid, product
        Node("norm_q", ops.rms_norm(n * heads, head_dim)),
        Node("norm_k", ops.rms_norm(n * kv_heads, head_dim)),
        Node("to_out", children=(Node("0", ops.linear(n, dim, dim, bias=False)),)),
    ), formula="krea2_attention")


def krea2_swiglu(name: str, tokens: Any, dim: int, d_ff: int) -> Node:
    """``Krea2SwiGLU``: ``down(silu(gate(x)) · up(x))``, bias-free."""
    return Node(name, ops.activation(tokens * d_ff) * 2, (
        Node("gate", ops.linear(tokens, dim, d_ff, bias=False)),
        Node("up", ops.linear(tokens, dim, d_ff, bias=False)),
        Node("down", ops.linear(tokens, d_ff, dim, bias=False)),
    ), formula="krea2_swiglu")


def krea2_text_fusion_block(*, sequences: Any, length: Any, dim: int, heads: int, kv_heads: int, d_ff: int) -> Node:
    """``Krea2TextFusionBlock`` (pre-norm attention and SwiGLU, no modulation) on ``sequences × length`` tokens."""
    n = sequences * length
    return Node("block", children=(
        Node("norm1", ops.rms_norm(n, dim)),
        Node("norm2", ops.rms_norm(n, dim)),
        krea2_attention("attn", sequences=sequences, length=length, dim=dim, heads=heads, kv_heads=kv_heads),
        krea2_swiglu("ff", n, dim, d_ff),
    ), formula="krea2_text_fusion_block")


def krea2_block(*, tokens: Any, dim: int, heads: int, kv_heads: int, d_ff: int) -> Node:
    """``Krea2TransformerBlock`` on ``tokens`` = text + image tokens: a 6·d ``scale_shift_table`` added to the
    model's shared modulation (no linear of its own), ``norm1`` → attention, ``norm2`` → SwiGLU."""
    return Node("block", ops.parameters(6 * dim), (
        Node("norm1", ops.rms_norm(tokens, dim)),
        Node("norm2", ops.rms_norm(tokens, dim)),
        krea2_attention("attn", sequences=1, length=tokens, dim=dim, heads=heads, kv_heads=kv_heads),
        krea2_swiglu("ff", tokens, dim, d_ff),
    ), formula="krea2_block")
