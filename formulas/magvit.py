r"""EasyAnimate's causal video VAE, ``AutoencoderKLMagvit`` (diffusers ``models/autoencoders/autoencoder_kl_magvit.py``).

Every 3×3×3 convolution is an ``EasyAnimateCausalConv3d`` (:34-144, an ``nn.Conv3d`` subclass: thop counts 0): it pads
the frames causally (the first call of a ``decode``/``encode`` replicates the first frame twice, later calls prepend
the previous call's last two input frames, the cache) and runs one ``Conv3d`` call per output frame on three input
frames, so a stride-1 conv of ``f`` input frames costs :math:`f \cdot H W C_o C_i \cdot 27`. A temporal stride of 2
(the encoder's down-samplers) gives :math:`\lfloor (f - 1)/2 \rfloor + 1` output frames in the first call and
:math:`\lfloor (f - 2)/2 \rfloor + 1` later (one cached frame prepended).

**Decode** (``_decode``, :865-890, tiling off): ``post_quant_conv`` (1×1×1) on the latent, then the decoder on the
first latent frame and on each later frame alone (``num_latent_frames_batch_size`` 1). The decoder (:544-662):
``conv_in``, the mid block's ResNets, the up blocks (``layers_per_block + 1`` ``EasyAnimateResidualBlock3D`` each:
GroupNorm per frame, causal conv, GroupNorm, causal conv, a 1×1×1 ``nn.Conv3d`` shortcut when the width changes), an
up-sampler after all but the last (nearest ×2 in space, a causal conv; in a ``SpatialTemporalUpBlock3D``, from the
second call on, nearest ×2 in time after the conv), ``conv_norm_out`` and ``conv_out``. The first call therefore stays
one frame; later calls grow to :math:`2^u` frames (:math:`u` temporal up-samplers).

**Encode** (``_encode``, :808-836): the encoder (:428-541) on the first frame, then on chunks of
``num_sample_frames_batch_size`` = 4 frames, and ``quant_conv`` (1×1×1) on the concatenated moments. Down blocks:
``layers_per_block`` ResNets and, but the last, a down-sampler (a (0, 1, 0, 1) pad, then a causal conv with stride
(2, 2, 2) in ``SpatialTemporalDownBlock3D`` or (1, 2, 2) in ``SpatialDownBlock3D``, no spatial padding).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list, work_only
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("magvit_resnet", "magvit_up_block", "magvit_down_block")

#: ``AutoencoderKLMagvit``: ``num_sample_frames_batch_size`` / ``num_latent_frames_batch_size`` (:750-751).
ENCODE_CHUNK, DECODE_CHUNK = 4, 1


def causal_conv(c_in: int, c_out: int, frames: Any, area: Any, kernel: int = 3) -> Cost:
    """An ``EasyAnimateCausalConv3d`` producing ``frames`` frames of ``area`` positions."""
    return ops.conv(c_in, c_out, kernel ** 3, frames * area, thop_hooked=False)


def resnet(c_in: int, c_out: int, frames: Any, area: Any) -> Node:
    """``EasyAnimateResidualBlock3D`` (:147-214) on ``frames × area``."""
    n = frames * area
    children = [
        Node("norm1", ops.group_norm(c_in, n) + ops.activation(c_in * n)),
        Node("conv1", causal_conv(c_in, c_out, frames, area)),
        Node("norm2", ops.group_norm(c_out, n) + ops.activation(c_out * n)),
        Node("conv2", causal_conv(c_out, c_out, frames, area)),
    ]
    if c_in != c_out:
        children.append(Node("shortcut", ops.conv(c_in, c_out, 1, n)))
    return Node("resnet", children=tuple(children), formula="magvit_resnet")


def _sum_calls(nodes: Sequence[Node]) -> Node:
    """One node for the same module's work summed over several calls (its parameters once)."""
    first = nodes[0]
    cost = first.cost
    for other in nodes[1:]:
        cost = cost + work_only(other.cost)
    children = tuple(_sum_calls([n.children[i] for n in nodes]) for i in range(len(first.children)))
    return replace(first, cost=cost, children=children)


