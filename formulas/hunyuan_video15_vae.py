r"""HunyuanVideo 1.5's causal 3-D VAE (diffusers ``models/autoencoders/autoencoder_kl_hunyuanvideo15.py``).

Every ``HunyuanVideo15CausalConv3d`` (line 30) pads 1 pixel each side and 2 frames in front, so its 3×3×3
conv keeps the ``F × H × W`` grid: :math:`27\,C_i C_o F H W` MACs. Blocks:

* ``HunyuanVideo15ResnetBlock`` (line 250): RMS norms (elementwise), two causal convs, a 1×1×1
  ``conv_shortcut`` on the input when the channels change: :math:`27 FHW (C_i C_o + C_o^2) + [C_i \ne C_o] FHW C_i C_o`;
* ``HunyuanVideo15AttnBlock`` (line 93): 1×1×1 ``to_q``/``to_k``/``to_v``/``proj_out`` and one head of
  width :math:`C` over all :math:`L = FHW` positions with a block-causal *additive* mask (the full
  :math:`L^2` score matrix is computed): :math:`4 L C^2 + 2 L^2 C`;
* ``HunyuanVideo15Downsample`` (line 189): a causal conv :math:`C_i \to C_o / r` (:math:`r` = 8 with a temporal
  step, else 4) on the input grid, then a space(-time)-to-depth shuffle and a grouped-mean shortcut; a
  temporal step keeps the first frame and halves the rest: :math:`F \to 1 + (F-1)/2`;
* ``HunyuanVideo15Upsample`` (line 140): a causal conv :math:`C_i \to r\,C_o` on the input grid, then
  depth-to-space; a temporal step maps :math:`F \to 2F - 1`. Spatial sides always halve / double.

Encoder (``HunyuanVideo15Encoder3D``, line 378): ``conv_in``; per level ``layers_per_block`` ResNets and,
while :math:`i < \log_2 s`, a downsample (temporal from :math:`i \ge \log_2(s/t)`); the mid block (ResNet,
attention, ResNet); ``norm_out``, ``conv_out`` (:math:`C_\text{last} \to 2z`). Decoder (line 455):
``conv_in`` (:math:`z \to C_0`), the mid block, per level ``layers_per_block + 1`` ResNets and, while
:math:`i < \log_2 s` or :math:`i < \log_2 t`, an upsample (temporal while :math:`i < \log_2 t`), ``norm_out``,
``conv_out``.
"""

from __future__ import annotations

import math
from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("hunyuan_video15_resnet", "hunyuan_video15_vae_attention", "hunyuan_video15_downsample",
                          "hunyuan_video15_upsample")


