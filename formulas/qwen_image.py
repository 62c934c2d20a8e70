r"""Qwen-Image dual-stream block: diffusers ``models/transformers/transformer_qwenimage.py``
``QwenImageTransformerBlock`` with ``QwenDoubleStreamAttnProcessor2_0``.

Two streams with their own weights, one joint attention, as in MMDiT. Symbols: :math:`d` width
(= :math:`h d_h`), :math:`N` image tokens, :math:`T` text tokens, :math:`r` rows of the timestep
embedding (1; 2 with ``zero_cond_t``, where the image modulation also runs for a zero timestep).

.. math::

   \mathrm{MACs}_\text{torch} =
       \underbrace{6 (r + 1) d^2}_{\text{img\_mod, txt\_mod}}
     + \underbrace{4 (N + T) d^2}_{\text{QKV, out}}
     + \underbrace{2 h (N+T)^2 d_h}_{\text{joint attention}}
     + \underbrace{8 (N + T) d^2}_{\text{img\_mlp, txt\_mlp}}

Derivation: ``img_mod`` / ``txt_mod`` are ``Sequential(SiLU, Linear(d, 6d))`` on the conditioning
vector; ``img_norm1/2`` and ``txt_norm1/2`` are ``nn.LayerNorm`` without affine (thop: 2 ops per
element); the attention (``Attention(added_kv_proj_dim=d, qk_norm="rms_norm")``) projects each
stream with its own q/k/v (``to_*``, ``add_*_proj``), RMS-normalises q and k per head
(``norm_q/k``, ``norm_added_q/k``), rotates them (complex multiplication by the RoPE factors:
elementwise, no matmul), attends over the concatenated :math:`T + N` tokens and projects back with
``to_out.0`` / ``to_add_out``; ``img_mlp`` / ``txt_mlp`` are 4× ``FeedForward`` with tanh GELU.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import attention_module, feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("qwen_image_block")


def modulation(name: str, dim: int, rows: Any = 1) -> Node:
    r"""``nn.Sequential(nn.SiLU(), nn.Linear(d, 6d))`` on ``rows`` conditioning vectors:
    :math:`\mathrm{MACs} = 6 r d^2`."""
    return Node(name, ops.activation(rows * dim) + ops.linear(rows, dim, 6 * dim), formula="modulation")


def qwen_image_block(*, dim: int, heads: int, head_dim: int, image_tokens: Any, text_tokens: Any,
                     image_mod_rows: int = 1) -> Node:
    """One ``QwenImageTransformerBlock`` (module names as in diffusers)."""
    n, t = image_tokens, text_tokens
    return Node(
        "block",
        children=(
            modulation("img_mod", dim, image_mod_rows),
            Node("img_norm1", ops.layer_norm(n, dim, affine=False)),
            attention_module("attn", tokens=n, dim=dim, heads=heads, head_dim=head_dim, qk_norm="rms_norm",
                             context_tokens=t, context_dim=dim),
            Node("img_norm2", ops.layer_norm(n, dim, affine=False)),
            feed_forward("img_mlp", n, dim),
            modulation("txt_mod", dim),
            Node("txt_norm1", ops.layer_norm(t, dim, affine=False)),
            Node("txt_norm2", ops.layer_norm(t, dim, affine=False)),
            feed_forward("txt_mlp", t, dim),
        ),
        formula="qwen_image_block",
    )
