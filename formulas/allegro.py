r"""Allegro (diffusers ``models/transformers/transformer_allegro.py`` and ``models/autoencoders/autoencoder_kl_allegro.py``).

**Transformer block** (``AllegroTransformerBlock``, transformer_allegro.py:33-174) on :math:`N` video tokens of width
:math:`d = h d_h` and :math:`T` caption tokens (already projected to :math:`d`): ``norm1`` (LayerNorm) and the
adaLN-single modulation, ``attn1`` (self-attention, RoPE applied elementwise, q/k/v bias per ``attention_bias``),
``attn2`` (cross-attention to the caption, no norm before it), ``norm2`` and ``ff`` (``FeedForward``, 4d, tanh GELU);
``norm3`` is built but never called (parameters only).

.. math:: \mathrm{MACs} = 4 N d^2 + 2 h N^2 d_h + 2 N d^2 + 2 T d_c d + 2 h N T d_h + 8 N d^2

**VAE decoder** (``AllegroDecoder3D``, autoencoder_kl_allegro.py:541-673) on a :math:`T \times h \times w` latent: each
2-D layer (``conv_in``, ``ResnetBlock2D``, up-samplers, ``conv_out``) runs on every frame; 3-D layers mix frames:
``temp_conv_in`` / ``temp_conv_out`` (``Conv3d`` (3, 1, 1)), and an ``AllegroTemporalConvLayer`` (:33-131) after
each ResNet: four GroupNorm–SiLU–``Conv3d`` stages with the frames replicate-padded by one on each side, kernels
(3, 1, 1) (:math:`4 \cdot 3 C^2` per position), or, for the temporal up-sampler, ``conv1`` (1, 3, 3) to
:math:`2C` channels (the frames doubled) and three (3, 3, 3) stages on the doubled frames. The mid block's attention
is single-head self-attention over each frame's :math:`hw` positions. ``AutoencoderKLAllegro`` decodes only in tiles
(``tiled_decode``, :952-1038): ``post_quant_conv`` (1×1) on the whole latent, then the decoder on every
24 × 320 × 320-pixel tile (6 × 40 × 40 latent), tiles every 16 frames and 200 × 240 pixels (4 × 25 × 30 latent),
``⌊(T − 6)/4⌋ + 1`` × ``⌊(h − 40)/25⌋ + 1`` × ``⌊(w − 40)/30⌋ + 1`` of them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list, work_only
from flopcalc.formulas import ops
from flopcalc.formulas.resnet_block import resnet_block, spatial_self_attention
from flopcalc.formulas.transformer_parts import attention_module, cross_attention, feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("allegro_transformer_block", "allegro_temporal_conv", "allegro_up_block")

#: ``AutoencoderKLAllegro.__init__`` (:783-796): tile of 24 frames × ``sample_size``², overlapping 8 frames, 120 rows and
#: 80 columns of pixels.
TILE_FRAMES, OVERLAP_T, OVERLAP_H, OVERLAP_W = 24, 8, 120, 80


def allegro_transformer_block(*, dim: int, heads: int, head_dim: int, tokens: Any, text_tokens: Any,
                              cross_attention_dim: int, bias: bool, norm_affine: bool) -> Node:
    """One ``AllegroTransformerBlock`` (module doc)."""
    return Node("block", children=(
        Node("norm1", ops.layer_norm(tokens, dim, affine=norm_affine)),
        attention_module("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, bias=bias),
        Node("norm2", ops.layer_norm(tokens, dim, affine=norm_affine)),
        cross_attention("attn2", tokens=tokens, dim=dim, context_tokens=text_tokens, context_dim=cross_attention_dim,
                        heads=heads, head_dim=head_dim, bias=bias),
        Node("norm3", ops.layer_norm(0, dim, affine=norm_affine)),
        feed_forward("ff", tokens, dim),
        Node("scale_shift_table", ops.parameters(6 * dim)),
    ), formula="allegro_transformer_block")


def per_frame(node: Node, frames: Any) -> Node:
    """``node``'s work on each of ``frames`` frames (a 2-D layer on the frames batched), its parameters once."""
    cost = work_only(node.cost) * frames + replace(node.cost, linear=0, conv=0, attention=0, functional=0,
                                                   thop_extra=0, elementwise=0, scores=0)
    return replace(node, cost=cost, children=tuple(per_frame(c, frames) for c in node.children))


