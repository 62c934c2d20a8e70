r"""Cross-attention transformer block: self-attention, cross-attention to the text, feed-forward,
each pre-LayerNormed. Mirrors diffusers ``attention.BasicTransformerBlock`` with
``norm_type="layer_norm"`` (the blocks inside every UNet ``Transformer2DModel``).

Symbols: :math:`n` image tokens of width :math:`d`, :math:`m` text tokens of width :math:`d_c`,
:math:`h` heads of width :math:`d_h` (:math:`d_i = h d_h`), MLP width :math:`f` (``4d``), and
:math:`g = 2` for the default GEGLU feed-forward (its projection emits value and gate), else 1.

.. math::

   \mathrm{MACs} = \underbrace{4 n d d_i + 2 h n^2 d_h}_{\text{attn1}}
                 + \underbrace{2 n d d_i + 2 m d_c d_i + 2 h n m d_h}_{\text{attn2}}
                 + \underbrace{(g + 1)\, n d f}_{\text{ff}}

Derivation: ``attn1`` projects q, k, v and the output over the n tokens and attends n × n;
``attn2`` projects q and the output over the n tokens but k and v over the m text vectors, and
attends n × m. The q/k/v projections have no bias unless ``attention_bias``.
"""

from __future__ import annotations

from typing import Any

from flopcalc.cost import Node
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module, cross_attention, feed_forward


def cross_attention_block(
    *,
    dim: int,
    heads: int,
    head_dim: int,
    tokens: Any,
    context_tokens: Any,
    context_dim: int | None,
    activation: str = "geglu",
    attention_bias: bool = False,
    ff_inner_dim: int | None = None,
    norm_affine: bool = True,
) -> Node:
    if activation not in ("geglu", "gelu", "gelu-approximate"):
        raise ValueError(f"activation_fn {activation!r} is not supported")
    children = [
        Node("norm1", ops.layer_norm(tokens, dim, affine=norm_affine)),
        attention_module("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, bias=attention_bias),
    ]
    if context_dim is not None:
        children += [
            Node("norm2", ops.layer_norm(tokens, dim, affine=norm_affine)),
            cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=context_tokens, context_dim=context_dim,
                            heads=heads, head_dim=head_dim, bias=attention_bias),
        ]
    children += [
        Node("norm3", ops.layer_norm(tokens, dim, affine=norm_affine)),
        feed_forward("ff", tokens, dim, inner=ff_inner_dim, gated=activation == "geglu"),
    ]
    return Node("block", children=tuple(children), formula="cross_attention_block")
