r"""HunyuanImage 2.1's 32× VAE (diffusers ``models/autoencoders/autoencoder_kl_hunyuanimage.py``).

A 2-D encoder / decoder of ``HunyuanImageResnetBlock`` (GroupNorm, SiLU, 3×3 conv, twice, and a 1×1
``conv_shortcut`` when the channels change: exactly :func:`flopcalc.formulas.resnet_block.resnet_block`
without a time embedding), one single-head attention in each mid block, and pixel-shuffle resamplers:

* ``HunyuanImageDownsample`` (line 113): a 3×3 conv :math:`C_i \to C_o/4` at the input resolution, then a
  space-to-depth shuffle and a grouped-mean shortcut (no MACs): :math:`9 H W C_i C_o / 4`;
* ``HunyuanImageUpsample`` (line 151): a 3×3 conv :math:`C_i \to 4 C_o` at the input resolution, then a
  depth-to-space shuffle and a repeated shortcut: :math:`36 H W C_i C_o`;
* ``HunyuanImageAttentionBlock`` (line 68): GroupNorm, 1×1 convs ``to_q``/``to_k``/``to_v``/``proj`` and one
  head of width :math:`C` over the :math:`HW` pixels: :math:`4 H W C^2 + 2 (HW)^2 C`.

Encoder (``HunyuanImageEncoder2D``, line 203): ``conv_in``; per level :math:`i` of ``block_out_channels``
``layers_per_block`` ResNets and, while :math:`i < \log_2 r` and not the last level, a downsample (to
``block_out_channels[i+1]`` with ``downsample_match_channel``); the mid block (ResNet, attention,
ResNet); ``norm_out``, ``conv_out`` (:math:`C_\text{last} \to 2 z`) and a grouped-mean shortcut.
Decoder (``HunyuanImageDecoder2D``, line 288): ``conv_in`` (:math:`z \to C_0`, plus a repeated shortcut),
the mid block, per level ``layers_per_block + 1`` ResNets and the upsamples, ``norm_out``, ``conv_out``.
"""

from __future__ import annotations

import math
from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.resnet_block import resnet_block

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("hunyuan_image_vae_attention", "hunyuan_image_downsample", "hunyuan_image_upsample")


def resamples(level: int, levels: int, ratio: int) -> bool:
    """``i < np.log2(spatial_compression_ratio) and i != len(block_out_channels) - 1`` (lines 248, 334)."""
    return level < math.log2(ratio) and level != levels - 1


def stages(block_out_channels: list[int], resnets_per_level: int, ratio: int,
           match_channel: bool) -> list[tuple[str, int, int]]:
    """The ``down_blocks`` / ``up_blocks`` list in order as ``(kind, C_in, C_out)``, ``kind`` being
    ``resnet`` or ``resample`` (the constructor loops, lines 268 and 373; decoder: reversed channels)."""
    out: list[tuple[str, int, int]] = []
    c_in = block_out_channels[0]
    levels = len(block_out_channels)
    for i, c in enumerate(block_out_channels):
        for _ in range(resnets_per_level):
            out.append(("resnet", c_in, c))
            c_in = c
        if resamples(i, levels, ratio):
            c_out = block_out_channels[i + 1] if match_channel else c
            out.append(("resample", c_in, c_out))
            c_in = c_out
    return out


def attention_block(channels: int, height: Any, width: Any) -> Node:
    r"""``HunyuanImageAttentionBlock``: :math:`4 H W C^2 + 2 (HW)^2 C` MACs."""
    hw = height * width
    return Node("attention", ops.attention(hw, hw, 1, channels), children=(  # F.scaled_dot_product_attention
        Node("norm", ops.group_norm(channels, hw)),
        Node("to_q", ops.conv2d(channels, channels, 1, height, width)),
        Node("to_k", ops.conv2d(channels, channels, 1, height, width)),
        Node("to_v", ops.conv2d(channels, channels, 1, height, width)),
        Node("proj", ops.conv2d(channels, channels, 1, height, width)),
    ), formula="hunyuan_image_vae_attention")


def mid_block(channels: int, height: Any, width: Any) -> Node:
    """``HunyuanImageMidBlock(num_layers=1)``: ResNet, attention, ResNet at one resolution."""
    res = resnet_block(channels, channels, height, width)
    return Node("mid_block", children=(
        module_list("resnets", [res, res]),
        module_list("attentions", [attention_block(channels, height, width)]),
    ))


def encoder(*, in_channels: int, latent_channels: int, block_out_channels: list[int], layers_per_block: int,
            ratio: int, match_channel: bool, height: Any, width: Any) -> Node:
    """``HunyuanImageEncoder2D`` on a ``height × width`` image."""
    h, w = height, width
    blocks: list[Node] = []
    for kind, c_in, c_out in stages(block_out_channels, layers_per_block, ratio, match_channel):
        if kind == "resnet":
            blocks.append(resnet_block(c_in, c_out, h, w))
            continue
        blocks.append(Node("downsample", children=(
            Node("conv", ops.conv2d(c_in, ops.exact_div(c_out, 4), 3, h, w)),), formula="hunyuan_image_downsample"))
        h, w = ops.exact_div(h, 2), ops.exact_div(w, 2)
    last = block_out_channels[-1]
    return Node("encoder", children=(
        Node("conv_in", ops.conv2d(in_channels, block_out_channels[0], 3, height, width)),
        module_list("down_blocks", blocks),
        mid_block(last, h, w),
        Node("norm_out", ops.group_norm(last, h * w) + ops.activation(last * h * w)),
        Node("conv_out", ops.conv2d(last, 2 * latent_channels, 3, h, w)),
    ))


def decoder(*, out_channels: int, latent_channels: int, block_out_channels: list[int], layers_per_block: int,
            ratio: int, match_channel: bool, height: Any, width: Any) -> Node:
    """``HunyuanImageDecoder2D`` on a ``height × width`` latent (``block_out_channels`` as the model
    passes them: reversed)."""
    h, w = height, width
    first = block_out_channels[0]
    blocks: list[Node] = []
    for kind, c_in, c_out in stages(block_out_channels, layers_per_block + 1, ratio, match_channel):
        if kind == "resnet":
            blocks.append(resnet_block(c_in, c_out, h, w))
            continue
        blocks.append(Node("upsample", children=(
            Node("conv", ops.conv2d(c_in, 4 * c_out, 3, h, w)),), formula="hunyuan_image_upsample"))
        h, w = 2 * h, 2 * w
    last = block_out_channels[-1]
    return Node("decoder", children=(
        Node("conv_in", ops.conv2d(latent_channels, first, 3, height, width)),
        mid_block(first, height, width),
        module_list("up_blocks", blocks),
        Node("norm_out", ops.group_norm(last, h * w) + ops.activation(last * h * w)),
        Node("conv_out", ops.conv2d(last, out_channels, 3, h, w)),
    ))
