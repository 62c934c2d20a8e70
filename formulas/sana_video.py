r"""SANA-Video's linear video DiT (diffusers ``models/transformers/transformer_sana_video.py``):
``SanaVideoTransformerBlock`` with the rotary linear attention ``SanaLinearAttnProcessor3_0`` and the
temporal Mix-FFN ``GLUMBTempConv``.

**Rotary linear attention** (``SanaLinearAttnProcessor3_0``, transformer_sana_video.py:97-172). Per
head, :math:`d` the head width and :math:`n` tokens, ReLU-ed q and k (``B,H,C,N`` after the permute),
their rotated copies, then three ``torch.matmul`` calls:

.. math::

   z = (\textstyle\sum_j k_j)^\top Q \;(1 \times d \cdot d \times n), \qquad
   S = V\,K_\text{rot}^\top \;(d \times n \cdot n \times d), \qquad
   O = S\,Q_\text{rot} \;(d \times d \cdot d \times n)

(:159, :161, :162), so :math:`\mathrm{MACs} = h\,n\,d\,(2d + 1)`. The rotary embedding is
elementwise (no matmul); torch counts the three matmuls (``aten.bmm``), thop none.

**Self-attention** (``attn1``, :378-388): ``to_q/k/v`` :math:`D \to D` (bias per ``attention_bias``),
``norm_q``/``norm_k`` (``RMSNorm(D)`` across heads for ``qk_norm="rms_norm_across_heads"``),
the linear attention, ``to_out.0`` (bias).

**Cross-attention** (``attn2``, :391-403, ``SanaAttnProcessor2_0``: SDPA): as SANA's, with
``norm_q`` on the :math:`N` queries and ``norm_k`` on the :math:`T` caption keys.

**Temporal Mix-FFN** (``GLUMBTempConv``, :37-94, ``residual_connection=False``, no norm): SANA's
``GLUMBConv`` on each of the :math:`F` latent frames' :math:`H \times W` maps (the frames batched),
then ``conv_temp``, an ``nn.Conv2d(C, C, (3, 1), padding=(1, 0), bias=False)`` over
(frames × positions): :math:`\mathrm{MACs} = F H W\,(2 f C + 18 f + f C + 3 C^2)`,
:math:`f = \lfloor r C \rfloor`.

**Block** (:352-456), :math:`N = F H W` tokens of width :math:`D = h d`, :math:`T` caption tokens:

.. math:: \mathrm{MACs} = 4 N D^2 + h N d (2d+1) + 2 N D D_c + 2 T D D_c + 2 h_c N T d_c
          + N (3 f D + 18 f + 3 D^2)
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops
from flopcalc.formulas.sana import LINEAR_ATTENTION_ELEMENTWISE, across_heads_norm, glumb_conv
from flopcalc.formulas.transformer_parts import cross_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("sana_video_transformer_block")


def rotary_linear_attention(tokens: Any, heads: int, head_dim: int) -> Cost:
    r"""``SanaLinearAttnProcessor3_0``'s three matmuls (see the module doc):
    :math:`\mathrm{MACs} = h\,n\,d\,(2d + 1)`."""
    return Cost(attention=heads * tokens * head_dim * (2 * head_dim + 1),
                elementwise=LINEAR_ATTENTION_ELEMENTWISE * tokens * heads * head_dim)


def sana_video_self_attention(name: str, *, tokens: Any, dim: int, heads: int, head_dim: int, bias: bool,
                              qk_norm: str | None) -> Node:
    r"""``attn1``: ``Attention(query_dim=D, heads=h, dim_head=d, kv_heads=h, qk_norm, bias=attention_bias)``
    with ``SanaLinearAttnProcessor3_0`` (transformer_sana_video.py:378-388).
    :math:`\mathrm{MACs} = 4 N D h d + h N d (2d + 1)`."""
    inner = heads * head_dim
    projections = (
        Node("to_q", ops.linear(tokens, dim, inner, bias=bias)),
        Node("to_k", ops.linear(tokens, dim, inner, bias=bias)),
        Node("to_v", ops.linear(tokens, dim, inner, bias=bias)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim)),)),
    )
    cost = across_heads_norm(qk_norm, tokens, inner) * 2 + rotary_linear_attention(tokens, heads, head_dim)
    return Node(name, cost, projections, formula="sana_video_linear_attention")


def glumb_temp_conv(name: str, *, channels: int, expand_ratio: float, frames: Any, height: Any, width: Any) -> Node:
    r"""``GLUMBTempConv(C, C, expand_ratio, norm_type=None, residual_connection=False)``
    (transformer_sana_video.py:37-94): :func:`flopcalc.formulas.sana.glumb_conv` on the ``frames``
    maps of ``height × width`` (the depthwise 3×3 conv pads each frame; its count is the frames' sum),
    and ``conv_temp`` (a (3, 1) ``nn.Conv2d`` over frames × positions, no bias):
    :math:`\mathrm{MACs} = F H W (2 f C + 18 f + f C + 3 C^2)`."""
    spatial = glumb_conv(name, in_channels=channels, out_channels=channels, expand_ratio=expand_ratio,
                         height=frames * height, width=width)
    temporal = Node("conv_temp", ops.conv2d(channels, channels, (3, 1), frames, height * width, bias=False))
    return replace(spatial, children=(*spatial.children, temporal), formula="glumb_temp_conv")


@lru_cache(maxsize=64)
def sana_video_transformer_block(*, dim: int, heads: int, head_dim: int, cross_heads: int, cross_head_dim: int,
                                 cross_attention_dim: int, frames: Any, height: Any, width: Any, text_tokens: Any,
                                 attention_bias: bool, norm_affine: bool, mlp_ratio: float,
                                 qk_norm: str | None) -> Node:
    r"""``SanaVideoTransformerBlock`` (transformer_sana_video.py:352-456): ``norm1`` (``nn.LayerNorm``, no
    affine) and the modulation from the shared ``timestep`` plus the ``scale_shift_table`` (6·D, no matmul),
    ``attn1`` (rotary linear self-attention), ``attn2`` (cross-attention to the caption, biased projections,
    q/k norms across heads), ``norm2`` (``nn.LayerNorm``, affine per ``norm_elementwise_affine``) and ``ff``
    (:func:`glumb_temp_conv`). Closed form in the module doc."""
    tokens = frames * height * width
    cross_inner = cross_heads * cross_head_dim
    attn2 = cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=text_tokens,
                            context_dim=cross_attention_dim, heads=cross_heads, head_dim=cross_head_dim, bias=True)
    attn2 = replace(attn2, cost=attn2.cost + across_heads_norm(qk_norm, tokens, cross_inner)
                    + across_heads_norm(qk_norm, text_tokens, cross_inner))
    children = (
        Node("norm1", ops.layer_norm(tokens, dim, affine=False)),
        sana_video_self_attention("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim,
                                  bias=attention_bias, qk_norm=qk_norm),
        Node("norm2", ops.layer_norm(tokens, dim, affine=norm_affine)),
        attn2,
        glumb_temp_conv("ff", channels=dim, expand_ratio=mlp_ratio, frames=frames, height=height, width=width),
        Node("scale_shift_table", ops.parameters(6 * dim)),
    )
    return Node("block", children=children, formula="sana_video_transformer_block")
