r"""Kaplan transformer layer: the pre-norm encoder layer of the text encoders
(CLIP text tower: transformers ``models/clip/modeling_clip.py`` ``CLIPEncoderLayer``;
T5 encoder: ``models/t5/modeling_t5.py`` ``T5Block``).

Symbols: :math:`n` tokens, :math:`d` model width, :math:`d_a = h d_h` attention width,
:math:`d_f` MLP width, :math:`g = 2` for a gated MLP (T5 v1.1 ``gated-gelu``) else 1.

Exact forward MACs of one layer (bidirectional, as the counter measures it):

.. math::

   \mathrm{MACs} = \underbrace{4 n d\, d_a}_{q,k,v,o}
                 + \underbrace{2 h n^2 d_h}_{\text{QK}^\top,\ \text{AV}}
                 + \underbrace{(g + 1)\, n d\, d_f}_{\text{MLP}}

Kaplan et al. (2020, "Scaling Laws for Neural Language Models", Table 1) approximate the
forward pass per token as :math:`C_\text{fwd} \approx 2N + 2 n_\text{layer} n_\text{ctx} d_\text{attn}`
FLOPs with :math:`N` the non-embedding parameters. Per token the exact count is
:math:`2N_\text{w} + 4 n_\text{layer} n_\text{ctx} d_\text{attn}` FLOPs (:math:`N_\text{w}` the
weights of the matmuls, i.e. :math:`N` without biases and norm gains): Kaplan counts only one of
the two attention matmuls (QKᵀ, the "context" term), so for a bidirectional encoder the
approximation falls short by :math:`2 n_\text{layer} n_\text{ctx} d_\text{attn}` per token, and
counts biases and norm gains as if they were multiplied. :func:`kaplan_forward_flops` gives the
approximation; ``flopcalc kaplan MODEL`` prints it beside the exact count.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost
from flopcalc.formulas import ops


def self_attention(tokens: Any, d_model: int, heads: int, head_dim: int, *, bias: bool) -> Cost:
    """q, k, v and output projections and the attention itself (no norm)."""
    inner = heads * head_dim
    return (
        ops.linear(tokens, d_model, inner, bias=bias) * 3
        + ops.attention(tokens, tokens, heads, head_dim)
        + ops.linear(tokens, inner, d_model, bias=bias)
    )


def mlp(tokens: Any, d_model: int, d_ff: int, *, bias: bool, gated: bool) -> Cost:
    """``fc1 → act → fc2`` (CLIP) or ``(act(wi_0) ⊙ wi_1) → wo`` (T5 gated)."""
    return mlp_in(tokens, d_model, d_ff, bias=bias, gated=gated) + ops.linear(tokens, d_ff, d_model, bias=bias)


def mlp_in(tokens: Any, d_model: int, d_ff: int, *, bias: bool, gated: bool) -> Cost:
    """The MLP up to its output projection: ``fc1 → act`` or ``act(wi_0) ⊙ wi_1``."""
    up = ops.linear(tokens, d_model, d_ff, bias=bias) * (2 if gated else 1)
    gate = ops.activation(tokens * d_ff) * (2 if gated else 1)  # the activation, and the gating product
    return up + gate


def kaplan_forward_flops(non_embedding_params: Any, n_layer: int, n_ctx: Any, d_attn: int) -> Any:
    r"""Kaplan's approximation of the forward FLOPs of a whole ``n_ctx``-token sequence:
    :math:`n_\text{ctx}\,(2N + 2 n_\text{layer} n_\text{ctx} d_\text{attn})`."""
    return n_ctx * (2 * non_embedding_params + 2 * n_layer * n_ctx * d_attn)
