r"""Z-Image's single-stream DiT block and the sequence padding it runs on.

Mirrors diffusers ``transformer_z_image.ZImageTransformerBlock`` (the noise refiner, the context
refiner without modulation, and the main layers) and ``FinalLayer``.

Symbols: :math:`n` tokens, width :math:`d = h d_h`, feed-forward width :math:`d_f` (``int(d/3·8)``),
modulation input width :math:`a` (``min(d, 256)``).

.. math::

   \mathrm{MACs}_\text{torch} = \underbrace{4 n d^2}_{\text{q, k, v, out}}
     + \underbrace{2 h n^2 d_h}_{\text{QK}^\top,\ \text{AV}}
     + \underbrace{3 n d d_f}_{\text{w1, w3, w2}}
     + \underbrace{4 a d}_{\text{adaLN, when modulated}}

Derivation: ``attention`` is a bias-free diffusers ``Attention`` (``to_q``/``to_k``/``to_v``/``to_out.0``,
per-head ``norm_q``/``norm_k`` RMSNorms; ``n_kv_heads`` is not used: every head has its own keys),
``feed_forward`` a bias-free SwiGLU (``w2(silu(w1(x)) · w3(x))``), four RMSNorms (``attention_norm1/2``,
``ffn_norm1/2``); a modulated block maps the timestep embedding to 4 vectors (``adaLN_modulation.0``,
one vector per sample). Each sequence (image tokens, caption tokens) is padded to a multiple of
``SEQ_MULTI_OF`` = 32 tokens (``_pad_with_ids``) before it is embedded, and the padding runs in full.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("z_image_block", "z_image_control_block")

#: ``transformer_z_image.SEQ_MULTI_OF``: every sequence is padded to a multiple of this.
SEQ_MULTI_OF = 32
#: ``transformer_z_image.ADALN_EMBED_DIM``: the timestep embedding's width is ``min(dim, 256)``.
ADALN_EMBED_DIM = 256


def padded_length(tokens: Any) -> Any:
    r"""``len + (-len) % 32`` (``_pad_with_ids``): :math:`32 \lceil n / 32 \rceil`; a ceiling
    expression for a symbolic ``tokens``."""
    if isinstance(tokens, int):
        return tokens + (-tokens) % SEQ_MULTI_OF
    import sympy as sp  # symbolic path only

    return SEQ_MULTI_OF * sp.ceiling(tokens / SEQ_MULTI_OF)


def feed_forward_width(dim: int) -> int:
    """``ZImageTransformerBlock``: ``FeedForward(dim, hidden_dim=int(dim / 3 * 8))``."""
    return int(dim / 3 * 8)


def swiglu_feed_forward(name: str, tokens: Any, dim: int, d_ff: int) -> Node:
    r"""``FeedForward`` of transformer_z_image.py:171-183: ``w2(silu(w1(x)) · w3(x))``, bias-free, each
    projection a child with the real module's name: :math:`\mathrm{MACs} = 3 n d d_f`."""
    return Node(name, ops.activation(tokens * d_ff) * 2, (  # the SiLU, and the gating product
        Node("w1", ops.linear(tokens, dim, d_ff, bias=False)),
        Node("w2", ops.linear(tokens, d_ff, dim, bias=False)),
        Node("w3", ops.linear(tokens, dim, d_ff, bias=False)),
    ), formula="gated_mlp")


def z_image_block(*, tokens: Any, dim: int, heads: int, qk_norm: bool, modulation: bool) -> Node:
    """One ``ZImageTransformerBlock`` on ``tokens`` tokens (``modulation``: the noise refiner and the
    main layers; the context refiner has none)."""
    head_dim = dim // heads
    norm = ops.rms_norm(tokens, dim)
    children = [
        attention_module("attention", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim,
                         qk_norm="rms_norm" if qk_norm else None, bias=False, out_bias=False),
        swiglu_feed_forward("feed_forward", tokens, dim, feed_forward_width(dim)),
        Node("attention_norm1", norm),
        Node("ffn_norm1", norm),
        Node("attention_norm2", norm),
        Node("ffn_norm2", norm),
    ]
    if modulation:
        children.append(Node("adaLN_modulation", ops.linear(1, min(dim, ADALN_EMBED_DIM), 4 * dim)))
    return Node("layer", children=tuple(children), formula="z_image_block")


def z_image_control_block(*, tokens: Any, dim: int, heads: int, qk_norm: bool, modulation: bool = True,
                          before: bool) -> Node:
    r"""One ``ZImageControlTransformerBlock`` (controlnet_z_image.py:322-428) on the ``tokens`` control tokens: a
    ``ZImageTransformerBlock`` (:func:`z_image_block`) on the control stream ``c``, then ``after_proj`` (d → d with
    bias: the hint the transformer adds); the block with ``block_id`` 0 first mixes in the stream it controls
    (``c = before_proj(c) + x``, d → d with bias). :math:`\mathrm{MACs} = \mathrm{block} + (1 + b) n d^2`."""
    block = z_image_block(tokens=tokens, dim=dim, heads=heads, qk_norm=qk_norm, modulation=modulation)
    projections = ((Node("before_proj", ops.linear(tokens, dim, dim)),) if before else ()) + (
        Node("after_proj", ops.linear(tokens, dim, dim)),)
    return Node("layer", children=block.children + projections, formula="z_image_control_block")


def z_image_final_layer(name: str, *, tokens: Any, dim: int, out_channels: int, runs: bool = True) -> Node:
    """``FinalLayer``: ``norm_final`` (LayerNorm, no affine), ``linear`` d → out on every token,
    ``adaLN_modulation`` (SiLU, then ``min(d, 256)`` → d on the timestep embedding). ``runs`` False:
    an entry of ``all_final_layer`` the call does not use (parameters only)."""
    adaln, vectors = min(dim, ADALN_EMBED_DIM), 1 if runs else 0
    tokens = tokens if runs else 0
    return Node(name, children=(
        Node("norm_final", ops.layer_norm(tokens, dim, affine=False)),
        Node("linear", ops.linear(tokens, dim, out_channels)),
        Node("adaLN_modulation", ops.activation(vectors * adaln) + ops.linear(vectors, adaln, dim)),
    ), formula="z_image_final_layer")
