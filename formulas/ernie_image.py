r"""ERNIE-Image's single-stream block: one shared adaptive modulation, RMS-normed attention and a GELU-gated MLP.

Mirrors diffusers ``models/transformers/transformer_ernie_image.py`` (diffusers 0.42.1):
``ErnieImageSharedAdaLNBlock`` (:242-279), ``ErnieImageAttention`` with ``ErnieImageSingleStreamAttnProcessor``
(:83-227) and ``ErnieImageFeedForward`` (:230-239).

Symbols: :math:`L = N + T` tokens (image patches, then text), width :math:`d = h d_h`, MLP width :math:`d_f`
(``ffn_hidden_size``).

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 L d^2}_{\text{q, k, v, out}} + \underbrace{2 h L^2 d_h}_{\text{attention}}
     + \underbrace{3 L d d_f}_{\text{gate, up, linear\_fc2}}

Derivation: the block's two RMSNorms (``adaLN_sa_ln``, ``adaLN_mlp_ln``, diffusers ``RMSNorm`` with a gain) are
modulated by six vectors the *model* computes once (``adaLN_modulation``, shared by every block), so the block
itself has no modulation linear; the attention is bias-free with per-head ``nn.RMSNorm`` on q and k; the MLP is
``linear_fc2(up_proj(x) · gelu(gate_proj(x)))``, bias-free. Padded text tokens are masked, not removed: they count.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("ernie_image_block", "gelu_gated_mlp")


def gelu_gated_mlp(name: str, tokens: Any, dim: int, d_ff: int) -> Node:
    r"""``ErnieImageFeedForward``: ``gate_proj`` and ``up_proj`` (d → d_f), ``linear_fc2`` (d_f → d), bias-free:
    :math:`3 n d d_f` MACs."""
    return Node(name, ops.activation(tokens * d_ff) * 2, (
        Node("gate_proj", ops.linear(tokens, dim, d_ff, bias=False)),
        Node("up_proj", ops.linear(tokens, dim, d_ff, bias=False)),
        Node("linear_fc2", ops.linear(tokens, d_ff, dim, bias=False)),
    ), formula="gelu_gated_mlp")


def ernie_image_block(*, tokens: Any, dim: int, heads: int, d_ff: int) -> Node:
    """One ``ErnieImageSharedAdaLNBlock`` on ``tokens`` tokens."""
    norm = ops.rms_norm(tokens, dim)
    return Node("block", children=(
        Node("adaLN_sa_ln", norm),
        attention_module("self_attention", tokens=tokens, dim=dim, heads=heads, head_dim=dim // heads,
                         qk_norm="rms_norm", bias=False, out_bias=False),
        Node("adaLN_mlp_ln", norm),
        gelu_gated_mlp("mlp", tokens, dim, d_ff),
    ), formula="ernie_image_block")
