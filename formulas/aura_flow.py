r"""AuraFlow blocks: diffusers ``models/transformers/auraflow_transformer_2d.py``
(``AuraFlowJointTransformerBlock``, ``AuraFlowSingleTransformerBlock``, ``AuraFlowFeedForward``) with
``AuraFlowAttnProcessor2_0`` (``models/attention_processor.py``).

Symbols: :math:`d = h d_h` width, :math:`N` image tokens, :math:`T = 8 + L` text tokens (the 8 register
tokens prepended to the :math:`L` caption tokens), :math:`f` the feed-forward width
``find_multiple(int(2·4d/3), 256)`` (8192 for d = 3072). Every linear is bias-free, the norms are
``FP32LayerNorm`` without affine (q/k norms per head included), the modulations come from a
bias-free ``AdaLayerNormZero`` on the timestep embedding.

.. math::

   \mathrm{MACs}_\text{joint} = \underbrace{12 d^2}_{\text{norm1, norm1\_context}}
       + \underbrace{4 (N + T) d^2}_{\text{q, k, v, out (both streams)}}
       + \underbrace{2 h (N+T)^2 d_h}_{\text{attention}}
       + \underbrace{3 (N + T) d f}_{\text{ff, ff\_context}}

   \mathrm{MACs}_\text{single} = 6 d^2 + 4 (N + T) d^2 + 2 h (N+T)^2 d_h + 3 (N + T) d f

The single blocks run on the concatenated [text, image] sequence with one set of weights.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_zero
from flopcalc.formulas.decoder_layer import gated_mlp
from flopcalc.formulas.transformer_parts import attention_module

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("aura_flow_joint_block", "aura_flow_single_block")

#: ``AuraFlowTransformer2DModel.forward``: register tokens prepended to the caption (``register_tokens``, 1 × 8 × d).
REGISTER_TOKENS = 8
#: ``AuraFlowFeedForward`` rounds its hidden width up to a multiple of this.
FF_MULTIPLE = 256


def feed_forward_width(dim: int) -> int:
    """``AuraFlowFeedForward(dim, 4·dim)``: ``find_multiple(int(2 · 4·dim / 3), 256)``."""
    hidden = int(2 * (4 * dim) / 3)
    return hidden if hidden % FF_MULTIPLE == 0 else hidden + FF_MULTIPLE - hidden % FF_MULTIPLE


@lru_cache(maxsize=256)
def aura_flow_joint_block(*, dim: int, heads: int, head_dim: int, image_tokens: Any, text_tokens: Any) -> Node:
    """``AuraFlowJointTransformerBlock``: ``norm1``/``norm1_context`` (adaLN-Zero), the joint ``attn``
    (``add_{q,k,v}_proj`` and ``to_add_out`` for the text stream), ``norm2``/``ff`` and
    ``norm2_context``/``ff_context``."""
    n, t = image_tokens, text_tokens
    ff = feed_forward_width(dim)
    return Node("block", children=(
        ada_layer_norm_zero("norm1", dim, n, bias=False, fp32_norm=True),
        ada_layer_norm_zero("norm1_context", dim, t, bias=False, fp32_norm=True),
        attention_module("attn", tokens=n, dim=dim, heads=heads, head_dim=head_dim, qk_norm="fp32_layer_norm",
                         context_tokens=t, context_dim=dim, bias=False, context_bias=False, out_bias=False),
        Node("norm2", ops.layer_norm(n, dim, affine=False, thop_rule=False)),
        gated_mlp("ff", n, dim, ff),
        Node("norm2_context", ops.layer_norm(t, dim, affine=False, thop_rule=False)),
        gated_mlp("ff_context", t, dim, ff),
    ), formula="aura_flow_joint_block")


@lru_cache(maxsize=256)
def aura_flow_single_block(*, dim: int, heads: int, head_dim: int, tokens: Any) -> Node:
    """``AuraFlowSingleTransformerBlock`` on the ``tokens`` = T + N concatenated tokens: ``norm1``
    (adaLN-Zero), self-attention ``attn``, ``norm2``, ``ff``."""
    return Node("block", children=(
        ada_layer_norm_zero("norm1", dim, tokens, bias=False, fp32_norm=True),
        attention_module("attn", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, qk_norm="fp32_layer_norm",
                         bias=False, out_bias=False),
        Node("norm2", ops.layer_norm(tokens, dim, affine=False, thop_rule=False)),
        gated_mlp("ff", tokens, dim, feed_forward_width(dim)),
    ), formula="aura_flow_single_block")
