r"""Wan-Animate's own modules (diffusers ``models/transformers/transformer_wan_animate.py``): the face motion encoder
(``WanAnimateMotionEncoder``, a StyleGAN-style encoder of each ``s × s`` face frame), the face encoder
(``WanAnimateFaceEncoder``, causal 1-D convolutions over the frames' motion vectors) and the face adapter
(``WanAnimateFaceBlockCrossAttention``, each latent frame's tokens attending to that frame's face tokens). The Wan
blocks themselves are :mod:`flopcalc.formulas.wan`'s.

**Motion encoder**, per face frame (:282-353). Its convolutions and linears are ``F.conv2d`` / ``F.linear`` on
scaled parameters (``MotionConv2d``, ``MotionLinear``): torch counts them, thop (no ``nn`` module) does not.
``conv_in`` (1×1, 3 → c₀), then one ``MotionEncoderResBlock`` per halving from ``s`` down to 4: ``conv1`` (3×3, c → c,
stride 1), ``conv2`` (a 4×4 depthwise blur of c channels, padded 2, then 3×3 stride 2, c → c'), ``conv_skip`` (the
blur padded 1, then 1×1 stride 2, c → c'); ``conv_out`` (4×4 on the 4×4 map, c → style); ``motion_network``
(``motion_blocks − 1`` style → style linears and style → motion_dim); the motion synthesis
``diag(m)·Qᵀ`` (a batched matmul motion_dim × motion_dim · motion_dim × out; the QR decomposition has no counted
work). On a map of side :math:`S` a res block costs

.. math:: S^2 \cdot 9 c^2 + (S+1)^2 \cdot 16 c + (S/2)^2 \cdot 9 c c' + (S-1)^2 \cdot 16 c + (S/2)^2 \cdot c c'

**Face encoder** (:356-419) on :math:`F` motion vectors of width :math:`m`: ``conv1_local`` (``nn.Conv1d(m, h·k, 3)``
after a causal pad of 2: :math:`F` positions), split into :math:`k` heads, ``conv2`` / ``conv3``
(``nn.Conv1d(h, h, 3, stride 2)``, causal pad: :math:`F_2 = \lfloor (F-1)/2 \rfloor + 1`, :math:`F_3` likewise), each
followed by an ``nn.LayerNorm`` without affine, and ``out_proj`` (h → d) on the :math:`k F_3` vectors; a padding token
(d parameters) is appended to each frame's :math:`k` tokens.

**Face adapter** (:422-548): ``pre_norm_q`` / ``pre_norm_kv`` (LayerNorm, no affine), ``to_q`` on the :math:`N` video
tokens, ``to_k`` / ``to_v`` on the :math:`T (k + 1)` face tokens (:math:`T = F_3 + 1` after the model prepends a zero
frame), per-head ``norm_q`` / ``norm_k`` (``nn.RMSNorm(d_h)``), then per latent frame the :math:`N / T` queries attend
to that frame's :math:`k + 1` tokens, ``to_out``:

.. math:: \mathrm{MACs} = 2 N d^2 + 2 T (k+1) d^2 + 2 h N (k+1) d_h
"""

from __future__ import annotations

import math
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("wan_animate_face_adapter", "wan_animate_motion_res_block")

#: transformer_wan_animate.py:38-48, ``WAN_ANIMATE_MOTION_ENCODER_CHANNEL_SIZES`` (the default ``channels``).
MOTION_ENCODER_CHANNELS = {"4": 512, "8": 512, "16": 512, "32": 512, "64": 256, "128": 128, "256": 64, "512": 32,
                           "1024": 16}
#: ``MotionEncoderResBlock``'s blur kernel (1, 3, 3, 1): a 4×4 depthwise filter.
BLUR_TAPS = 4
#: ``WanAnimateMotionEncoder(motion_blocks=5)``: the linears of ``motion_network``.
MOTION_BLOCKS = 5


def _fconv(c_in: int, c_out: int, kernel: int, out_side: Any, *, groups: int = 1, params: bool = True,
           bias: bool = False) -> Cost:
    """A functional ``F.conv2d`` (thop does not see it) on an ``out_side²`` output; ``params`` the weight's."""
    cost = ops.conv(c_in, c_out, kernel * kernel, out_side * out_side, groups=groups, bias=bias, thop_hooked=False)
    return cost if params else Cost(functional=cost.functional)


