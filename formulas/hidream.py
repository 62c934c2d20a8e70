r"""HiDream-I1's sparse DiT blocks: dual-stream and single-stream blocks whose image feed-forward is a
mixture of experts.

Mirrors diffusers 0.42.1 ``models/transformers/transformer_hidream_image.py``:
``HiDreamImageFeedForwardSwiGLU`` (:20-40), ``HiDreamAttention`` / ``HiDreamAttnProcessor`` (:137-270),
``MoEGate`` (:274-338), ``MOEFeedForwardSwiGLU`` (:342-404), ``HiDreamImageSingleTransformerBlock``
(:418-484), ``HiDreamImageTransformerBlock`` (:487-577), ``HiDreamImageOutEmbed`` (:64-75).

Symbols: width :math:`d = h d_h`; SwiGLU width :math:`f(x) = 256\lceil \lfloor 2x/3 \rfloor / 256\rceil`
(``multiple_of`` 256), :math:`f_r = f(4d)` for a routed expert and the text stream's feed-forward,
:math:`f_s = f(2d)` for the shared expert; :math:`E` routed experts of which :math:`k` run per token.

Dual-stream block on :math:`n` image and :math:`m` text tokens:

.. math::

   \mathrm{MACs} = \underbrace{12 d^2}_{\text{adaLN}} + \underbrace{4 (n + m) d^2}_{\text{q, k, v, out (and \_t)}}
     + \underbrace{2 h (n+m)^2 d_h}_{\text{QK}^\top,\ \text{AV}}
     + \underbrace{\mathrm{MoE}(n)}_{\text{ff\_i}} + \underbrace{3 m d f_r}_{\text{ff\_t}}

Single-stream block on :math:`s` tokens: :math:`6 d^2 + 4 s d^2 + 2 h s^2 d_h + \mathrm{MoE}(s)`, with

.. math::

   \mathrm{MoE}(n) = \underbrace{n d E}_{\text{gate}} + \underbrace{3 k n d f_r}_{\text{routed experts}}
     + \underbrace{3 n d f_s}_{\text{shared expert}}

The routed term does not depend on the routing: in eval ``moe_infer`` runs each expert once on the rows
routed to it, every expert has the same shape, and the :math:`k n` (token, expert) pairs are split among
them, so the experts' matmuls sum to :math:`k n` rows of one expert. Which expert gets how many rows is
data-dependent: the tree gives ``experts`` their sum (and all :math:`E` experts' parameters), not a split.
``E = 0`` builds a plain SwiGLU ``ff_i`` of width :math:`f_r`. The gate is ``F.linear`` (no thop hook);
its weight is a bare ``nn.Parameter``; its softmax and top-k, the routing weights' products and
``scatter_reduce_`` are not matmuls. The q/k
``nn.RMSNorm`` span the whole inner width; the rotary products and the padding mask on the keys are
elementwise.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("hidream_dual_stream_block", "hidream_single_stream_block")

#: ``HiDreamImageFeedForwardSwiGLU(multiple_of=256)``.
MULTIPLE_OF = 256


def swiglu_width(hidden_dim: int) -> int:
    """``HiDreamImageFeedForwardSwiGLU.__init__`` (:29-33): ``int(2·hidden/3)`` rounded up to 256."""
    hidden = 2 * hidden_dim // 3
    return MULTIPLE_OF * ((hidden + MULTIPLE_OF - 1) // MULTIPLE_OF)


def swiglu(name: str, tokens: Any, dim: int, hidden_dim: int) -> Node:
    r"""``w2(silu(w1(x)) · w3(x))``, bias-free: :math:`3 n d f` MACs, ``f = swiglu_width(hidden_dim)``."""
    f = swiglu_width(hidden_dim)
    up = ops.linear(tokens, dim, f, bias=False)
    return Node(name, ops.activation(tokens * f) * 2, (
        Node("w1", up), Node("w2", ops.linear(tokens, f, dim, bias=False)), Node("w3", up),
    ), formula="swiglu")


def expert_cost(rows: Any, dim: int) -> Cost:
    """One routed expert (``HiDreamImageFeedForwardSwiGLU(dim, 4·dim)``) on ``rows`` rows."""
    f = swiglu_width(4 * dim)
    return (ops.linear(rows, dim, f, bias=False) * 2 + ops.linear(rows, f, dim, bias=False)
            + ops.activation(rows * f) * 2)


def expert_params(dim: int) -> int:
    """Parameters of one routed expert: :math:`3 d f_r`."""
    return expert_cost(0, dim).params


def moe_feed_forward(name: str, tokens: Any, dim: int, routed: int, active: int) -> Node:
    r"""``MOEFeedForwardSwiGLU`` in eval on ``tokens`` tokens: the gate (``F.linear`` d → E, softmax,
    top-k), the routed experts (``k·tokens`` rows of one expert in all, see the module doc; the
    parameters of all E, of which the E − k a token's gate does not pick are its ``idle_params``), the
    shared expert (``hidden_dim // 2``) on every token. ``routed`` 0: a plain
    SwiGLU of width ``f(4d)`` (the block's ``num_routed_experts == 0`` branch)."""
    if routed == 0:
        return swiglu(name, tokens, dim, 4 * dim)
    # a bare weight used by F.linear (no nn.Linear: no thop hook, nothing a weight quantizer converts)
    gate = ops.matmul(tokens, dim, routed) + ops.parameters(routed * dim) + Cost(
        elementwise=ops.SOFTMAX_OPS * tokens * routed)
    experts = (expert_cost(active * tokens, dim) + expert_cost(0, dim) * (routed - 1)
               + Cost(idle_params=(routed - active) * expert_params(dim)))
    return Node(name, children=(
        swiglu("shared_experts", tokens, dim, 4 * dim // 2),
        Node("experts", experts, formula="routed_experts"),
        Node("gate", gate),
    ), formula="moe_feed_forward")


def hidream_attention(name: str, *, tokens: Any, dim: int, heads: int, head_dim: int,
                      text_tokens: Any = None) -> Node:
    r"""``HiDreamAttention`` with ``HiDreamAttnProcessor``: ``to_q``/``to_k``/``to_v``/``to_out`` (with
    bias) and the inner-width ``q_rms_norm``/``k_rms_norm`` on the ``tokens`` image tokens; a dual-stream
    one (``text_tokens`` given) has the ``_t`` twins on the text tokens and attends over both:
    :math:`4 (n+m) d\,d_i + 2 h (n+m)^2 d_h` MACs (:math:`d_i = h d_h`)."""
    inner = heads * head_dim
    streams = [("", tokens)] + ([("_t", text_tokens)] if text_tokens is not None else [])
    children = []
    for suffix, n in streams:
        proj = ops.linear(n, dim, inner)
        norm = ops.rms_norm(n, inner)
        children += [Node(f"to_q{suffix}", proj), Node(f"to_k{suffix}", ops.linear(n, inner, inner)),
                     Node(f"to_v{suffix}", ops.linear(n, inner, inner)), Node(f"to_out{suffix}", ops.linear(n, inner, dim)),
                     Node(f"q_rms_norm{suffix}", norm), Node(f"k_rms_norm{suffix}", norm)]
    seq = tokens + (text_tokens if text_tokens is not None else 0)
    return Node(name, ops.attention(seq, seq, heads, head_dim), tuple(children), formula="attention")


def _modulation(dim: int, vectors: int) -> Node:
    """``adaLN_modulation``: ``nn.Sequential(SiLU, Linear(d, vectors·d))`` on the one temb vector."""
    return Node("adaLN_modulation", children=(
        Node("0", ops.activation(dim)), Node("1", ops.linear(1, dim, vectors * dim))))


def dual_stream_block(*, tokens: Any, text_tokens: Any, dim: int, heads: int, head_dim: int, routed: int,
                      active: int) -> Node:
    """``HiDreamBlock(HiDreamImageTransformerBlock)``: ``block`` with the 12-vector modulation, four
    LayerNorms without affine, the joint attention, the MoE ``ff_i`` on the image tokens and a SwiGLU
    ``ff_t`` (width ``f(4d)``) on the text tokens."""
    norm_i = ops.layer_norm(tokens, dim, affine=False)
    norm_t = ops.layer_norm(text_tokens, dim, affine=False)
    block = Node("block", children=(
        _modulation(dim, 12),
        Node("norm1_i", norm_i), Node("norm1_t", norm_t),
        hidream_attention("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, text_tokens=text_tokens),
        Node("norm3_i", norm_i),
        moe_feed_forward("ff_i", tokens, dim, routed, active),
        Node("norm3_t", norm_t),
        swiglu("ff_t", text_tokens, dim, 4 * dim),
    ), formula="hidream_dual_stream_block")
    return Node("block", children=(block,))


def single_stream_block(*, tokens: Any, dim: int, heads: int, head_dim: int, routed: int, active: int) -> Node:
    """``HiDreamBlock(HiDreamImageSingleTransformerBlock)``: the 6-vector modulation, two LayerNorms
    without affine, self-attention and the MoE ``ff_i`` on all ``tokens``."""
    norm = ops.layer_norm(tokens, dim, affine=False)
    block = Node("block", children=(
        _modulation(dim, 6),
        Node("norm1_i", norm),
        hidream_attention("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim),
        Node("norm3_i", norm),
        moe_feed_forward("ff_i", tokens, dim, routed, active),
    ), formula="hidream_single_stream_block")
    return Node("block", children=(block,))


def out_embed(name: str, *, tokens: Any, dim: int, out_features: int) -> Node:
    """``HiDreamImageOutEmbed``: ``adaLN_modulation`` (2 vectors), ``norm_final`` (no affine), ``linear``
    d → p²·C on the image tokens."""
    return Node(name, children=(
        Node("norm_final", ops.layer_norm(tokens, dim, affine=False)),
        Node("linear", ops.linear(tokens, dim, out_features)),
        _modulation(dim, 2),
    ))

