r"""The Mochi VAE decoder: diffusers ``models/autoencoders/autoencoder_kl_mochi.py`` (``MochiDecoder3D``,
``MochiMidBlock3D`` without attention, ``MochiUpBlock3D``, ``MochiResnetBlock3D``, ``MochiChunkedGroupNorm3D``).

Symbols: :math:`P = F h w` positions of the latent (``F`` frames, ``h × w``), channels :math:`c_0 < \dots < c_3`
(``decoder_block_out_channels``), ``layers_per_block`` :math:`n_0 \dots n_4`, up block :math:`i` expanding time by
:math:`t_i` and space by :math:`s_i` (``temporal_expansions`` / ``spatial_expansions`` read from the end).

.. math::

   \mathrm{MACs} = z c_3 P + \sum_\text{stage} n\,(2 \cdot 27 c^2) P_\text{stage}
       + \sum_i c_{\text{in},i}\, c_{\text{out},i} t_i s_i^2 P_i + c_0\,\text{out}\,P_\text{final}

Each ``MochiResnetBlock3D(c)`` is GroupNorm (per frame, in chunks), SiLU, a causal 3×3×3 ``CogVideoXCausalConv3d``
(replicate padding: as many positions out as in), twice, plus the residual; each up block ends with ``proj``, a linear
(``c_in → c_out·t·s²``) per position whose output is unpatchified into :math:`t` frames and :math:`s × s` pixels.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.cogvideox_vae import causal_conv

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("mochi_resnet_block", "mochi_up_block", "mochi_mid_block")


def _chunked_norm(name: str, channels: int, positions: Any) -> Node:
    """``MochiChunkedGroupNorm3D(c)``: its ``norm_layer`` (``nn.GroupNorm(32, c)``) on every frame, then SiLU."""
    return Node(name, ops.activation(channels * positions),
                (Node("norm_layer", ops.group_norm(channels, positions)),))


@lru_cache(maxsize=1024)
def mochi_resnet_block(channels: int, positions: Any) -> Node:
    r"""``MochiResnetBlock3D(c)`` (autoencoder_kl_mochi.py:69): norm1, SiLU, ``conv1``, norm2, SiLU, ``conv2``
    (causal 3×3×3, replicate padding) and the residual. :math:`\mathrm{MACs} = 54 c^2 P`."""
    return Node("resnet", children=(
        _chunked_norm("norm1", channels, positions),
        causal_conv("conv1", channels, channels, 3, positions),
        _chunked_norm("norm2", channels, positions),
        causal_conv("conv2", channels, channels, 3, positions),
    ), formula="mochi_resnet_block")


def mochi_mid_block(name: str, channels: int, layers: int, positions: Any) -> Node:
    """``MochiMidBlock3D(c, layers, add_attention=False)`` (autoencoder_kl_mochi.py:245): ``layers`` resnets."""
    return Node(name, children=(module_list("resnets", [mochi_resnet_block(channels, positions)] * layers),),
                formula="mochi_mid_block")


def mochi_up_block(c_in: int, c_out: int, layers: int, temporal: int, spatial: int, positions: Any) -> Node:
    r"""``MochiUpBlock3D`` (autoencoder_kl_mochi.py:329): ``layers`` resnets at ``c_in``, then ``proj``
    (``c_in → c_out·t·s²``) on every position, unpatchified to ``t`` frames of ``s × s`` pixels.
    :math:`\mathrm{MACs} = 54 n c_i^2 P + c_i c_o t s^2 P`."""
    return Node("up_block", children=(
        module_list("resnets", [mochi_resnet_block(c_in, positions)] * layers),
        Node("proj", ops.linear(positions, c_in, c_out * temporal * spatial * spatial)),
    ), formula="mochi_up_block")


def mochi_decoder(*, latent_channels: int, out_channels: int, block_out_channels: Sequence[int],
                  layers_per_block: Sequence[int], temporal_expansions: Sequence[int],
                  spatial_expansions: Sequence[int], frames: Any, height: Any, width: Any) -> Node:
    """``MochiDecoder3D`` (autoencoder_kl_mochi.py:548) on a ``frames × height × width`` latent: ``conv_in`` (1×1×1),
    ``block_in``, the up blocks (deepest first), ``block_out``, SiLU and ``proj_out`` (c₀ → out)."""
    channels, layers = list(block_out_channels), list(layers_per_block)
    positions = frames * height * width
    children = [
        Node("conv_in", ops.conv(latent_channels, channels[-1], 1, positions)),
        mochi_mid_block("block_in", channels[-1], layers[-1], positions),
    ]
    ups = []
    for i in range(len(channels) - 1):
        t, s = temporal_expansions[-i - 1], spatial_expansions[-i - 1]
        ups.append(mochi_up_block(channels[-i - 1], channels[-i - 2], layers[-i - 2], t, s, positions))
        positions = positions * t * s * s
    children += [
        module_list("up_blocks", ups),
        mochi_mid_block("block_out", channels[0], layers[0], positions),
        Node("proj_out", ops.linear(positions, channels[0], out_channels) + ops.activation(channels[0] * positions)),
    ]
    return Node("decoder", children=tuple(children), formula="mochi_decoder")
