r"""The k-diffusion UNet blocks (diffusers ``models/unets/unet_2d_blocks.py``): ``KDownBlock2D``,
``KCrossAttnDownBlock2D``, ``KUpBlock2D``, ``KCrossAttnUpBlock2D`` (the Stable Diffusion x2 latent upscaler's UNet).

Every ResNet is a ``ResnetBlockCondNorm2D`` (``models/resnet.py:43-190``) with ``time_embedding_norm="ada_group"``:
its two norms are ``AdaGroupNorm`` s (``models/normalization.py:269-305``: ``linear`` maps the time embedding
:math:`d_t` to a scale and shift, :math:`2 C` values, then ``F.group_norm``), so on an :math:`H \times W` map
with :math:`C_i \to C_o` channels (``conv2`` to :math:`C_2`, the up blocks' ``conv_2d_out_channels``):

.. math::

   \mathrm{MACs} = 2 d_t C_i + 9 H W C_o C_i + 2 d_t C_o + 9 H W C_2 C_o + [C_i \ne C_2]\, H W C_2 C_i

(the 1×1 ``conv_shortcut`` has no bias). Every attention is a ``KAttentionBlock`` (:3463-3580): an optional
self-attention (``norm1``, an ``AdaGroupNorm``, then ``attn1``) and a cross-attention (``norm2``, ``attn2`` with
``norm_cross`` a ``LayerNorm`` of the context), biased projections, no feed-forward.

The samplers are fixed depthwise-in-effect filters run as dense convolutions: ``KDownsample2D`` (``downsampling.py:
256-285``) a stride-2 ``F.conv2d`` with a :math:`C \times C \times 4 \times 4` weight on the reflect-padded map
(:math:`16 C^2` MACs per output pixel), ``KUpsample2D`` (``upsampling.py:327-358``) a stride-2
``F.conv_transpose2d`` with the same weight shape, which torch counts per *input* pixel of the padded map,
:math:`(H + 2)(W + 2) \cdot 16 C^2`. Both are functional: thop does not see them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.transformer_parts import cross_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("resnet_cond_norm", "k_attention_block", "k_downsample", "k_upsample")

#: ``resnet_group_size`` (32: the blocks are built without one) and the 4×4 kernel of the samplers.
GROUP_SIZE = 32
K_KERNEL = 4


def ada_group_norm(name: str, temb: int, channels: int, spatial: Any) -> Node:
    """``AdaGroupNorm(temb, channels, groups)``: ``linear`` (time embedding → scale and shift) and a group norm."""
    return Node(name, ops.group_norm(channels, spatial, affine=False),
                children=(Node("linear", ops.linear(1, temb, 2 * channels)),))


@lru_cache(maxsize=1024)
def resnet_cond_norm(c_in: int, c_out: int, height: Any, width: Any, *, temb: int, c_out_2: int | None = None) -> Node:
    """``ResnetBlockCondNorm2D(in, out, conv_2d_out_channels=c_out_2, time_embedding_norm="ada_group",
    conv_shortcut_bias=False)`` on ``height × width``."""
    if c_in // GROUP_SIZE == 0 or c_out // GROUP_SIZE == 0:  # GroupNorm of 0 groups: the real block fails
        raise ValueError(f"a k-UNet ResNet needs at least {GROUP_SIZE} channels (groups = channels // {GROUP_SIZE}), "
                         f"got {c_in} → {c_out}")
    c2 = c_out_2 or c_out
    hw = height * width
    children = [ada_group_norm("norm1", temb, c_in, hw), Node("conv1", ops.conv2d(c_in, c_out, 3, height, width)),
                ada_group_norm("norm2", temb, c_out, hw), Node("conv2", ops.conv2d(c_out, c2, 3, height, width))]
    if c_in != c2:
        children.append(Node("conv_shortcut", ops.conv2d(c_in, c2, 1, height, width, bias=False)))
    return Node("resnet", ops.activation(2 * (c_in + c_out) * hw), tuple(children), formula="resnet_cond_norm")


@lru_cache(maxsize=1024)
def k_attention_block(dim: int, head_dim: int, height: Any, width: Any, *, temb: int, context_tokens: Any,
                      context_dim: int, self_attention: bool) -> Node:
    """``KAttentionBlock(dim, dim // head_dim, head_dim, cross_attention_dim, attention_bias=True,
    cross_attention_norm="layer_norm", add_self_attention=self_attention)``."""
    n = height * width
    heads = dim // head_dim
    if heads == 0:
        raise ValueError(f"a {dim}-channel k-UNet attention of head width {head_dim} has no head")
    children = []
    if self_attention:
        children += [ada_group_norm("norm1", temb, dim, n),
                     cross_attention("attn1", tokens=n, dim=dim, context_tokens=n, context_dim=dim, heads=heads,
                                     head_dim=head_dim, bias=True)]
    attn2 = cross_attention("attn2", tokens=n, dim=dim, context_tokens=context_tokens, context_dim=context_dim,
                            heads=heads, head_dim=head_dim, bias=True)
    attn2 = Node("attn2", attn2.cost, (Node("norm_cross", ops.layer_norm(context_tokens, context_dim)),
                                       *attn2.children), formula=attn2.formula)
    children += [ada_group_norm("norm2", temb, dim, n), attn2]
    return Node("attention", children=tuple(children), formula="k_attention_block")


def _reflect_pad(height: Any, width: Any, what: str) -> None:
    """``F.pad(..., "reflect")`` by 1 needs every side of at least 2 (the real sampler fails on a 1-pixel side)."""
    if any(isinstance(v, int) and v < 2 for v in (height, width)):
        from flopcalc.engine.errors import ResolutionError

        raise ResolutionError(f"the k-UNet's {what} reflect-pads a {height}×{width} level, which needs sides of at "
                              "least 2: use a larger size (the real model fails too)")


def k_downsample(channels: int, height: Any, width: Any) -> tuple[Node, Any, Any]:
    """``KDownsample2D``: pad 1 (reflect), a stride-2 4×4 ``F.conv2d`` of a dense ``C × C`` weight."""
    _reflect_pad(height, width, "KDownsample2D")
    h2 = ops.conv_output_size(height + 2, K_KERNEL, 2)
    w2 = ops.conv_output_size(width + 2, K_KERNEL, 2)
    cost = ops.conv(channels, channels, K_KERNEL * K_KERNEL, h2 * w2, thop_hooked=False)
    return Node("0", ops.Cost(functional=cost.functional), formula="k_downsample"), h2, w2


def k_upsample(channels: int, height: Any, width: Any) -> tuple[Node, Any, Any]:
    """``KUpsample2D``: pad 1 (reflect), a stride-2 ``F.conv_transpose2d`` (padding 3) of a dense ``C × C × 4 × 4``
    weight; torch's ``conv_flop_count`` counts a transposed convolution over its input's positions."""
    _reflect_pad(height, width, "KUpsample2D")
    macs = (height + 2) * (width + 2) * channels * channels * K_KERNEL * K_KERNEL
    return Node("0", ops.Cost(functional=macs), formula="k_upsample"), 2 * height, 2 * width


def k_block(*, resnets: list[Node], attentions: list[Node] | None, sampler: Node | None, sampler_name: str,
            formula: str) -> Node:
    parts = [module_list("resnets", resnets)]
    if attentions is not None:
        parts.append(module_list("attentions", attentions))
    if sampler is not None:
        parts.append(module_list(sampler_name, [sampler]))
    return Node("block", children=tuple(parts), formula=formula)
