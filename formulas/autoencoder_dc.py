r"""The deep-compression autoencoder of SANA (diffusers ``models/autoencoders/autoencoder_dc.py``:
``Encoder``, ``Decoder``, ``ResBlock``, ``EfficientViTBlock``, ``DCUpBlock2d``, ``DCDownBlock2d``;
``attention_processor.py``: ``SanaMultiscaleLinearAttention``, ``SanaMultiscaleAttentionProjection``,
``SanaMultiscaleAttnProcessor2_0``; ``GLUMBConv`` from ``sana_transformer.py``).

On an :math:`H \times W` map (:math:`P = HW` positions) of :math:`C` channels:

* ``ResBlock``: 3×3 conv :math:`C \to C` (bias), activation, 3×3 conv :math:`C \to C_o` (no bias),
  norm (RMSNorm with bias, or BatchNorm2d), residual: :math:`\mathrm{MACs} = 9P\,C(C + C_o)`.
* ``EfficientViTBlock`` = multi-scale linear attention + ``GLUMBConv(C, C, expand_ratio=4)`` with an
  RMSNorm. The attention has :math:`h = \lfloor C/d \rfloor` heads of :math:`d` (``attention_head_dim``),
  :math:`I = hd`; q, k, v are ``nn.Linear`` :math:`C \to I` (no bias); each of the :math:`S` scales
  (``qkv_multiscales``, kernel :math:`k`) adds a depthwise :math:`k\times k` conv on the :math:`3I`
  channels and a grouped 1×1 conv (``3h`` groups of :math:`d`); the :math:`(1+S)h` heads then run
  ReLU linear attention when :math:`P > d` (:math:`2(1{+}S)h P d(d{+}1)` MACs; see
  :mod:`flopcalc.formulas.sana`) or the quadratic form when :math:`P \le d`
  (:math:`2(1{+}S)h d P^2`); ``to_out`` is ``nn.Linear`` :math:`(1{+}S)I \to C`:

  .. math::

     \mathrm{MACs} = 3PCI + \sum_{k}\bigl(3PIk^2 + 3PId\bigr) + 2(1{+}S)hPd(d{+}1) + (1{+}S)PIC
                     + P(8C\cdot C + 72C + 4C\cdot C)

  (the last term is the Mix-FFN with :math:`F = 4C`: :math:`P(2FC + 18F + FC)`).
* ``DCUpBlock2d`` :math:`C_i \to C_o`: nearest 2× upsampling then a 3×3 conv :math:`C_i \to C_o` on
  the :math:`4P` map (``interpolate``), or a 3×3 conv :math:`C_i \to 4C_o` on the :math:`P` map then
  ``pixel_shuffle``: :math:`36 P C_i C_o` MACs either way; the shortcut (``repeat_interleave`` +
  ``pixel_shuffle``) does no MACs.
* ``DCDownBlock2d`` :math:`C_i \to C_o`: a stride-2 3×3 conv (``conv``) or a 3×3 conv to
  :math:`C_o/4` then ``pixel_unshuffle`` (``pixel_unshuffle``): :math:`\tfrac94 P C_i C_o` MACs; the
  shortcut (unshuffle and a channel-group mean) does no MACs.

Decoder (latent :math:`h \times w`, widths :math:`b_0..b_{K-1}`, :math:`r_i` layers):
``conv_in`` 3×3 :math:`c_z \to b_{K-1}` (plus a channel-repeat shortcut), ``up_blocks[i]`` for
:math:`i = K{-}1..0`: (for :math:`i < K{-}1`, :math:`r_i > 0`) a ``DCUpBlock2d`` :math:`b_{i+1} \to b_i`
doubling the map, then :math:`r_i` blocks of type ``decoder_block_types[i]``; ``norm_out``
(RMSNorm with bias), ReLU, ``conv_out`` 3×3 to the image channels (a ``DCUpBlock2d`` when
:math:`r_0 = 0`). The encoder mirrors it with ``DCDownBlock2d`` and a channel-mean shortcut at
``conv_out``. Every term is linear in the map area except quadratic attention on maps of at most
:math:`d` positions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.sana import glumb_conv, linear_attention, quadratic_relu_attention

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("efficient_vit_block", "dc_res_block", "dc_down_block", "dc_up_block")

#: ``get_normalization`` kinds that run on the NCHW maps of the DC-AE (a LayerNorm would act on W).
NORM_TYPES = ("rms_norm", "batch_norm")
BLOCK_TYPES = ("ResBlock", "EfficientViTBlock")
#: ``EfficientViTBlock`` builds ``GLUMBConv(C, C)`` with the default ``expand_ratio``.
EFFICIENT_VIT_EXPAND_RATIO = 4


def dc_norm(norm_type: str, channels: int, area: Any) -> Cost:
    """``get_normalization(norm_type, channels)`` (normalization.py; eps 1e-5, affine, bias) on a
    ``channels × area`` map: ``RMSNorm`` (weight and bias; no thop rule) or ``nn.BatchNorm2d``
    (weight and bias; thop counts 2 ops per element, doubled for the affine)."""
    if norm_type == "rms_norm":
        return replace(ops.rms_norm(area, channels) + ops.parameters(channels), largest_module=2 * channels)
    if norm_type == "batch_norm":
        numel = channels * area
        return Cost(thop_extra=4 * numel, elementwise=ops.NORM_AFFINE_OPS * numel, params=2 * channels,
                    largest_module=2 * channels)
    raise ValueError(f"norm type {norm_type!r} is not supported on DC-AE maps (only {', '.join(NORM_TYPES)})")


def res_block(in_channels: int, out_channels: int, height: Any, width: Any, norm_type: str) -> Node:
    r"""``ResBlock``: ``conv1`` 3×3 :math:`C \to C` (bias), activation, ``conv2`` 3×3
    :math:`C \to C_o` (no bias), ``norm``. :math:`\mathrm{MACs} = 9HW\,C(C + C_o)`."""
    area = height * width
    return Node("res_block", children=(
        Node("conv1", ops.conv2d(in_channels, in_channels, 3, height, width) + ops.activation(in_channels * area)),
        Node("conv2", ops.conv2d(in_channels, out_channels, 3, height, width, bias=False)),
        Node("norm", dc_norm(norm_type, out_channels, area)),
    ), formula="dc_res_block")


def multiscale_linear_attention(channels: int, head_dim: int, kernel_sizes: Sequence[int], height: Any, width: Any,
                                norm_type: str) -> Node:
    r"""``SanaMultiscaleLinearAttention(C, C, attention_head_dim=d, kernel_sizes, norm_type,
    residual_connection=True)`` with ``SanaMultiscaleAttnProcessor2_0`` (closed form in the module
    doc). Linear attention runs when the map has more positions than ``d``; on ints the test is
    exact, on symbols the map is taken to be larger (any image latent is)."""
    heads = channels // head_dim
    inner = heads * head_dim
    area = height * width
    scales = len(kernel_sizes)
    projections = [
        Node("scale", children=(
            Node("proj_in", ops.conv2d(3 * inner, 3 * inner, k, height, width, groups=3 * inner, bias=False)),
            Node("proj_out", ops.conv2d(3 * inner, 3 * inner, 1, height, width, groups=3 * heads, bias=False)),
        ), formula="multiscale_projection")
        for k in kernel_sizes
    ]
    all_heads = (1 + scales) * heads
    quadratic = isinstance(area, int) and area <= head_dim
    mixing = (quadratic_relu_attention if quadratic else linear_attention)(area, all_heads, head_dim)
    children = [
        Node("to_q", ops.linear(area, channels, inner, bias=False)),
        Node("to_k", ops.linear(area, channels, inner, bias=False)),
        Node("to_v", ops.linear(area, channels, inner, bias=False)),
    ]
    if projections:
        children.append(module_list("to_qkv_multiscale", projections))
    children += [
        Node("attention", mixing),
        Node("to_out", ops.linear(area, (1 + scales) * inner, channels, bias=False)),
        Node("norm_out", dc_norm(norm_type, channels, area)),
    ]
    return Node("attn", children=tuple(children), formula="multiscale_linear_attention")


def efficient_vit_block(channels: int, head_dim: int, kernel_sizes: Sequence[int], height: Any, width: Any,
                        norm_type: str) -> Node:
    """``EfficientViTBlock``: ``attn`` (multi-scale linear attention, residual inside) then
    ``conv_out`` (``GLUMBConv(C, C, expand_ratio=4, norm_type="rms_norm")``, residual inside)."""
    attn = multiscale_linear_attention(channels, head_dim, kernel_sizes, height, width, norm_type)
    ffn = glumb_conv("conv_out", in_channels=channels, out_channels=channels,
                     expand_ratio=EFFICIENT_VIT_EXPAND_RATIO, height=height, width=width, rms_norm=True)
    return Node("efficient_vit_block", children=(attn, ffn), formula="efficient_vit_block")


def dc_block(block_type: str, channels: int, height: Any, width: Any, *, head_dim: int,
             kernel_sizes: Sequence[int], norm_type: str) -> Node:
    """``get_block`` (autoencoder_dc.py): a ``ResBlock`` or an ``EfficientViTBlock`` of ``channels``."""
    if block_type == "ResBlock":
        return res_block(channels, channels, height, width, norm_type)
    if block_type == "EfficientViTBlock":
        return efficient_vit_block(channels, head_dim, kernel_sizes, height, width, norm_type)
    raise ValueError(f"block type {block_type!r} is not supported (only {', '.join(BLOCK_TYPES)})")


def dc_up_block(in_channels: int, out_channels: int, height: Any, width: Any, *, interpolate: bool) -> Node:
    r"""``DCUpBlock2d`` on an ``height × width`` input: :math:`36\,HW\,C_i C_o` MACs; params differ
    (``interpolate``: a 3×3 conv to :math:`C_o`, else to :math:`4C_o` then ``pixel_shuffle``)."""
    if interpolate:
        h2, w2 = 2 * height, 2 * width
        conv = ops.upsample_nearest(in_channels * h2 * w2) + ops.conv2d(in_channels, out_channels, 3, h2, w2)
    else:
        conv = ops.conv2d(in_channels, 4 * out_channels, 3, height, width)
    return Node("upsample", children=(Node("conv", conv),), formula="dc_up_block")


def dc_down_block(in_channels: int, out_channels: int, height: Any, width: Any, *, pixel_unshuffle: bool) -> Node:
    r"""``DCDownBlock2d`` on an ``height × width`` input: a 3×3 conv to :math:`C_o/4` then
    ``pixel_unshuffle`` (``downsample=True``), or a stride-2 3×3 conv to :math:`C_o`."""
    if pixel_unshuffle:
        conv = ops.conv2d(in_channels, ops.exact_div(out_channels, 4), 3, height, width)
    else:
        conv = ops.conv2d(in_channels, out_channels, 3, ops.conv_output_size(height, 3, 2, 1),
                          ops.conv_output_size(width, 3, 2, 1))
    return Node("downsample", children=(Node("conv", conv),), formula="dc_down_block")


def _halved(size: Any, pixel_unshuffle: bool) -> Any:
    return ops.exact_div(size, 2) if pixel_unshuffle else ops.conv_output_size(size, 3, 2, 1)


def dc_decoder(*, in_channels: int, latent_channels: int, head_dim: int, block_types: Sequence[str],
               block_out_channels: Sequence[int], layers_per_block: Sequence[int],
               qkv_multiscales: Sequence[Sequence[int]], norm_types: Sequence[str], interpolate: bool,
               height: Any, width: Any) -> Node:
    """``Decoder`` on a ``height × width`` latent (module doc). Per-stage lists are already expanded."""
    widths = list(block_out_channels)
    stages_n = len(widths)
    h, w = height, width
    stages: list[Node] = [Node("")] * stages_n
    for i in reversed(range(stages_n)):
        layers = []
        if i < stages_n - 1 and layers_per_block[i] > 0:
            layers.append(dc_up_block(widths[i + 1], widths[i], h, w, interpolate=interpolate))
            h, w = 2 * h, 2 * w
        block = dc_block(block_types[i], widths[i], h, w, head_dim=head_dim, kernel_sizes=qkv_multiscales[i],
                         norm_type=norm_types[i])
        layers += [block] * layers_per_block[i]
        stages[i] = module_list(str(i), layers)
    channels = widths[0] if layers_per_block[0] > 0 else widths[1]
    area = h * w
    if layers_per_block[0] > 0:
        conv_out = Node("conv_out", ops.conv2d(channels, in_channels, 3, h, w))
    else:
        up = dc_up_block(channels, in_channels, h, w, interpolate=interpolate)
        conv_out = Node("conv_out", children=up.children, formula=up.formula)
    children = (
        Node("conv_in", ops.conv2d(latent_channels, widths[-1], 3, height, width)),
        Node("up_blocks", children=tuple(stages)),
        Node("norm_out", ops.rms_norm(area, channels) + ops.parameters(channels) + ops.activation(channels * area)),
        conv_out,
    )
    return Node("decoder", children=children, formula="dc_decoder")


def dc_encoder(*, in_channels: int, latent_channels: int, head_dim: int, block_types: Sequence[str],
               block_out_channels: Sequence[int], layers_per_block: Sequence[int],
               qkv_multiscales: Sequence[Sequence[int]], pixel_unshuffle: bool, height: Any, width: Any) -> Node:
    """``Encoder`` on a ``height × width`` image (module doc); its blocks use RMSNorm and SiLU."""
    widths = list(block_out_channels)
    stages_n = len(widths)
    if layers_per_block[0] > 0:
        conv_in = Node("conv_in", ops.conv2d(in_channels, widths[0], 3, height, width))
        h, w = height, width
    else:
        down = dc_down_block(in_channels, widths[1], height, width, pixel_unshuffle=pixel_unshuffle)
        conv_in = Node("conv_in", children=down.children, formula=down.formula)
        h, w = _halved(height, pixel_unshuffle), _halved(width, pixel_unshuffle)
    stages = []
    for i in range(stages_n):
        block = dc_block(block_types[i], widths[i], h, w, head_dim=head_dim, kernel_sizes=qkv_multiscales[i],
                         norm_type="rms_norm")
        layers = [block] * layers_per_block[i]
        if i < stages_n - 1 and layers_per_block[i] > 0:
            layers.append(dc_down_block(widths[i], widths[i + 1], h, w, pixel_unshuffle=pixel_unshuffle))
            h, w = _halved(h, pixel_unshuffle), _halved(w, pixel_unshuffle)
        stages.append(module_list(str(i), layers))
    children = (
        conv_in,
        Node("down_blocks", children=tuple(stages)),
        Node("conv_out", ops.conv2d(widths[-1], latent_channels, 3, h, w)),
    )
    return Node("encoder", children=children, formula="dc_encoder")