def resamplers(block_out_channels: list[int], spatial: int, temporal: int, match_channel: bool,
               decoder: bool) -> list[tuple[int, int, bool] | None]:
    """Per level, its resampler as ``(C_in, C_out, temporal)`` or None (the constructor loops, lines 392
    and 470; decoder: reversed channels)."""
    out: list[tuple[int, int, bool] | None] = []
    for i, c in enumerate(block_out_channels):
        if decoder:
            with_time = i < math.log2(temporal)
            present = i < math.log2(spatial) or with_time
        else:
            present = i < math.log2(spatial)
            with_time = present and i >= math.log2(spatial // temporal)
        out.append((c, block_out_channels[i + 1] if match_channel else c, with_time) if present else None)
    return out


def causal_conv(name: str, c_in: int, c_out: int, positions: Any) -> Node:
    """``HunyuanVideo15CausalConv3d`` (its ``conv`` child: a 3×3×3 ``nn.Conv3d``) on ``positions`` = F·H·W."""
    return Node(name, children=(Node("conv", ops.conv(c_in, c_out, 27, positions)),))


def resnet(c_in: int, c_out: int, positions: Any) -> Node:
    """``HunyuanVideo15ResnetBlock`` on ``positions`` = F·H·W."""
    children = [
        Node("norm1", ops.parameters(c_in) + ops.activation(c_in * positions)),  # gamma; the SiLU after it
        causal_conv("conv1", c_in, c_out, positions),
        Node("norm2", ops.parameters(c_out) + ops.activation(c_out * positions)),
        causal_conv("conv2", c_out, c_out, positions),
    ]
    if c_in != c_out:
        children.append(Node("conv_shortcut", ops.conv(c_in, c_out, 1, positions)))
    return Node("resnet", children=tuple(children), formula="hunyuan_video15_resnet")


def attention(channels: int, positions: Any) -> Node:
    r"""``HunyuanVideo15AttnBlock``: :math:`4 L C^2 + 2 L^2 C` MACs."""
    conv = ops.conv(channels, channels, 1, positions)
    return Node("attention", ops.attention(positions, positions, 1, channels), children=(
        Node("norm", ops.parameters(channels)),
        Node("to_q", conv), Node("to_k", conv), Node("to_v", conv), Node("proj_out", conv),
    ), formula="hunyuan_video15_vae_attention")


def mid_block(channels: int, positions: Any) -> Node:
    res = resnet(channels, channels, positions)
    return Node("mid_block", children=(module_list("attentions", [attention(channels, positions)]),
                                       module_list("resnets", [res, res])))


def encoder(*, in_channels: int, latent_channels: int, block_out_channels: list[int], layers_per_block: int,
            spatial: int, temporal: int, match_channel: bool, frames: Any, height: Any, width: Any) -> Node:
    """``HunyuanVideo15Encoder3D`` on an ``frames × height × width`` video."""
    f, h, w = frames, height, width
    c_in = block_out_channels[0]
    blocks = []
    for i, c in enumerate(block_out_channels):
        res = [resnet(c_in if j == 0 else c, c, f * h * w) for j in range(layers_per_block)]
        children = [module_list("resnets", res)]
        c_in = c
        step = resamplers(block_out_channels, spatial, temporal, match_channel, decoder=False)[i]
        if step is not None:
            _, c_out, with_time = step
            factor = 8 if with_time else 4
            children.append(module_list("downsamplers", [Node("downsampler", children=(
                causal_conv("conv", c, ops.exact_div(c_out, factor), f * h * w),), formula="hunyuan_video15_downsample")]))
            c_in = c_out
            f = 1 + ops.exact_div(f - 1, 2) if with_time else f
            h, w = ops.exact_div(h, 2), ops.exact_div(w, 2)
        blocks.append(Node("down_block", children=tuple(children)))
    last = block_out_channels[-1]
    return Node("encoder", children=(
        causal_conv("conv_in", in_channels, block_out_channels[0], frames * height * width),
        module_list("down_blocks", blocks),
        mid_block(last, f * h * w),
        Node("norm_out", ops.parameters(last) + ops.activation(last * f * h * w)),  # and conv_act
        causal_conv("conv_out", last, 2 * latent_channels, f * h * w),
    ))


def decoder(*, out_channels: int, latent_channels: int, block_out_channels: list[int], layers_per_block: int,
            spatial: int, temporal: int, match_channel: bool, frames: Any, height: Any, width: Any) -> Node:
    """``HunyuanVideo15Decoder3D`` on a ``frames × height × width`` latent (channels as the model passes
    them: reversed)."""
    f, h, w = frames, height, width
    first = block_out_channels[0]
    c_in = first
    blocks = []
    for i, c in enumerate(block_out_channels):
        res = [resnet(c_in if j == 0 else c, c, f * h * w) for j in range(layers_per_block + 1)]
        children = [module_list("resnets", res)]
        c_in = c
        step = resamplers(block_out_channels, spatial, temporal, match_channel, decoder=True)[i]
        if step is not None:
            _, c_out, with_time = step
            factor = 8 if with_time else 4
            children.append(module_list("upsamplers", [Node("upsampler", children=(
                causal_conv("conv", c, c_out * factor, f * h * w),), formula="hunyuan_video15_upsample")]))
            c_in = c_out
            f = 2 * f - 1 if with_time else f
            h, w = 2 * h, 2 * w
        blocks.append(Node("up_block", children=tuple(children)))
    last = block_out_channels[-1]
    return Node("decoder", children=(
        causal_conv("conv_in", latent_channels, first, frames * height * width),
        mid_block(first, frames * height * width),
        module_list("up_blocks", blocks),
        Node("norm_out", ops.parameters(last) + ops.activation(last * f * h * w)),  # and conv_act
        causal_conv("conv_out", last, out_channels, f * h * w),
    ))
