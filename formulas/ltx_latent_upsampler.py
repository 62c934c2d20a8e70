r"""``LTXLatentUpsamplerModel`` (diffusers ``pipelines/ltx/modeling_latent_upsampler.py``): LTX-Video 0.9.7's
latent upsampler, a convolutional network on the VAE latent ``C × T × h × w``.

``dims`` 3: ``Conv3d`` 3×3×3 (``dims`` 2: ``Conv2d`` 3×3 on each frame), padding 1, so a convolution on
:math:`P` positions costs :math:`k^{d} P\,C_i C_o`. ``initial_conv`` (C → M) with a GroupNorm(32) and
SiLU, ``num_blocks_per_stage`` ``ResBlock``\ s (two M → M convolutions, two GroupNorms, SiLU) on the input
grid, the ``upsampler`` (``spatial_upsample``: a ``Conv2d`` M → 4M on each frame then a 2-D pixel shuffle to
``2h × 2w``; with ``temporal_upsample`` too a ``Conv3d`` M → 8M and a 3-D shuffle to ``2T × 2h × 2w``, the first
frame dropped; ``temporal_upsample`` alone a ``Conv3d`` M → 2M to ``2T × h × w``, the first frame dropped), as
many ``ResBlock``\ s on the upsampled grid :math:`P'`, and ``final_conv`` (M → C):

.. math:: \mathrm{MACs} = k^d P (C M + 2 n M^2) + 9^{[s]}\,27^{[t]}\!\cdot P\,M \cdot r M + k^d P' (2 n M^2 + M C)

with :math:`k^d` = 27 (``dims`` 3) or 9, :math:`n` = ``num_blocks_per_stage`` and :math:`r` = 4, 8 or 2.
"""

from __future__ import annotations

from typing import Any

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("latent_upsampler_res_block")
#: ``nn.GroupNorm(32, channels)`` in every norm.
GROUPS = 32


def _conv(name: str, c_in: int, c_out: int, kernel_volume: int, positions: Any) -> Node:
    return Node(name, ops.conv(c_in, c_out, kernel_volume, positions))


def _norm(name: str, channels: int, positions: Any) -> Node:
    return Node(name, ops.group_norm(channels, positions))


def res_block(channels: int, kernel_volume: int, positions: Any) -> Node:
    """``ResBlock``: conv1 → norm1 → SiLU → conv2 → norm2 → SiLU(· + residual)."""
    return Node("res_block", children=(
        _conv("conv1", channels, channels, kernel_volume, positions),
        _norm("norm1", channels, positions),
        _conv("conv2", channels, channels, kernel_volume, positions),
        _norm("norm2", channels, positions),
        Node("activation", ops.activation(2 * channels * positions)),
    ), formula="latent_upsampler_res_block")


def latent_upsampler(*, in_channels: int, mid_channels: int, blocks: int, dims: int, spatial: bool, temporal: bool,
                     frames: Any, height: Any, width: Any) -> Node:
    """The whole forward on one ``in_channels × frames × height × width`` latent (see the module docstring)."""
    kernel = 27 if dims == 3 else 9
    positions = frames * height * width
    if spatial and temporal:
        up_kernel, ratio, out_positions = 27, 8, (2 * frames - 1) * (2 * height) * (2 * width)
    elif spatial:
        up_kernel, ratio, out_positions = 9, 4, frames * (2 * height) * (2 * width)
    else:
        up_kernel, ratio, out_positions = 27, 2, (2 * frames - 1) * height * width
    m = mid_channels
    return Node("latent_upsampler", children=(
        _conv("initial_conv", in_channels, m, kernel, positions),
        _norm("initial_norm", m, positions),
        Node("initial_activation", ops.activation(m * positions)),
        module_list("res_blocks", [res_block(m, kernel, positions)] * blocks),
        Node("upsampler", children=(_conv("0", m, ratio * m, up_kernel, positions),)),
        module_list("post_upsample_res_blocks", [res_block(m, kernel, out_positions)] * blocks),
        _conv("final_conv", m, in_channels, kernel, out_positions),
    ), formula="ltx_latent_upsampler")
