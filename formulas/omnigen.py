r"""OmniGen's transformer: a Phi-3 decoder run over the condition tokens, a time token and the image patches.

Mirrors diffusers ``models/transformers/transformer_omnigen.py`` (diffusers 0.42.1): ``OmniGenBlock``
(:237-280), ``OmniGenFeedForward`` (:33-45), ``OmniGenPatchEmbed`` (:48-133), ``OmniGenSuScaledRotaryEmbedding``
(:136-184) and ``OmniGenTransformer2DModel.forward`` (:407-496).

Symbols: :math:`L = T + 1 + N` tokens (:math:`T` condition tokens, the time token, :math:`N` image patches),
width :math:`d = h d_h`, feed-forward width :math:`d_f`.

.. math::

   \mathrm{MACs}_\text{block} = \underbrace{4 L d^2}_{\text{q, k, v, out}}
     + \underbrace{2 h L^2 d_h}_{\text{QK}^\top,\ \text{AV}}
     + \underbrace{3 L d d_f}_{\text{gate\_up } (2 d_f),\ \text{down}}

Derivation: ``self_attn`` is a diffusers ``Attention(query_dim=d, cross_attention_dim=d, heads=h, kv_heads=h,
bias=False, out_bias=False)`` run by ``OmniGenAttnProcessor2_0`` (:187-234) on the normed sequence (keys and
values from the same tokens); the mask (causal over the condition, bidirectional over the image) is added to
the dense :math:`L \times L` scores and saves no MAC. ``mlp`` is one fused ``gate_up_proj`` (d → 2 d_f, no
bias), ``up · silu(gate)`` and ``down_proj`` (d_f → d). Both norms are diffusers ``RMSNorm`` with a gain.

Outside the blocks: ``patch_embedding.output_image_proj`` (a p×p, stride-p ``Conv2d`` on the latent:
:math:`N d C p^2`), ``input_image_proj`` on each input image's latent (editing: :math:`N_\text{in} d C p^2`),
the two timestep MLPs ``time_token`` and ``t_embedder`` (256 → d → d, one vector each), the rotary table's
``inv_freq @ position_ids`` (:math:`\lceil d_h/2 \rceil L` MACs, a counted matmul), the final ``norm``
(RMSNorm on all :math:`L` tokens), ``norm_out`` (``AdaLayerNorm``: linear d → 2d on the time embedding and
an affine-free LayerNorm on the :math:`N` image tokens the forward keeps) and ``proj_out`` (d → p²C on them).
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.decoder_layer import gated_mlp, gqa_self_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("omnigen_block", "omnigen_rotary_embedding")


def omnigen_block(*, tokens: Any, dim: int, heads: int, d_ff: int) -> Node:
    """One ``OmniGenBlock`` (transformer_omnigen.py:237-280) on ``tokens`` tokens: ``input_layernorm``,
    ``self_attn`` (bias-free q/k/v/out, keys and values from the same normed tokens), the residual,
    ``post_attention_layernorm``, ``mlp`` (fused ``gate_up_proj``, ``down_proj``), the residual."""
    norm = ops.rms_norm(tokens, dim)
    attn = gqa_self_attention("self_attn", tokens=tokens, dim=dim, heads=heads, kv_heads=heads,
                              head_dim=dim // heads, qkv_bias=False, out_bias=False)
    return Node("block", children=(
        Node("input_layernorm", norm),
        attn,
        Node("post_attention_layernorm", norm),
        gated_mlp("mlp", tokens, dim, d_ff, fused=True),
    ), formula="omnigen_block")


def omnigen_rotary_embedding(name: str, tokens: Any, head_dim: int) -> Node:
    r"""``OmniGenSuScaledRotaryEmbedding.forward`` (:153-184): ``inv_freq_expanded @ position_ids_expanded``,
    a ``(⌈d_h/2⌉ × 1)·(1 × L)`` matmul per row (torch counts it; :math:`\lceil d_h/2 \rceil L` MACs), then cos and
    sin of the table. No parameters (a non-persistent ``inv_freq`` buffer)."""
    freqs = (head_dim + 1) // 2  # torch.arange(0, dim, 2)
    # elementwise: cos and sin of the (L × 2⌈d_h/2⌉) table and their scaling
    return Node(name, ops.matmul(freqs, 1, tokens) + Cost(elementwise=8 * freqs * tokens),
                formula="omnigen_rotary_embedding")


def patch_conv(tokens: Any, in_channels: int, dim: int, patch: int) -> Any:
    """A ``Conv2d(C, d, kernel=p, stride=p)`` producing ``tokens`` patches (``OmniGenPatchEmbed``'s
    ``output_image_proj`` / ``input_image_proj``)."""
    return ops.conv(in_channels, dim, patch * patch, tokens)
