r"""Helios video transformer: diffusers ``models/transformers/transformer_helios.py`` (``HeliosTransformer3DModel``,
``HeliosTransformerBlock``, ``HeliosAttention`` with ``HeliosAttnProcessor``, ``HeliosTimeTextEmbedding``,
``HeliosOutputNorm``): the Wan 2.1 block on the current chunk's tokens packed after three histories.

Symbols: :math:`N` tokens of the chunk being denoised, :math:`M` history tokens (short, mid and long history, each
patched by its own convolution), :math:`L = M + N`, :math:`T` text tokens, width :math:`d = h d_h`, feed-forward width
:math:`f`.

.. math::
   \mathrm{MACs}_\text{block} = \underbrace{4 L d^2 + 2 h L^2 d_h}_{\text{attn1}}
       + \underbrace{2 N_q d^2 + 2 T d^2 + 2 h N_q T d_h}_{\text{attn2}}
       + \underbrace{2 L d f}_{\text{ffn}}

with :math:`N_q = N` under ``guidance_cross_attn`` (the histories skip the cross-attention, lines 464-483) and
:math:`L` otherwise. ``attn1`` attends over every packed token (the rotary tables are computed per call by
``HeliosRotaryPosEmbed``: outer products and cosines, no matmul; ``is_amplify_history`` scales the history keys by a
learned ``history_key_scale``, elementwise). ``attn2``'s ``add_k_proj``/``add_v_proj``/``norm_added_k``
(``added_kv_proj_dim``) are built but never called by the processor (parameters only). ``norm1``/``norm3`` and
``norm2`` (``cross_attn_norm``) are ``FP32LayerNorm`` (thop: 0); ``ffn`` is ``FeedForward(d, inner_dim=f,
activation_fn="gelu-approximate")``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import feed_forward
from flopcalc.formulas.wan import wan_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("helios_transformer_block")


@lru_cache(maxsize=256)
def helios_block(*, dim: int, heads: int, head_dim: int, ffn_dim: int, tokens: Any, current: Any, text_tokens: Any,
                 cross_attn_norm: bool, guidance_cross_attn: bool, added_kv_dim: int | None,
                 history_scale: int) -> Node:
    """One ``HeliosTransformerBlock`` (module names as in diffusers) on ``tokens`` packed tokens, ``current`` of them
    the chunk's; ``history_scale``: the ``history_key_scale`` parameters of ``attn1`` (0: ``is_amplify_history``
    off)."""
    queries = current if guidance_cross_attn else tokens
    attn1 = wan_attention("attn1", tokens=tokens, context_tokens=tokens, dim=dim, heads=heads, head_dim=head_dim)
    if history_scale:
        attn1 = Node(attn1.name, attn1.cost, attn1.children + (Node("history_key_scale",
                                                                    ops.parameters(history_scale)),), formula=attn1.formula)
    children = [
        Node("norm1", ops.layer_norm(tokens, dim, affine=False, thop_rule=False)),
        attn1,
        wan_attention("attn2", tokens=queries, context_tokens=text_tokens, dim=dim, heads=heads, head_dim=head_dim,
                      image_tokens=0, added_kv_dim=added_kv_dim),
    ]
    if cross_attn_norm:
        children.append(Node("norm2", ops.layer_norm(queries, dim, thop_rule=False)))
    children += [
        feed_forward("ffn", tokens, dim, inner=ffn_dim),
        Node("norm3", ops.layer_norm(tokens, dim, affine=False, thop_rule=False)),
        Node("scale_shift_table", ops.parameters(6 * dim)),
    ]
    return Node("block", children=tuple(children), formula="helios_transformer_block")


def history_tokens(height: Any, width: Any) -> tuple[Any, Any, Any]:
    """Tokens of the three histories the Helios pipelines pass (history sizes 16, 2, 1 and the first-frame prefix,
    ``keep_first_frame``) on an ``height × width`` latent, with 1×2×2 patches: short (2 frames, ``patch_short``
    1×2×2), mid (2 frames padded to multiples of (2, 4, 4), ``patch_mid`` 2×4×4) and long (16 frames padded to
    multiples of (4, 8, 8), ``patch_long`` 4×8×8) (lines 735-783)."""
    short = 2 * _floor(height, 2) * _floor(width, 2)
    mid = _ceil(height, 4) * _ceil(width, 4)
    long = 4 * _ceil(height, 8) * _ceil(width, 8)
    return short, mid, long


def _floor(size: Any, k: int) -> Any:
    """``size // k`` (a stride-k convolution); on a symbol ``size / k``."""
    return size // k if isinstance(size, int) else size / k


def _ceil(size: Any, k: int) -> Any:
    """``⌈size / k⌉`` (the replicate padding to a multiple of k, then a stride-k convolution); on a symbol
    ``size / k`` (the law holds for sizes that divide)."""
    return -(-size // k) if isinstance(size, int) else size / k
