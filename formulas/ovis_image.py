r"""Ovis-Image's blocks: the FLUX.1 double- and single-stream blocks with gated (SwiGLU / SiLU-gated) MLPs.

Mirrors diffusers ``models/transformers/transformer_ovis_image.py`` (diffusers 0.42.1):
``OvisImageTransformerBlock`` (:272-353) and ``OvisImageSingleTransformerBlock`` (:215-268).

Symbols: :math:`d = h d_h` width, :math:`N` image tokens, :math:`T` text tokens, MLP width :math:`4d`.

.. math::

   \mathrm{MACs}_\text{double} = \underbrace{12 d^2}_{\text{adaLN}} + \underbrace{4 (N + T) d^2}_{\text{QKV, out}}
     + \underbrace{2 h (N+T)^2 d_h}_{\text{attention}} + \underbrace{12 (N + T) d^2}_{\text{SwiGLU: } d \to 8d,\ 4d \to d}

   \mathrm{MACs}_\text{single} = \underbrace{3 d^2}_{\text{adaLN}} + \underbrace{3 L d^2}_{\text{QKV}}
     + \underbrace{8 L d^2}_{\text{proj\_mlp: } d \to 8d} + \underbrace{2 h L^2 d_h}_{\text{attention}}
     + \underbrace{5 L d^2}_{\text{proj\_out: } 5d \to d}

Derivation: the double block is FLUX's (``AdaLayerNormZero`` per stream, joint attention with per-head RMSNorms
on q/k of both streams, ``to_out`` and ``to_add_out``), except that each stream's feed-forward is diffusers
``FeedForward(activation_fn="swiglu")``: ``net.0.proj`` d → 2·4d (value and gate), ``net.2`` 4d → d. The single
block's ``proj_mlp`` is d → 2·4d, split into value and gate (``silu(gate) · value``), and ``proj_out`` maps the
attention output and the 4d MLP branch, concatenated, back to d.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import ada_layer_norm_zero
from flopcalc.formulas.transformer_parts import attention_module, feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("ovis_image_double_block", "ovis_image_single_block")

#: ``FeedForward(dim, dim_out=dim, activation_fn="swiglu")``'s default ``mult`` and the single block's ``mlp_ratio``.
MLP_RATIO = 4


def ovis_image_double_block(*, dim: int, heads: int, head_dim: int, image_tokens: Any, text_tokens: Any) -> Node:
    """One ``OvisImageTransformerBlock`` on ``image_tokens`` and ``text_tokens``."""
    n, t = image_tokens, text_tokens
    return Node("block", children=(
        ada_layer_norm_zero("norm1", dim, n),
        ada_layer_norm_zero("norm1_context", dim, t),
        attention_module("attn", tokens=n, dim=dim, heads=heads, head_dim=head_dim, qk_norm="rms_norm",
                         context_tokens=t, context_dim=dim),
        Node("norm2", ops.layer_norm(n, dim, affine=False)),
        feed_forward("ff", n, dim, mult=MLP_RATIO, gated=True),
        Node("norm2_context", ops.layer_norm(t, dim, affine=False)),
        feed_forward("ff_context", t, dim, mult=MLP_RATIO, gated=True),
    ), formula="ovis_image_double_block")


def ovis_image_single_block(*, dim: int, heads: int, head_dim: int, tokens: Any) -> Node:
    """One ``OvisImageSingleTransformerBlock`` on the ``tokens`` = text + image tokens it concatenates."""
    mlp = MLP_RATIO * dim
    return Node("block", children=(
        ada_layer_norm_zero("norm", dim, tokens, chunks=3),
        Node("proj_mlp", ops.linear(tokens, dim, 2 * mlp) + ops.activation(tokens * mlp) * 2),  # silu(gate) · value
        attention_module("attn", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, qk_norm="rms_norm",
                         out=False),
        Node("proj_out", ops.linear(tokens, dim + mlp, dim)),
    ), formula="ovis_image_single_block")
