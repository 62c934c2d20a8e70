r"""Stable Video Diffusion's spatio-temporal blocks (diffusers ``models/resnet.py``
``SpatioTemporalResBlock`` / ``TemporalResnetBlock`` / ``AlphaBlender``,
``models/transformers/transformer_temporal.py`` ``TransformerSpatioTemporalModel``,
``models/attention.py`` ``TemporalBasicTransformerBlock``), on :math:`F` frames of an :math:`H \times W`
map batched as :math:`F` images (``sample.flatten(0, 1)``).

A spatial module runs on every frame: its MACs are :math:`F` times one frame's (:func:`per_frames`),
its parameters once. The temporal ResNet convolves across frames with :math:`3 \times 1 \times 1`
kernels (``Conv3d``): :math:`3 F H W C_i C_o` MACs per convolution. The temporal transformer block
runs on the :math:`HW` pixels as sequences of :math:`F` frames:

.. math::

   \mathrm{MACs} = \underbrace{3 F HW d \cdot 4d}_{\text{ff\_in (GEGLU)}} + \underbrace{4 F HW d d_i
   + 2 h HW F^2 d_h}_{\text{attn1}} + \underbrace{2 F HW d d_i + 2 HW m d_c d_i + 2 h HW F m d_h}_{\text{attn2}}
   + \underbrace{3 F HW d \cdot 4d}_{\text{ff (GEGLU)}}

with :math:`m` context vectors of width :math:`d_c` (the first frame's, per pixel sequence).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import WEIGHT_FIELDS, Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.cross_attention_block import cross_attention_block
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.transformer_parts import feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("spatio_temporal_res_block", "transformer_spatio_temporal", "temporal_transformer_block")


def per_frames(node: Node, frames: Any) -> Node:
    """``node`` run on ``frames`` frames batched together: its work × frames, its weights once."""
    cost = replace(node.cost * frames, **{f: getattr(node.cost, f) for f in WEIGHT_FIELDS})
    return replace(node, cost=cost, children=tuple(per_frames(c, frames) for c in node.children))


def _temporal_conv(c_in: int, c_out: int, frames: Any, height: Any, width: Any, kernel: int = 3) -> Cost:
    """``nn.Conv3d(c_in, c_out, (kernel, 1, 1), padding=(kernel // 2, 0, 0))`` over ``frames × H × W``."""
    return ops.conv(c_in, c_out, kernel, frames * height * width)


@lru_cache(maxsize=1024)
def temporal_res_block(channels: int, frames: Any, height: Any, width: Any, *, temb_channels: int | None) -> Node:
    """``TemporalResnetBlock`` (resnet.py:546): GroupNorm(32), Conv3d (3, 1, 1), ``time_emb_proj`` on the
    ``frames`` rows of the time embedding (none in the VAE), GroupNorm, Conv3d (in = out here: no shortcut)."""
    n = frames * height * width
    children = [Node("norm1", ops.group_norm(channels, n) + ops.activation(channels * n)),
                Node("conv1", _temporal_conv(channels, channels, frames, height, width))]
    if temb_channels:
        children.append(Node("time_emb_proj", ops.activation(frames * temb_channels)
                             + ops.linear(frames, temb_channels, channels)))
    children += [Node("norm2", ops.group_norm(channels, n) + ops.activation(channels * n)),
                 Node("conv2", _temporal_conv(channels, channels, frames, height, width))]
    return Node("temporal_res_block", children=tuple(children), formula="temporal_res_block")


@lru_cache(maxsize=1024)
def spatio_temporal_res_block(c_in: int, c_out: int, frames: Any, height: Any, width: Any, *,
                              temb_channels: int | None) -> Node:
    """``SpatioTemporalResBlock`` (resnet.py:639): a ``ResnetBlock2D`` on every frame, the temporal ResNet
    on its output, and the ``AlphaBlender`` time mixer (one learned ``mix_factor``)."""
    spatial = resnet_block(c_in, c_out, height, width, temb_channels=temb_channels)
    return Node("resnet", children=(
        replace(per_frames(spatial, frames), name="spatial_res_block"),
        temporal_res_block(c_out, frames, height, width, temb_channels=temb_channels),
        Node("time_mixer", ops.parameters(1) + ops.activation(3 * frames * c_out * height * width)),
    ), formula="spatio_temporal_res_block")


@lru_cache(maxsize=1024)
def temporal_transformer_block(dim: int, heads: int, head_dim: int, frames: Any, sequences: Any, *,
                               context_tokens: Any, context_dim: int) -> Node:
    """``TemporalBasicTransformerBlock(dim, dim, heads, head_dim, cross_attention_dim)`` (attention.py) on
    ``sequences`` pixel sequences of ``frames`` tokens: ``norm_in`` and the GEGLU ``ff_in``, self-attention
    across the frames, cross-attention to ``context_tokens`` vectors per sequence, the GEGLU ``ff``."""
    n = frames * sequences
    inner = heads * head_dim
    ln = ops.layer_norm(n, dim)
    attn1 = (ops.linear(n, dim, inner, bias=False) * 3 + ops.linear(n, inner, dim)
             + ops.attention(frames, frames, heads, head_dim) * sequences)
    attn2 = (ops.linear(n, dim, inner, bias=False) + ops.linear(sequences * context_tokens, context_dim, inner,
                                                                bias=False) * 2
             + ops.linear(n, inner, dim) + ops.attention(frames, context_tokens, heads, head_dim) * sequences)
    return Node("block", children=(
        Node("norm_in", ln),
        feed_forward("ff_in", n, dim, gated=True),
        Node("norm1", ln), Node("attn1", attn1, formula="attention"),
        Node("norm2", ln), Node("attn2", attn2, formula="cross_attention"),
        Node("norm3", ln),
        feed_forward("ff", n, dim, gated=True),
    ), formula="temporal_transformer_block")


@lru_cache(maxsize=1024)
def transformer_spatio_temporal(channels: int, heads: int, frames: Any, height: Any, width: Any, *, layers: int,
                                context_tokens: Any, context_dim: int) -> Node:
    """``TransformerSpatioTemporalModel(heads, channels // heads, in_channels=channels, num_layers=layers,
    cross_attention_dim)`` (transformer_temporal.py): GroupNorm, linear ``proj_in``, per layer a spatial
    ``BasicTransformerBlock`` on every frame and a temporal block on every pixel (after ``time_pos_embed``,
    a ``TimestepEmbedding`` of the frame indices), blended by ``time_mixer``; linear ``proj_out``."""
    head_dim = channels // heads
    inner = heads * head_dim
    hw = height * width
    n = frames * hw
    spatial = per_frames(cross_attention_block(dim=inner, heads=heads, head_dim=head_dim, tokens=hw,
                                               context_tokens=context_tokens, context_dim=context_dim), frames)
    temporal = temporal_transformer_block(inner, heads, head_dim, frames, hw, context_tokens=context_tokens,
                                          context_dim=context_dim)
    return Node("attention", children=(
        Node("norm", ops.group_norm(channels, n)),
        Node("proj_in", ops.linear(n, channels, inner)),
        module_list("transformer_blocks", [spatial] * layers),
        module_list("temporal_transformer_blocks", [temporal] * layers),
        mlp_embedder("time_pos_embed", channels, 4 * channels, channels, tokens=frames),
        Node("time_mixer", ops.parameters(1) + ops.activation(3 * n * inner) * layers),
        Node("proj_out", ops.linear(n, inner, channels)),
    ), formula="transformer_spatio_temporal")


def _weights_only(node: Node) -> Node:
    """A module that is built but never called: its parameters, no work."""
    return per_frames(node, 0)


def temporal_decoder(*, latent_channels: int, out_channels: int, block_out_channels: list[int], layers_per_block: int,
                     frames: Any, height: Any, width: Any) -> Node:
    """``TemporalDecoder`` (autoencoder_kl_temporal_decoder.py) on one ``decode`` call of ``frames``
    latents: ``conv_in`` per frame; ``MidBlockTemporalDecoder`` (``resnets[0]``, then the single-head
    ``attentions[0]`` and ``resnets[1]``; further resnets are built but never run); up blocks of
    ``layers_per_block + 1`` ``SpatioTemporalResBlock`` s (no time embedding) and a nearest ×2 + 3×3
    convolution; ``conv_norm_out``, ``conv_out`` per frame, then ``time_conv_out``, a (3, 1, 1) ``Conv3d``
    across the frames."""
    from flopcalc.formulas.resnet_block import spatial_self_attention

    widths = list(reversed(block_out_channels))
    top = widths[0]
    h, w = height, width

    def res(ci: int, co: int, hh, ww) -> Node:
        return spatio_temporal_res_block(ci, co, frames, hh, ww, temb_channels=None)

    mid_resnets = [res(top, top, h, w) for _ in range(layers_per_block)]
    mid_resnets = mid_resnets[:2] + [_weights_only(r) for r in mid_resnets[2:]]
    attention = per_frames(spatial_self_attention(top, h, w, head_dim=top), frames)
    mid = Node("mid_block", children=(
        module_list("resnets", mid_resnets),
        module_list("attentions", [attention if layers_per_block >= 2 else _weights_only(attention)]),
    ), formula="mid_block_temporal_decoder")
    ups, c_prev = [], top
    for i, c in enumerate(widths):
        parts = [module_list("resnets", [res(c_prev if j == 0 else c, c, h, w) for j in range(layers_per_block + 1)])]
        if i < len(widths) - 1:
            h, w = 2 * h, 2 * w
            parts.append(module_list("upsamplers", [per_frames(Node(
                "upsample", ops.upsample_nearest(c * h * w) + ops.conv2d(c, c, 3, h, w), formula="upsample"), frames)]))
        ups.append(Node("up_block", children=tuple(parts), formula="up_block_temporal_decoder"))
        c_prev = c
    c0 = block_out_channels[0]
    n = frames * h * w
    return Node("decoder", children=(
        per_frames(Node("conv_in", ops.conv2d(latent_channels, top, 3, height, width)), frames),
        mid,
        module_list("up_blocks", ups),
        Node("conv_norm_out", ops.group_norm(c0, n) + ops.activation(c0 * n)),
        per_frames(Node("conv_out", ops.conv2d(c0, out_channels, 3, h, w)), frames),
        Node("time_conv_out", _temporal_conv(out_channels, out_channels, frames, h, w)),
    ), formula="temporal_decoder")
