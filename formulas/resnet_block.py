r"""ResNet block: diffusers ``models/resnet.py`` ``ResnetBlock2D`` (VAE and UNet).

On an :math:`H \times W` map with :math:`C_i \to C_o` channels, 3×3 convolutions:

.. math::

   \mathrm{MACs} = \underbrace{9 H W C_o C_i}_{\text{conv1}} + \underbrace{9 H W C_o^2}_{\text{conv2}}
                 + \underbrace{[C_i \ne C_o]\, H W C_o C_i}_{\text{1×1 conv\_shortcut}}
                 + \underbrace{d_t C_o}_{\text{time\_emb\_proj}}

``norm1``/``norm2`` are GroupNorms and the activations SiLU: elementwise only. ``d_t`` is the
time-embedding width (UNets; 0 in a VAE, where ``temb_channels`` is None); with
``resnet_time_scale_shift: scale_shift`` the projection doubles to :math:`2 d_t C_o`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("resnet_block", "spatial_self_attention")


@lru_cache(maxsize=4096)  # nodes are immutable; a VAE or UNet repeats the same few blocks
def resnet_block(
    c_in: int,
    c_out: int,
    height: Any,
    width: Any,
    *,
    temb_channels: int | None = None,
    scale_shift: bool = False,
) -> Node:
    hw = height * width
    children = [
        Node("norm1", ops.group_norm(c_in, hw) + ops.activation(c_in * hw)),
        Node("conv1", ops.conv2d(c_in, c_out, 3, height, width)),
    ]
    if temb_channels:
        children.append(Node("time_emb_proj", ops.activation(temb_channels)
                             + ops.linear(1, temb_channels, c_out * (2 if scale_shift else 1))))
    children += [
        Node("norm2", ops.group_norm(c_out, hw) + ops.activation(c_out * hw)),
        Node("conv2", ops.conv2d(c_out, c_out, 3, height, width)),
    ]
    if c_in != c_out:
        children.append(Node("conv_shortcut", ops.conv2d(c_in, c_out, 1, height, width)))
    return Node("resnet", children=tuple(children), formula="resnet_block")


@lru_cache(maxsize=1024)
def spatial_self_attention(channels: int, height: Any, width: Any, *, head_dim: int) -> Node:
    r"""The VAE mid-block attention (``Attention(..., norm_num_groups, residual_connection=True)``
    with ``AttnProcessor2_0``): GroupNorm, q/k/v/out linears over the :math:`HW` pixels as tokens.

    .. math:: \mathrm{MACs} = 4 H W C^2 + 2 (HW)^2 C
    """
    n = height * width
    heads = ops.exact_div(channels, head_dim)
    cost = (
        ops.group_norm(channels, n)
        + ops.linear(n, channels, channels) * 3
        + ops.attention(n, n, heads, head_dim)
        + ops.linear(n, channels, channels)
    )
    return Node("attention", cost, formula="spatial_self_attention")
