r"""The MoVQ autoencoder: diffusers ``VQModel`` (``models/autoencoders/vq_model.py``) with its
``Encoder`` / ``Decoder`` (``models/autoencoders/vae.py``), blocks from ``unet_2d_blocks.py``
(``DownEncoderBlock2D``, ``AttnDownEncoderBlock2D``, ``UNetMidBlock2D``, ``UpDecoderBlock2D``,
``AttnUpDecoderBlock2D``), ``ResnetBlockCondNorm2D`` (``models/resnet.py``) and ``SpatialNorm``
(``models/attention_processor.py``).

With ``norm_type: spatial`` (MoVQ) every decoder normalisation is a ``SpatialNorm`` conditioned
on the quantized latent :math:`z_q` (:math:`c_z` channels, nearest-upsampled to the feature
map): a GroupNorm of the :math:`f` feature channels, then ``norm · conv_y(z_q) + conv_b(z_q)``
with two 1×1 convolutions :math:`c_z \to f`. On an :math:`H \times W` map that is

.. math:: \mathrm{MACs}_\text{SpatialNorm} = 2\,H W\,c_z f

at *every* normalisation: two per ResNet, one per attention, one before ``conv_out``. A
``ResnetBlockCondNorm2D`` :math:`C_i \to C_o` therefore costs

.. math:: 9HW C_o (C_i + C_o) + 2 H W c_z (C_i + C_o) + [C_i \ne C_o]\,H W C_i C_o,

and a single-head attention over the :math:`HW` pixels of :math:`C` channels
:math:`4HWC^2 + 2(HW)^2 C` (+ :math:`2HWc_zC` for its spatial norm). With ``norm_type: group``
the norms are plain GroupNorms (no MACs), exactly the ``AutoencoderKL`` decoder.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.unet_blocks import downsample

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("resnet_block_cond_norm", "pixel_attention", "upsample")

ATTENTION_UP = "AttnUpDecoderBlock2D"
PLAIN_UP = "UpDecoderBlock2D"
ATTENTION_DOWN = "AttnDownEncoderBlock2D"
PLAIN_DOWN = "DownEncoderBlock2D"


@lru_cache(maxsize=1024)
def spatial_norm(name: str, f_channels: int, zq_channels: int, height: Any, width: Any) -> Node:
    r"""``SpatialNorm(f, c_z)``: ``F.interpolate(z_q, size, "nearest")``, ``GroupNorm(32, f)``,
    ``norm · conv_y(z_q) + conv_b(z_q)``. :math:`\mathrm{MACs} = 2 H W c_z f`."""
    hw = height * width
    return Node(
        name,
        ops.upsample_nearest(zq_channels * hw),
        children=(
            Node("norm_layer", ops.group_norm(f_channels, hw)),
            Node("conv_y", ops.conv2d(zq_channels, f_channels, 1, height, width)),
            Node("conv_b", ops.conv2d(zq_channels, f_channels, 1, height, width)),
        ),
        formula="spatial_norm",
    )


@lru_cache(maxsize=1024)
def cond_resnet_block(c_in: int, c_out: int, zq_channels: int, height: Any, width: Any) -> Node:
    """``ResnetBlockCondNorm2D(time_embedding_norm="spatial")``: SpatialNorm, SiLU, 3×3 conv,
    SpatialNorm, SiLU, 3×3 conv, and a 1×1 ``conv_shortcut`` when the widths differ."""
    hw = height * width
    children = [
        spatial_norm("norm1", c_in, zq_channels, height, width),
        Node("conv1", ops.activation(c_in * hw) + ops.conv2d(c_in, c_out, 3, height, width)),
        spatial_norm("norm2", c_out, zq_channels, height, width),
        Node("conv2", ops.activation(c_out * hw) + ops.conv2d(c_out, c_out, 3, height, width)),
    ]
    if c_in != c_out:
        children.append(Node("conv_shortcut", ops.conv2d(c_in, c_out, 1, height, width)))
    return Node("resnet", children=tuple(children), formula="resnet_block_cond_norm")


@lru_cache(maxsize=1024)
def pixel_attention(channels: int, height: Any, width: Any, zq_channels: int | None = None) -> Node:
    r"""The autoencoder blocks' ``Attention(C, heads=1, dim_head=C, bias=True, residual_connection=True)``
    over the :math:`HW` pixels: a GroupNorm (``group_norm``) or, with ``spatial_norm_dim``, a
    ``SpatialNorm`` (``spatial_norm``) first; q/k/v/out linears with biases.

    .. math:: \mathrm{MACs} = 4 H W C^2 + 2 (HW)^2 C\;[+\,2 H W c_z C]
    """
    n = height * width
    norm = (Node("group_norm", ops.group_norm(channels, n)) if zq_channels is None
            else spatial_norm("spatial_norm", channels, zq_channels, height, width))
    return Node(
        "attention",
        ops.attention(n, n, 1, channels),
        children=(
            norm,
            Node("to_q", ops.linear(n, channels, channels)),
            Node("to_k", ops.linear(n, channels, channels)),
            Node("to_v", ops.linear(n, channels, channels)),
            module_list("to_out", [Node("0", ops.linear(n, channels, channels))]),
        ),
        formula="pixel_attention",
    )


def _resnet(c_in: int, c_out: int, zq_channels: int | None, height: Any, width: Any) -> Node:
    if zq_channels is None:
        return resnet_block(c_in, c_out, height, width)
    return cond_resnet_block(c_in, c_out, zq_channels, height, width)


def mid_block(channels: int, height: Any, width: Any, *, add_attention: bool, zq_channels: int | None) -> Node:
    """``UNetMidBlock2D`` as the autoencoders build it: ResNet, [single-head attention], ResNet
    (``ResnetBlockCondNorm2D`` and spatially normalised attention when ``zq_channels`` is set)."""
    res = _resnet(channels, channels, zq_channels, height, width)
    children = [module_list("resnets", [res, res])]
    if add_attention:
        children.insert(0, module_list("attentions", [pixel_attention(channels, height, width, zq_channels)]))
    return Node("mid_block", children=tuple(children), formula="vq_mid_block")


def decoder(*, latent_channels: int, out_channels: int, block_out_channels: Sequence[int],
            up_block_types: Sequence[str], layers_per_block: int, height: Any, width: Any,
            spatial: bool, mid_block_add_attention: bool) -> Node:
    """diffusers ``Decoder`` from an ``height × width`` latent (``norm_type`` spatial when
    ``spatial``: its ``temb_channels`` are the latent channels, the width of :math:`z_q`)."""
    zq = latent_channels if spatial else None
    widths = list(reversed(block_out_channels))
    children = [
        Node("conv_in", ops.conv2d(latent_channels, widths[0], 3, height, width)),
        mid_block(widths[0], height, width, add_attention=mid_block_add_attention, zq_channels=zq),
    ]
    ups = []
    h, w, c_prev = height, width, widths[0]
    for i, (kind, c) in enumerate(zip(up_block_types, widths)):
        resnets = [_resnet(c_prev if j == 0 else c, c, zq, h, w) for j in range(layers_per_block + 1)]
        parts = [module_list("resnets", resnets)]
        if kind == ATTENTION_UP:
            parts.append(module_list("attentions", [pixel_attention(c, h, w, zq)] * (layers_per_block + 1)))
        if i < len(widths) - 1:
            h, w = 2 * h, 2 * w
            parts.append(module_list("upsamplers", [Node("upsampler", ops.upsample_nearest(c * h * w),
                                                         children=(Node("conv", ops.conv2d(c, c, 3, h, w)),),
                                                         formula="upsample")]))
        ups.append(Node("up_block", children=tuple(parts), formula=kind))
        c_prev = c
    c0 = block_out_channels[0]
    norm_out = (spatial_norm("conv_norm_out", c0, zq, h, w) if spatial
                else Node("conv_norm_out", ops.group_norm(c0, h * w)))
    children += [
        module_list("up_blocks", ups),
        norm_out,
        Node("conv_out", ops.activation(c0 * h * w) + ops.conv2d(c0, out_channels, 3, h, w)),
    ]
    return Node("decoder", children=tuple(children), formula="vq_decoder")


def encoder(*, in_channels: int, latent_channels: int, block_out_channels: Sequence[int],
            down_block_types: Sequence[str], layers_per_block: int, height: Any, width: Any,
            mid_block_add_attention: bool) -> Node:
    """diffusers ``Encoder(double_z=False)`` from an ``height × width`` image: ``conv_in``,
    ``down_blocks`` (ResNets, single-head attentions after each in ``AttnDownEncoderBlock2D``,
    a stride-2 3×3 convolution after all but the last), the mid block, GroupNorm, SiLU,
    ``conv_out`` to the latent channels."""
    children = [Node("conv_in", ops.conv2d(in_channels, block_out_channels[0], 3, height, width))]
    downs = []
    h, w, c_prev = height, width, block_out_channels[0]
    for i, (kind, c) in enumerate(zip(down_block_types, block_out_channels)):
        resnets = [resnet_block(c_prev if j == 0 else c, c, h, w) for j in range(layers_per_block)]
        parts = [module_list("resnets", resnets)]
        if kind == ATTENTION_DOWN:
            parts.append(module_list("attentions", [pixel_attention(c, h, w)] * layers_per_block))
        if i < len(block_out_channels) - 1:
            node, h, w = downsample(c, h, w, 0)
            parts.append(module_list("downsamplers", [node]))
        downs.append(Node("down_block", children=tuple(parts), formula=kind))
        c_prev = c
    top = block_out_channels[-1]
    children += [
        module_list("down_blocks", downs),
        mid_block(top, h, w, add_attention=mid_block_add_attention, zq_channels=None),
        Node("conv_norm_out", ops.group_norm(top, h * w)),
        Node("conv_out", ops.activation(top * h * w) + ops.conv2d(top, latent_channels, 3, h, w)),
    ]
    return Node("encoder", children=tuple(children), formula="vq_encoder")
