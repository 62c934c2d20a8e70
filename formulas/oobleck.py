r"""Stable Audio's waveform VAE, ``AutoencoderOobleck`` (diffusers ``models/autoencoders/autoencoder_oobleck.py``).

Every convolution is 1-D and weight-normalised (``torch.nn.utils.weight_norm``: the module stays an ``nn.Conv1d`` /
``nn.ConvTranspose1d``, its weight recomputed from ``weight_g`` (one per output channel; per *input* channel for a
transposed convolution, ``dim=0`` of its ``(C_in, C_out, k)`` weight) and ``weight_v`` before each call: a norm, not a
counted op). The activations are ``Snake1d`` (:math:`x + \sin^2(\alpha x)/\beta`, per channel :math:`\alpha, \beta`
parameters, elementwise).

* ``OobleckResidualUnit(C, d)`` (:77) on a length-:math:`L` signal: Snake, ``Conv1d(C, C, 7, dilation d, padding 3d)``
  (length kept), Snake, ``Conv1d(C, C, 1)``: :math:`\mathrm{MACs} = 8 C^2 L`.
* ``OobleckEncoderBlock(C_i, C_o, s)`` (:113): three residual units (dilations 1, 3, 9) at :math:`C_i`, Snake,
  ``Conv1d(C_i, C_o, 2s, stride s, padding ⌈s/2⌉)``: :math:`L' = \lfloor (L + 2⌈s/2⌉ − 2s)/s \rfloor + 1`,
  :math:`2 s C_i C_o L'` MACs.
* ``OobleckDecoderBlock(C_i, C_o, s)`` (:136): Snake, ``ConvTranspose1d(C_i, C_o, 2s, stride s, padding ⌈s/2⌉)``
  (:math:`L' = (L − 1)s − 2⌈s/2⌉ + 2s`; torch counts the *input* positions, :math:`2 s C_i C_o L`; thop the output
  positions, :math:`2 s C_i C_o L'`), three residual units at :math:`C_o`.
* ``OobleckEncoder`` (:230): ``Conv1d(audio, h, 7, padding 3)``, the blocks (``h·m_i → h·m_{i+1}``, strides
  ``downsampling_ratios``), Snake, ``Conv1d(h·m_last, h, 3, padding 1)`` (mean and scale: ``h`` = twice the latent
  width). ``OobleckDecoder`` (:267): ``Conv1d(latent, c·m_last, 7, padding 3)``, the blocks (reversed strides and
  widths), Snake, ``Conv1d(c, audio, 7, padding 3, bias=False)``.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil
from typing import Any

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops

BLOCK_KINDS = block_kinds("oobleck_residual_unit", "oobleck_encoder_block", "oobleck_decoder_block")

#: flopcalc's elementwise estimate of a Snake activation per element (multiply, sine, square, reciprocal-multiply,
#: add); FlopCounterMode and thop count none of it.
SNAKE_OPS = 5


def snake(channels: int, length: Any) -> Node:
    """``Snake1d(channels)`` on a length-``length`` signal: its ``alpha`` and ``beta`` parameters."""
    return Node("", Cost(elementwise=SNAKE_OPS * channels * length, params=2 * channels, largest_module=2 * channels))


def wn_conv1d(c_in: int, c_out: int, kernel: int, out_length: Any, *, bias: bool = True) -> Cost:
    """A weight-normalised ``nn.Conv1d``: the convolution's MACs; ``weight_v`` (the weight's shape), ``weight_g``
    (one per output channel) and the bias."""
    cost = ops.conv(c_in, c_out, kernel, out_length, bias=bias)
    return replace(cost, params=cost.params + c_out, largest_module=cost.params + c_out)


def wn_conv_transpose1d(c_in: int, c_out: int, kernel: int, stride: int, padding: int, in_length: Any
                        ) -> tuple[Cost, Any]:
    """A weight-normalised ``nn.ConvTranspose1d`` on a length-``in_length`` signal and its output length: torch
    counts the input positions, thop the output positions (``conv`` holds the smaller count; the excess is
    ``thop_extra`` when thop counts more, ``functional``, torch's alone, when torch does, as for a stride-1
    transposed convolution that shortens the signal); ``weight_g`` per input channel."""
    out_length = (in_length - 1) * stride - 2 * padding + kernel
    per_position = c_out * c_in * kernel
    params = c_in * c_out * kernel + c_out + c_in
    if isinstance(out_length, int) and isinstance(in_length, int) and out_length < in_length:
        return Cost(conv=out_length * per_position, functional=(in_length - out_length) * per_position, params=params,
                    largest_module=params), out_length
    return Cost(conv=in_length * per_position, thop_extra=(out_length - in_length) * per_position, params=params,
                largest_module=params), out_length


def _named(name: str, node: Node) -> Node:
    return Node(name, node.cost, node.children, formula=node.formula)


def residual_unit(channels: int, dilation: int, length: Any) -> Node:
    """``OobleckResidualUnit(channels, dilation)``: the length is kept (padding ``3·dilation``)."""
    return Node("", children=(
        _named("snake1", snake(channels, length)),
        Node("conv1", wn_conv1d(channels, channels, 7, length)),
        _named("snake2", snake(channels, length)),
        Node("conv2", wn_conv1d(channels, channels, 1, length)),
    ), formula="oobleck_residual_unit")


def _units(channels: int, length: Any) -> list[Node]:
    return [_named(f"res_unit{i}", residual_unit(channels, d, length)) for i, d in ((1, 1), (2, 3), (3, 9))]


def encoder_block(c_in: int, c_out: int, stride: int, length: Any) -> tuple[Node, Any]:
    """``OobleckEncoderBlock(c_in, c_out, stride)`` on a length-``length`` signal and its output length."""
    out = ops.conv_output_size(length, 2 * stride, stride, ceil(stride / 2))
    return Node("", children=(*_units(c_in, length), _named("snake1", snake(c_in, length)),
                              Node("conv1", wn_conv1d(c_in, c_out, 2 * stride, out))),
                formula="oobleck_encoder_block"), out


def decoder_block(c_in: int, c_out: int, stride: int, length: Any) -> tuple[Node, Any]:
    """``OobleckDecoderBlock(c_in, c_out, stride)`` on a length-``length`` signal and its output length."""
    conv_t, out = wn_conv_transpose1d(c_in, c_out, 2 * stride, stride, ceil(stride / 2), length)
    return Node("", children=(_named("snake1", snake(c_in, length)), Node("conv_t1", conv_t), *_units(c_out, out)),
                formula="oobleck_decoder_block"), out


def oobleck_encoder(hidden: int, audio_channels: int, ratios: list[int], multiples: list[int], length: Any) -> Node:
    """``OobleckEncoder`` on ``audio_channels × length`` samples."""
    mult = [1] + list(multiples)
    blocks, n = [], length
    for i, s in enumerate(ratios):
        block, n = encoder_block(hidden * mult[i], hidden * mult[i + 1], s, n)
        blocks.append(block)
    top = hidden * mult[-1]
    return Node("encoder", children=(
        Node("conv1", wn_conv1d(audio_channels, hidden, 7, length)),
        module_list("block", blocks),
        _named("snake1", snake(top, n)),
        Node("conv2", wn_conv1d(top, hidden, 3, n)),
    ), formula="oobleck_encoder")


def oobleck_decoder(channels: int, input_channels: int, audio_channels: int, ratios: list[int],
                    multiples: list[int], length: Any) -> Node:
    """``OobleckDecoder`` on ``input_channels × length`` latents (``ratios``: the upsampling ratios, i.e. the
    encoder's reversed)."""
    mult = [1] + list(multiples)
    k = len(ratios)
    blocks, n = [], length
    for i, s in enumerate(ratios):
        block, n = decoder_block(channels * mult[k - i], channels * mult[k - i - 1], s, n)
        blocks.append(block)
    return Node("decoder", children=(
        Node("conv1", wn_conv1d(input_channels, channels * mult[-1], 7, length)),
        module_list("block", blocks),
        _named("snake1", snake(channels, n)),
        Node("conv2", wn_conv1d(channels, audio_channels, 7, n, bias=False)),
    ), formula="oobleck_decoder")
