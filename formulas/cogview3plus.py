r"""CogView3-Plus block: diffusers ``models/transformers/transformer_cogview3plus.py`` ``CogView3PlusTransformerBlock``
(lines 39-128) with ``CogVideoXAttnProcessor2_0``.

One set of weights for both streams: ``norm1`` (``CogView3PlusAdaLayerNormZeroTextImage``, normalization.py:403-452:
``linear(silu(emb))`` to 12 modulation vectors, LayerNorms without affine ``norm_x`` on the N image and ``norm_c`` on
the T text tokens), ``attn1`` (``Attention`` with biases: q/k/v and ``to_out.0`` over the concatenated [text, image]
sequence of S = T + N tokens, per-head LayerNorms without affine ``norm_q``/``norm_k``), ``norm2``/``norm2_context``
(LayerNorms without affine) and one ``ff`` (``FeedForward``, tanh-GELU, 4× width) on the S tokens at once.

Symbols: :math:`d = h d_h` width, :math:`d_t` ``time_embed_dim``, :math:`S = T + N`.

.. math::

   \mathrm{MACs} = \underbrace{12 d\,d_t}_{\text{norm1.linear}}
       + \underbrace{4 S d^2}_{\text{q, k, v, out}}
       + \underbrace{2 h S^2 d_h}_{\text{attention}}
       + \underbrace{8 S d^2}_{\text{ff}}

No rotary embedding: the image tokens get a sin-cos table added in ``patch_embed`` (parameter-free).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module, feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cogview3plus_block")


def cogview3plus_block(*, dim: int, heads: int, head_dim: int, time_dim: int, image_tokens: Any,
                       text_tokens: Any) -> Node:
    """``CogView3PlusTransformerBlock`` on ``image_tokens`` + ``text_tokens`` (see the module doc)."""
    n, t = image_tokens, text_tokens
    s = n + t
    attn = attention_module("attn1", tokens=s, dim=dim, heads=heads, head_dim=head_dim)
    # Attention(qk_norm="layer_norm", elementwise_affine=False): nn.LayerNorm q/k norms without parameters
    attn = replace(attn, cost=attn.cost + ops.layer_norm(s * heads, head_dim, affine=False) * 2)
    return Node("block", children=(
        Node("norm1", children=(
            Node("linear", ops.activation(time_dim) + ops.linear(1, time_dim, 12 * dim)),
            Node("norm_x", ops.layer_norm(n, dim, affine=False)),
            Node("norm_c", ops.layer_norm(t, dim, affine=False)),
        )),
        attn,
        Node("norm2", ops.layer_norm(n, dim, affine=False)),
        Node("norm2_context", ops.layer_norm(t, dim, affine=False)),
        feed_forward("ff", s, dim),
    ), formula="cogview3plus_block")
