r"""CogView4 block: diffusers ``models/transformers/transformer_cogview4.py`` ``CogView4TransformerBlock``
with ``CogView4AttnProcessor``.

One set of weights for both streams: ``norm1`` (``CogView4AdaLayerNormZero``: LayerNorms without affine
on the N image and the L text tokens, and one ``linear`` of the timestep embedding to 12 modulation
vectors), ``attn1`` over the concatenated [text, image] sequence of S = L + N tokens (q/k/v and
``to_out.0`` with bias, per-head LayerNorms without affine on q and k, rotary positions on the image
part), ``norm2``/``norm2_context`` (LayerNorms without affine) and one ``ff`` (``FeedForward``,
tanh-GELU, 4× width) applied to the image tokens and then to the text tokens.

Symbols: :math:`d = h d_h` width, :math:`d_t` ``time_embed_dim``, :math:`S = L + N`.

.. math::

   \mathrm{MACs} = \underbrace{12 d\,d_t}_{\text{norm1.linear}}
       + \underbrace{4 S d^2}_{\text{q, k, v, out}}
       + \underbrace{2 h S^2 d_h}_{\text{attention}}
       + \underbrace{8 S d^2}_{\text{ff}}

``CogView4Pipeline`` passes no attention mask, so the processor's mask product
(``mix_attn_mask @ mix_attn_mask.transpose(1, 2)``) does not run.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cogview4_block")


@lru_cache(maxsize=256)
def cogview4_block(*, dim: int, heads: int, head_dim: int, time_dim: int, image_tokens: Any, text_tokens: Any) -> Node:
    """``CogView4TransformerBlock`` on ``image_tokens`` + ``text_tokens`` (see the module doc)."""
    n, t = image_tokens, text_tokens
    s = n + t
    inner = heads * head_dim
    norm1 = Node("norm1", children=(
        Node("norm", ops.layer_norm(n, dim, affine=False)),
        Node("norm_context", ops.layer_norm(t, dim, affine=False)),
        Node("linear", ops.linear(1, time_dim, 12 * dim)),
    ))
    attn1 = Node("attn1", ops.linear(s, dim, inner) * 3 + ops.layer_norm(s * heads, head_dim, affine=False) * 2
                 + ops.attention(s, s, heads, head_dim) + ops.linear(s, inner, dim), formula="attention")
    return Node("block", children=(
        norm1, attn1,
        Node("norm2", ops.layer_norm(n, dim, affine=False)),
        Node("norm2_context", ops.layer_norm(t, dim, affine=False)),
        feed_forward("ff", s, dim),  # the same module on the image tokens, then on the text tokens
    ), formula="cogview4_block")
