r"""The blocks of a conditional UNet (diffusers ``models/unets/unet_2d_blocks.py``):
``CrossAttnDownBlock2D`` / ``DownBlock2D``, ``UNetMidBlock2DCrossAttn`` / ``UNetMidBlock2D``,
``CrossAttnUpBlock2D`` / ``UpBlock2D``, and the spatial transformer between their ResNets
(``models/transformers/transformer_2d.py`` ``Transformer2DModel`` on continuous inputs).

A spatial transformer on an :math:`H \times W` map of :math:`C` channels with :math:`h` heads
(:math:`d_h = C / h`) and :math:`k` ``BasicTransformerBlock`` layers over :math:`m` text tokens
of width :math:`d_c`:

.. math::

   \mathrm{MACs} = \underbrace{2 H W C^2}_{\text{proj\_in, proj\_out}}
     + k\,\big[\underbrace{6 HW C^2}_{\text{attn1, attn2 q/o}} + \underbrace{2 m d_c C}_{\text{attn2 k,v}}
     + \underbrace{2 C (HW)^2 + 2 C\,HW\,m}_{\text{attention}} + \underbrace{12 HW C^2}_{\text{GEGLU FF}}\big]

(1×1 convolutions and linear projections cost the same.) The skip connections of the up path
concatenate the down path's outputs, so an up block's ResNets see
``prev_output + skip`` input channels exactly as the block constructors compute them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.cross_attention_block import cross_attention_block
from flopcalc.formulas.resnet_block import resnet_block

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("spatial_transformer", "downsample", "upsample")


@lru_cache(maxsize=1024)  # nodes are immutable; a UNet repeats the same few transformers
def spatial_transformer(channels: int, heads: int, height: Any, width: Any, *, layers: int, context_tokens: Any,
                        context_dim: int, linear_projection: bool, identity_layers: frozenset[int] = frozenset(),
                        only_cross_attention: bool = False, ip_tokens: Any = None) -> Node:
    """``Transformer2DModel(heads, channels // heads, in_channels=channels, num_layers=layers)``;
    ``identity_layers``: the ``transformer_blocks`` whose self-attention takes perturbed-attention
    guidance's identity path (the perturbed row of a PAG pipeline); with ``only_cross_attention`` its
    blocks' ``attn1`` attends to the context too; ``ip_tokens``: an IP-Adapter's image tokens per row, read by
    every ``attn2`` (:func:`~flopcalc.formulas.cross_attention_block.ip_adapter_attention`)."""
    head_dim = channels // heads
    inner = heads * head_dim
    n = height * width
    proj_in = ops.linear(n, channels, inner) if linear_projection else ops.conv2d(channels, inner, 1, height, width)
    proj_out = ops.linear(n, inner, channels) if linear_projection else ops.conv2d(inner, channels, 1, height, width)
    blocks = [cross_attention_block(dim=inner, heads=heads, head_dim=head_dim, tokens=n, context_tokens=context_tokens,
                                    context_dim=context_dim, identity_self_attention=k in identity_layers,
                                    only_cross_attention=only_cross_attention, ip_tokens=ip_tokens)
              for k in range(layers)]
    return Node(
        "attention",
        children=(
            Node("norm", ops.group_norm(channels, n)),
            Node("proj_in", proj_in),
            module_list("transformer_blocks", blocks),
            Node("proj_out", proj_out),
        ),
        formula="spatial_transformer",
    )


def downsample(channels: int, height: Any, width: Any, padding: int) -> tuple[Node, Any, Any]:
    """``Downsample2D(use_conv=True, padding=p)``: a 3×3 stride-2 convolution (padding 0 pads
    (0, 1, 0, 1) first). Returns the node and the new size."""
    if padding == 0:
        h, w = ops.conv_output_size(height + 1, 3, 2), ops.conv_output_size(width + 1, 3, 2)
    else:
        h, w = ops.conv_output_size(height, 3, 2, padding), ops.conv_output_size(width, 3, 2, padding)
    conv = Node("conv", ops.conv2d(channels, channels, 3, h, w))
    return Node("downsampler", children=(conv,), formula="downsample"), h, w


def upsample(channels: int, height: Any, width: Any) -> Node:
    """``Upsample2D(use_conv=True)``: nearest upsampling to ``height × width`` (the matching
    skip connection's size), then a 3×3 convolution."""
    return Node("upsampler", ops.upsample_nearest(channels * height * width),
                children=(Node("conv", ops.conv2d(channels, channels, 3, height, width)),), formula="upsample")


def unet_block(
    *,
    resnet_channels: Sequence[tuple[int, int]],
    height: Any,
    width: Any,
    temb_channels: int | None,
    scale_shift: bool,
    attention: dict | None,
    transformer_layers: Sequence[int] = (),
    sampler: Node | None = None,
    sampler_name: str = "",
    formula: str,
    identity_layers: Sequence[frozenset[int]] = (),
) -> Node:
    """A down or up block: ResNets ``(c_in, c_out)`` interleaved with spatial transformers
    (``attention`` holds their keyword arguments, or None for a plain block), then its sampler;
    ``identity_layers[j]``: attention ``j``'s identity-path transformer blocks (perturbed-attention
    guidance), none when empty."""
    resnets = [resnet_block(ci, co, height, width, temb_channels=temb_channels, scale_shift=scale_shift)
               for ci, co in resnet_channels]
    parts = [module_list("resnets", resnets)]
    if attention is not None:
        parts.append(module_list("attentions", [
            spatial_transformer(co, height=height, width=width, layers=k, **attention,
                                identity_layers=identity_layers[j] if identity_layers else frozenset())
            for j, ((_, co), k) in enumerate(zip(resnet_channels, transformer_layers))
        ]))
    if sampler is not None:
        parts.append(module_list(sampler_name, [sampler]))
    return Node("block", children=tuple(parts), formula=formula)
