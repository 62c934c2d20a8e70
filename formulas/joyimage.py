r"""JoyImage-Edit's double-stream block (diffusers ``models/transformers/transformer_joyimage.py``, 0.42.1):
``JoyImageTransformerBlock`` (:243-330) with ``JoyImageAttention`` / ``JoyImageAttnProcessor`` (:89-240).

Symbols: :math:`n` image tokens, :math:`m` text tokens, width :math:`d`, :math:`h` heads of :math:`d_h = d/h`
(:math:`d_i = h d_h`), MLP width :math:`f = \lfloor r d \rfloor` (``mlp_width_ratio`` :math:`r`).

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 (n + m) d\,d_i}_{\text{qkv, proj}} + \underbrace{2 h (n+m)^2 d_h}_{\text{joint SDPA}}
     + \underbrace{2 (n + m) d f}_{\text{img\_mlp, txt\_mlp}}

Each stream has a fused ``*_attn_qkv`` (d → 3·d_i, bias), per-head ``nn.RMSNorm`` q/k norms, ``*_attn_proj``
(d_i → d, bias), a GELU(tanh) ``FeedForward`` with bias, two ``FP32LayerNorm`` without affine, and a Wan-style
modulation table (``JoyImageModulate``: a 6 × d parameter added to the timestep projection, no matmul). The streams
attend jointly (image, then text). RoPE (rotate-half products) is elementwise.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("joyimage_block")


def joyimage_attention(name: str, *, tokens: Any, text_tokens: Any, dim: int, heads: int, head_dim: int) -> Node:
    """``JoyImageAttention`` (:181-240): per stream a fused qkv, the per-head RMSNorms (q and k), SDPA over the
    ``tokens + text_tokens`` joint sequence, the output projection."""
    inner = heads * head_dim
    cost = (ops.rms_norm(tokens * heads, head_dim) * 2 + ops.rms_norm(text_tokens * heads, head_dim) * 2
            + ops.attention(tokens + text_tokens, tokens + text_tokens, heads, head_dim))
    return Node(name, cost, (
        Node("img_attn_qkv", ops.linear(tokens, dim, 3 * inner)),
        Node("img_attn_proj", ops.linear(tokens, inner, dim)),
        Node("txt_attn_qkv", ops.linear(text_tokens, dim, 3 * inner)),
        Node("txt_attn_proj", ops.linear(text_tokens, inner, dim)),
    ), formula="attention")


def joyimage_block(*, tokens: Any, text_tokens: Any, dim: int, heads: int, mlp_width: int) -> Node:
    """One ``JoyImageTransformerBlock`` (:243-330) on ``tokens`` image and ``text_tokens`` text tokens."""
    head_dim = dim // heads
    children = []
    for stream, n in (("img", tokens), ("txt", text_tokens)):
        norm = ops.layer_norm(n, dim, affine=False, thop_rule=False)  # FP32LayerNorm: a subclass thop misses
        children += [
            Node(f"{stream}_mod", ops.parameters(6 * dim)),
            Node(f"{stream}_norm1", norm),
            Node(f"{stream}_norm2", norm),
            feed_forward(f"{stream}_mlp", n, dim, inner=mlp_width),
        ]
    children.append(joyimage_attention("attn", tokens=tokens, text_tokens=text_tokens, dim=dim, heads=heads,
                                       head_dim=head_dim))
    return Node("block", children=tuple(children), formula="joyimage_block")