def _conv3d(c_in: int, c_out: int, kernel: Sequence[int], positions: Any) -> Cost:
    return ops.conv(c_in, c_out, kernel[0] * kernel[1] * kernel[2], positions)


def _stage(name: str, c_norm: int, c_in: int, c_out: int, kernel: Sequence[int], positions: Any,
           norm_positions: Any) -> Node:
    """``nn.Sequential(GroupNorm, SiLU, [Dropout,] Conv3d)``: the conv is child ``2`` or ``3``."""
    conv = Node("3" if name != "conv1" and name != "conv4" else "2", _conv3d(c_in, c_out, kernel, positions))
    norm = Node("0", ops.group_norm(c_norm, norm_positions) + ops.activation(c_norm * norm_positions))
    return Node(name, children=(norm, conv))


def temporal_conv(channels: int, frames: Any, area: Any, *, up: bool = False) -> tuple[Node, Any]:
    """``AllegroTemporalConvLayer(C, C)`` on ``frames`` frames of ``area`` positions: the plain layer (kernels
    (3, 1, 1)) or, with ``up``, the temporal up-sampler (``stride=3``). Returns the node and the frames after it."""
    c = channels
    if up:
        out = 2 * frames
        stages = [_stage("conv1", c, c, 2 * c, (1, 3, 3), frames * area, frames * area)]
        kernel = (3, 3, 3)
    else:
        out = frames
        stages = [_stage("conv1", c, c, c, (3, 1, 1), frames * area, (frames + 2) * area)]
        kernel = (3, 1, 1)
    # conv2..conv4: GroupNorm on the padded frames (out + 2), conv back to ``out`` frames
    stages += [_stage(n, c, c, c, kernel, out * area, (out + 2) * area) for n in ("conv2", "conv3", "conv4")]
    return Node("temp_conv", children=tuple(stages), formula="allegro_temporal_conv"), out


def allegro_decoder(*, latent_channels: int, out_channels: int, block_out_channels: Sequence[int], layers_per_block: int,
                    temporal_upsample: Sequence[bool], frames: Any, height: Any, width: Any) -> Node:
    """``AllegroDecoder3D`` on a ``frames × height × width`` latent (module doc)."""
    widths = list(reversed(block_out_channels))
    top = widths[0]
    t, h, w = frames, height, width

    def res(c_in: int, c_out: int) -> Node:
        return per_frame(resnet_block(c_in, c_out, h, w), t)

    temp, _ = temporal_conv(top, t, h * w)
    mid = Node("mid_block", children=(
        module_list("resnets", [res(top, top), res(top, top)]),
        module_list("temp_convs", [temp, temp]),
        module_list("attentions", [per_frame(spatial_self_attention(top, h, w, head_dim=top), t)]),
    ), formula="allegro_mid_block")
    children = [
        Node("conv_in", ops.conv2d(latent_channels, top, 3, t * h, w)),
        Node("temp_conv_in", _conv3d(top, top, (3, 1, 1), t * h * w)),
        mid,
    ]
    ups, c_prev = [], top
    for i, c in enumerate(widths):
        resnets, temps = [], []
        for j in range(layers_per_block + 1):
            resnets.append(res(c_prev if j == 0 else c, c))
            temps.append(temporal_conv(c, t, h * w)[0])
        parts = [module_list("resnets", resnets), module_list("temp_convs", temps)]
        if temporal_upsample[i]:
            node, t = temporal_conv(c, t, h * w, up=True)
            parts.append(replace(node, name="temp_conv_up"))
        if i < len(widths) - 1:
            h, w = 2 * h, 2 * w
            parts.append(module_list("upsamplers", [
                Node("upsample", children=(Node("conv", ops.upsample_nearest(c * t * h * w)
                                                + ops.conv2d(c, c, 3, t * h, w)),), formula="upsample")]))
        ups.append(Node("up_block", children=tuple(parts), formula="allegro_up_block"))
        c_prev = c
    c0 = block_out_channels[0]
    children += [
        module_list("up_blocks", ups),
        Node("conv_norm_out", ops.group_norm(c0, t * h * w) + ops.activation(c0 * t * h * w)),
        Node("temp_conv_out", _conv3d(c0, c0, (3, 1, 1), t * h * w)),
        Node("conv_out", ops.conv2d(c0, out_channels, 3, t * h, w)),
    ]
    return Node("decoder", children=tuple(children), formula="allegro_decoder")