def decoder_call(*, latent: int, out: int, widths: Sequence[int], layers: int, temporal: Sequence[bool],
                 height: Any, width: Any, first: bool) -> Node:
    """One ``EasyAnimateDecoder`` call on one latent frame (module doc); ``widths`` top first."""
    f, h, w = 1, height, width
    top = widths[0]
    mid = Node("mid_block", children=(module_list("convs", [resnet(top, top, f, h * w)] * layers),))
    ups, prev = [], top
    for i, c in enumerate(widths):
        parts = [module_list("convs", [resnet(prev if j == 0 else c, c, f, h * w) for j in range(layers + 1)])]
        if i < len(widths) - 1:
            h, w = 2 * h, 2 * w
            parts.append(Node("upsampler", ops.upsample_nearest(c * f * h * w),
                              (Node("conv", causal_conv(c, c, f, h * w)),)))
            if temporal[i] and not first:
                f = 2 * f
        ups.append(Node("up_block", children=tuple(parts), formula="magvit_up_block"))
        prev = c
    c0 = widths[-1]
    return Node("decoder", children=(
        Node("conv_in", causal_conv(latent, top, 1, height * width)),
        mid,
        module_list("up_blocks", ups),
        Node("conv_norm_out", ops.group_norm(c0, f * h * w) + ops.activation(c0 * f * h * w)),
        Node("conv_out", causal_conv(c0, out, f, h * w)),
    ), formula="magvit_decoder")


def magvit_decoder(*, latent: int, out: int, widths: Sequence[int], layers: int, temporal: Sequence[bool],
                   frames: Any, height: Any, width: Any) -> Node:
    """The decoder over a ``decode``: the first latent frame's call and ``frames − 1`` later calls."""
    first = decoder_call(latent=latent, out=out, widths=widths, layers=layers, temporal=temporal, height=height,
                         width=width, first=True)
    later = decoder_call(latent=latent, out=out, widths=widths, layers=layers, temporal=temporal, height=height,
                         width=width, first=False)
    return _sum_calls([first, _times(later, frames - 1)])


def _times(node: Node, k: Any) -> Node:
    """``node``'s work ``k`` times (k calls), its parameters once."""
    cost = work_only(node.cost) * k + replace(node.cost, linear=0, conv=0, attention=0, functional=0, thop_extra=0,
                                              elementwise=0, scores=0)
    return replace(node, cost=cost, children=tuple(_times(c, k) for c in node.children))


def temporal_out(frames: int, stride: int, first: bool) -> int:
    """Output frames of a causal conv of temporal stride ``stride`` on ``frames`` input frames (module doc)."""
    if stride == 1:
        return frames
    return (frames - 1) // 2 + 1 if first else (frames - 2) // 2 + 1


def encoder_call(*, in_channels: int, latent: int, widths: Sequence[int], layers: int, temporal: Sequence[bool],
                 frames: int, height: Any, width: Any, first: bool) -> tuple[Node, int]:
    """One ``EasyAnimateEncoder`` call on ``frames`` frames (``widths`` bottom first); returns it and its latent
    frames."""
    f, h, w = frames, height, width
    downs, prev = [], widths[0]
    conv_in = Node("conv_in", causal_conv(in_channels, widths[0], f, h * w))
    for i, c in enumerate(widths):
        parts = [module_list("convs", [resnet(prev if j == 0 else c, c, f, h * w) for j in range(layers)])]
        if i < len(widths) - 1:
            stride = 2 if temporal[i] else 1
            f = temporal_out(f, stride, first)
            h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)
            parts.append(Node("downsampler", children=(Node("conv", causal_conv(c, c, f, h * w)),)))
        downs.append(Node("down_block", children=tuple(parts), formula="magvit_down_block"))
        prev = c
    top = widths[-1]
    node = Node("encoder", children=(
        conv_in,
        module_list("down_blocks", downs),
        Node("mid_block", children=(module_list("convs", [resnet(top, top, f, h * w)] * layers),)),
        Node("conv_norm_out", ops.group_norm(top, f * h * w) + ops.activation(top * f * h * w)),
        Node("conv_out", causal_conv(top, 2 * latent, f, h * w)),
    ), formula="magvit_encoder")
    return node, f


def encode_chunks(frames: int) -> list[int]:
    """``_encode``'s calls: the first frame, then chunks of 4 (the last one shorter)."""
    return [1] + [min(ENCODE_CHUNK, frames - i) for i in range(1, frames, ENCODE_CHUNK)]


def magvit_encoder(*, in_channels: int, latent: int, widths: Sequence[int], layers: int, temporal: Sequence[bool],
                   frames: int, height: Any, width: Any) -> tuple[Node, int]:
    """The encoder over an ``encode`` of ``frames`` frames; returns it and the latent frames."""
    calls, total = [], 0
    for i, f in enumerate(encode_chunks(frames)):
        node, out = encoder_call(in_channels=in_channels, latent=latent, widths=widths, layers=layers,
                                 temporal=temporal, frames=f, height=height, width=width, first=i == 0)
        if out <= 0:
            from flopcalc.engine.errors import ResolutionError

            raise ResolutionError(f"AutoencoderKLMagvit: a chunk of {f} frame(s) leaves no latent frame after the "
                                  f"temporal down-samplers (encode {frames} frames: num_frames − 1 must divide by "
                                  f"{ENCODE_CHUNK}; the real call fails)")
        calls.append(node)
        total += out
    return _sum_calls(calls), total
