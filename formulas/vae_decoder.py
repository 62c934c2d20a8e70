r"""VAE decoder and encoder of ``AutoencoderKL`` (diffusers ``models/autoencoders/vae.py``:
``Decoder``, ``Encoder``; blocks from ``unet_2d_blocks.py``: ``UNetMidBlock2D``,
``UpDecoderBlock2D``, ``DownEncoderBlock2D``).

Decoder on an :math:`h \times w` latent with :math:`c_z` channels, block widths
:math:`b_0..b_{K-1}` (``block_out_channels``), :math:`r` = ``layers_per_block``:

* ``conv_in``: 3×3, :math:`c_z \to b_{K-1}` at :math:`h w`;
* ``mid_block``: ResNet, single-head self-attention over the :math:`hw` latent pixels, ResNet;
* ``up_blocks[i]`` (i = 0..K-1, widths reversed): :math:`r + 1` ResNets, then (all but the
  last) nearest 2× upsampling and a 3×3 conv at the doubled size;
* ``conv_norm_out`` (GroupNorm), SiLU, ``conv_out`` 3×3 to the image channels.

Every term is a convolution over a map whose area is :math:`hw \cdot 4^{i}`, so the cost is
:math:`\alpha\, hw + \beta\, (hw)^2` exactly, the square term being the mid-block attention
(:math:`2 (hw)^2 b_{K-1}`). The encoder mirrors it: ``conv_in`` at full size, ``down_blocks`` of
:math:`r` ResNets with a stride-2 3×3 convolution (padding (0,1,0,1)) after all but the last,
the same mid block, and ``conv_out`` to :math:`2 c_z` (``double_z``).
"""

from __future__ import annotations

from typing import Any, Sequence

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.resnet_block import resnet_block, spatial_self_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("downsample", "upsample")


def mid_block(channels: int, height: Any, width: Any, *, add_attention: bool) -> Node:
    """``UNetMidBlock2D`` as the VAE builds it (``attention_head_dim = channels``: one head)."""
    res = resnet_block(channels, channels, height, width)
    children = [module_list("resnets", [res, res])]
    if add_attention:
        children.insert(0, module_list("attentions", [spatial_self_attention(channels, height, width, head_dim=channels)]))
    return Node("mid_block", children=tuple(children), formula="vae_mid_block")


def vae_decoder(
    *,
    latent_channels: int,
    out_channels: int,
    block_out_channels: Sequence[int],
    layers_per_block: int,
    height: Any,
    width: Any,
    mid_block_add_attention: bool = True,
) -> Node:
    """The decoder, from a ``height × width`` latent to the image."""
    widths = list(reversed(block_out_channels))
    children = [
        Node("conv_in", ops.conv2d(latent_channels, widths[0], 3, height, width)),
        mid_block(widths[0], height, width, add_attention=mid_block_add_attention),
    ]
    ups = []
    h, w, c_prev = height, width, widths[0]
    for i, c in enumerate(widths):
        resnets = [resnet_block(c_prev if j == 0 else c, c, h, w) for j in range(layers_per_block + 1)]
        parts = [module_list("resnets", resnets)]
        if i < len(widths) - 1:
            h, w = 2 * h, 2 * w
            parts.append(module_list("upsamplers", [
                Node("upsample", ops.upsample_nearest(c * h * w) + ops.conv2d(c, c, 3, h, w), formula="upsample"),
            ]))
        ups.append(Node("up_block", children=tuple(parts), formula="up_decoder_block"))
        c_prev = c
    c0 = block_out_channels[0]
    children += [
        module_list("up_blocks", ups),
        Node("conv_norm_out", ops.group_norm(c0, h * w) + ops.activation(c0 * h * w)),
        Node("conv_out", ops.conv2d(c0, out_channels, 3, h, w)),
    ]
    return Node("decoder", children=tuple(children), formula="vae_decoder")


def vae_encoder(
    *,
    in_channels: int,
    latent_channels: int,
    block_out_channels: Sequence[int],
    layers_per_block: int,
    height: Any,
    width: Any,
    mid_block_add_attention: bool = True,
    double_z: bool = True,
) -> Node:
    """The encoder, from a ``height × width`` image to the latent moments."""
    children = [Node("conv_in", ops.conv2d(in_channels, block_out_channels[0], 3, height, width))]
    downs = []
    h, w, c_prev = height, width, block_out_channels[0]
    for i, c in enumerate(block_out_channels):
        resnets = [resnet_block(c_prev if j == 0 else c, c, h, w) for j in range(layers_per_block)]
        parts = [module_list("resnets", resnets)]
        if i < len(block_out_channels) - 1:
            h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)
            parts.append(module_list("downsamplers", [Node("downsample", ops.conv2d(c, c, 3, h, w),
                                                           formula="downsample")]))
        downs.append(Node("down_block", children=tuple(parts), formula="down_encoder_block"))
        c_prev = c
    top = block_out_channels[-1]
    children += [
        module_list("down_blocks", downs),
        mid_block(top, h, w, add_attention=mid_block_add_attention),
        Node("conv_norm_out", ops.group_norm(top, h * w) + ops.activation(top * h * w)),
        Node("conv_out", ops.conv2d(top, (2 if double_z else 1) * latent_channels, 3, h, w)),
    ]
    return Node("encoder", children=tuple(children), formula="vae_encoder")