def motion_conv(name: str, c_in: int, c_out: int, kernel: int, side: Any, *, stride: int = 1, padding: int = 0,
                blur: bool = False, activation: bool = True, bias: bool = True) -> tuple[Node, Any]:
    """``MotionConv2d`` (:111-177) on a ``side × side`` map: the optional depthwise blur (``F.conv2d`` with the
    non-persistent blur buffer, padded ``⌈p/2⌉``, ``p = (4 − stride) + (kernel − 1)``), the scaled convolution, and
    ``FusedLeakyReLU`` (a bias of ``c_out``) when ``activation`` (then the conv has no bias). Returns the node and the
    output side."""
    cost = Cost()
    if blur:
        p = (BLUR_TAPS - stride) + (kernel - 1)
        side = side + 2 * ((p + 1) // 2) - BLUR_TAPS + 1
        cost = cost + _fconv(c_in, c_in, BLUR_TAPS, side, groups=c_in, params=False)
    out = (side + 2 * padding - kernel) // stride + 1 if isinstance(side, int) else \
        ops.conv_output_size(side, kernel, stride, padding)
    cost = cost + _fconv(c_in, c_out, kernel, out, bias=bias and not activation)
    if activation:
        cost = cost + ops.parameters(c_out) + ops.activation(c_out * out * out)
    return Node(name, cost, formula="motion_conv"), out


def motion_encoder(*, size: int, style_dim: int, motion_dim: int, out_dim: int, channels: dict, frames: Any) -> Node:
    """``WanAnimateMotionEncoder`` on ``frames`` face frames of ``size × size`` (see the module doc)."""
    c0 = int(channels[str(size)])
    conv_in, side = motion_conv("conv_in", 3, c0, 1, size)
    blocks, c = [], c0
    for i in range(int(math.log(size, 2)), 2, -1):
        c_out = int(channels[str(2 ** (i - 1))])
        conv1, _ = motion_conv("conv1", c, c, 3, side, padding=1)
        conv2, out = motion_conv("conv2", c, c_out, 3, side, stride=2, blur=True)
        skip, _ = motion_conv("conv_skip", c, c_out, 1, side, stride=2, blur=True, activation=False, bias=False)
        blocks.append(Node("block", children=(conv1, conv2, skip), formula="wan_animate_motion_res_block"))
        c, side = c_out, out
    conv_out, _ = motion_conv("conv_out", c, style_dim, 4, side, activation=False, bias=False)
    # MotionLinear (transformer_wan_animate.py:187): F.linear on its own parameters, not an nn.Linear
    linears = [Node("layer", ops.linear(1, style_dim, style_dim, thop_hooked=False, nn_linear=False))] * (MOTION_BLOCKS - 1)
    linears.append(Node("layer", ops.linear(1, style_dim, motion_dim, thop_hooked=False, nn_linear=False)))
    from flopcalc.engine.cost import module_list

    # the QR-orthogonalised ``motion_synthesis_weight`` (a parameter of its own: _keep_in_fp32_modules names it)
    synthesis = Node("motion_synthesis_weight", ops.parameters(out_dim * motion_dim))
    tree = Node("motion_encoder", ops.matmul(motion_dim, motion_dim, out_dim),
                children=(conv_in, module_list("res_blocks", blocks), conv_out, module_list("motion_network", linears),
                          synthesis),
                formula="wan_animate_motion_encoder")
    return _repeat(tree, frames)


def _repeat(node: Node, times: Any) -> Node:
    """``node``'s work ``times`` times (one call per face frame), its parameters once."""
    from dataclasses import replace

    from flopcalc.engine.cost import work_only

    cost = work_only(node.cost) * times + Cost(params=node.cost.params, largest_module=node.cost.largest_module,
                                                linear_weights=node.cost.linear_weights,
                                                linear_rows=node.cost.linear_rows, linear_blocks=node.cost.linear_blocks,
                                                linear_packed=node.cost.linear_packed,
                                                linear_layers=node.cost.linear_layers)
    return replace(node, cost=cost, children=tuple(_repeat(c, times) for c in node.children))


def strided_length(frames: Any, stride: int = 2) -> Any:
    """A causal ``Conv1d(k=3, stride)`` after a pad of 2: ``(F + 2 − 3) // stride + 1``."""
    if isinstance(frames, int):
        return (frames - 1) // stride + 1
    return ops.exact_div(frames - 1, stride) + 1


def face_encoder(*, in_dim: int, out_dim: int, hidden_dim: int, heads: int, frames: Any) -> tuple[Node, Any]:
    """``WanAnimateFaceEncoder`` on ``frames`` motion vectors; returns the node and its output frames ``F_3``."""
    f2 = strided_length(frames)
    f3 = strided_length(f2)
    children = (
        Node("conv1_local", ops.conv(in_dim, hidden_dim * heads, 3, frames)),
        Node("conv2", ops.conv(hidden_dim, hidden_dim, 3, heads * f2)),
        Node("conv3", ops.conv(hidden_dim, hidden_dim, 3, heads * f3)),
        Node("norm1", ops.layer_norm(heads * frames, hidden_dim, affine=False)),
        Node("norm2", ops.layer_norm(heads * f2, hidden_dim, affine=False)),
        Node("norm3", ops.layer_norm(heads * f3, hidden_dim, affine=False)),
        Node("out_proj", ops.linear(heads * f3, hidden_dim, out_dim)),
        Node("padding_tokens", ops.parameters(out_dim)),
    )
    act = ops.activation(hidden_dim * heads * (frames + f2 + f3))
    return Node("face_encoder", act, children, formula="wan_animate_face_encoder"), f3


def face_adapter(*, dim: int, heads: int, tokens: Any, face_tokens: Any, per_frame: Any) -> Node:
    """One ``WanAnimateFaceBlockCrossAttention`` (see the module doc): ``face_tokens`` = T (k + 1) keys in all,
    ``per_frame`` = k + 1 of them for each query."""
    head_dim = dim // heads
    cost = (ops.layer_norm(tokens, dim, affine=False) + ops.layer_norm(face_tokens, dim, affine=False)
            + ops.rms_norm(tokens * heads, head_dim) + ops.rms_norm(face_tokens * heads, head_dim)
            + ops.attention(tokens, per_frame, heads, head_dim))
    return Node("adapter", cost, children=(
        Node("to_q", ops.linear(tokens, dim, dim)),
        Node("to_k", ops.linear(face_tokens, dim, dim)),
        Node("to_v", ops.linear(face_tokens, dim, dim)),
        Node("to_out", ops.linear(tokens, dim, dim)),
    ), formula="wan_animate_face_adapter")
