r"""The added-KV UNet blocks of unCLIP / Kandinsky 2.x / DeepFloyd IF (diffusers
``models/unets/unet_2d_blocks.py``): ``ResnetDownsampleBlock2D``, ``SimpleCrossAttnDownBlock2D``,
``UNetMidBlock2DSimpleCrossAttn``, ``SimpleCrossAttnUpBlock2D`` and ``ResnetUpsampleBlock2D``.

Their attention is ``Attention(query_dim=C, heads=C // d_h, dim_head=d_h, added_kv_proj_dim=d_c,
norm_num_groups, bias=True)`` run by ``AttnAddedKVProcessor2_0`` (``attention_processor.py``): a
GroupNorm over the :math:`n = HW` pixels, ``to_q``/``to_k``/``to_v`` on the pixels,
``add_k_proj``/``add_v_proj`` on the :math:`m` context vectors, and one attention of the pixels
over the context and the pixels together (:math:`m + n` keys), then ``to_out.0``. With
:math:`d_i = (C // d_h)\, d_h`:

.. math::

   \mathrm{MACs} = 4 n C d_i + 2 m d_c d_i + 2 (C // d_h)\, n (m + n)\, d_h

With ``only_cross_attention`` (per block; ``mid_block_only_cross_attention`` for the mid block) the
attention has no ``to_k``/``to_v``: the pixels attend to the :math:`m` context vectors only
(:math:`4 n C d_i` becomes :math:`2 n C d_i` and :math:`m + n` keys become :math:`m`). With
``cross_attention_norm: group_norm`` (DeepFloyd IF) ``norm_cross``, a ``GroupNorm(32, d_c)``, normalises
the context first (no MACs; :math:`2 d_c` parameters).

Their samplers are ResNets (``ResnetBlock2D(down=True)`` / ``(up=True)``): ``norm1`` on the input
map, then a 2×2 average pool (``Downsample2D(use_conv=False)``) or a nearest ×2 upsampling
(``Upsample2D(use_conv=False)``) of both the features and the residual, and ``conv1``/``conv2``
on the resampled map (no shortcut: the channels do not change).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.resnet_block import resnet_block

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("added_kv_attention", "resnet_resample")


@lru_cache(maxsize=1024)
def added_kv_attention(channels: int, head_dim: int, height: Any, width: Any, *, context_tokens: Any,
                       context_dim: int, only_cross: bool = False, norm_cross: bool = False) -> Node:
    """``Attention(..., added_kv_proj_dim=context_dim, only_cross_attention=only_cross,
    cross_attention_norm="group_norm" if norm_cross else None)`` with ``AttnAddedKVProcessor2_0``
    (``attention_processor.py:1378-1412``; ``to_k``/``to_v`` built only without ``only_cross_attention``,
    :247-250; ``norm_cross`` a ``GroupNorm(32, added_kv_proj_dim)``, :226-239)."""
    n = height * width
    heads = channels // head_dim
    if heads == 0 or channels % head_dim:  # the real processor divides by 0 heads / reshapes to C and fails
        raise ValueError(f"a {channels}-channel added-KV attention needs channels a multiple of its head width "
                         f"{head_dim}")
    if norm_cross and context_dim % CROSS_NORM_GROUPS:  # nn.GroupNorm refuses it
        raise ValueError(f"cross_attention_norm group_norm needs the context width ({context_dim}) a multiple of "
                         f"{CROSS_NORM_GROUPS} groups")
    inner = heads * head_dim
    children = (
        *((Node("norm_cross", ops.group_norm(context_dim, context_tokens)),) if norm_cross else ()),
        Node("group_norm", ops.group_norm(channels, n)),
        Node("to_q", ops.linear(n, channels, inner)),
        *(() if only_cross else (Node("to_k", ops.linear(n, channels, inner)),
                                 Node("to_v", ops.linear(n, channels, inner)))),
        Node("add_k_proj", ops.linear(context_tokens, context_dim, inner)),
        Node("add_v_proj", ops.linear(context_tokens, context_dim, inner)),
        Node("to_out", children=(Node("0", ops.linear(n, inner, channels)),)),
    )
    keys = context_tokens if only_cross else context_tokens + n
    return Node("attention", ops.attention(n, keys, heads, head_dim), children, formula="added_kv_attention")


#: ``Attention``'s ``cross_attention_norm_num_groups`` default (attention_processor.py): the blocks pass none.
CROSS_NORM_GROUPS = 32


@lru_cache(maxsize=1024)
def resnet_resample(channels: int, height: Any, width: Any, out_height: Any, out_width: Any, *,
                    temb_channels: int, scale_shift: bool, up: bool) -> Node:
    """``ResnetBlock2D(down=True)`` or ``(up=True)`` (``models/resnet.py``): ``norm1`` on the
    ``height × width`` input, then the resampling and the convolutions on ``out_height × out_width``."""
    inner = resnet_block(channels, channels, out_height, out_width, temb_channels=temb_channels,
                         scale_shift=scale_shift)
    hw = height * width
    norm1 = Node("norm1", ops.group_norm(channels, hw) + ops.activation(channels * hw))
    # the pool is an nn.AvgPool2d module, which thop counts as one op per output element (features and
    # residual); the upsampling is F.interpolate, which it does not see
    out = channels * out_height * out_width
    resample = (Node("upsample", ops.upsample_nearest(2 * out)) if up
                else Node("downsample", Cost(thop_extra=2 * out, elementwise=2 * 4 * out)),)
    children = (norm1, *resample, *(c for c in inner.children if c.name != "norm1"))
    return Node("resnet", children=children, formula="resnet_resample")


def added_kv_block(
    *,
    resnet_channels: Sequence[tuple[int, int]],
    height: Any,
    width: Any,
    temb_channels: int,
    scale_shift: bool,
    attention: dict | None,
    sampler: Node | None,
    sampler_name: str,
    formula: str,
) -> Node:
    """A ``ResnetDownsampleBlock2D`` / ``SimpleCrossAttnDownBlock2D`` / ``SimpleCrossAttnUpBlock2D``
    / ``ResnetUpsampleBlock2D``: ResNets ``(c_in, c_out)`` each followed by an added-KV attention
    (``attention``: ``head_dim``, ``context_tokens``, ``context_dim``; None for the plain ResNet
    blocks), then the ResNet sampler."""
    parts = [module_list("resnets", [resnet_block(ci, co, height, width, temb_channels=temb_channels,
                                                  scale_shift=scale_shift) for ci, co in resnet_channels])]
    if attention is not None:
        parts.append(module_list("attentions", [added_kv_attention(co, attention["head_dim"], height, width,
                                                                   context_tokens=attention["context_tokens"],
                                                                   context_dim=attention["context_dim"],
                                                                   only_cross=attention.get("only_cross", False),
                                                                   norm_cross=attention.get("norm_cross", False))
                                                for _, co in resnet_channels]))
    if sampler is not None:
        parts.append(module_list(sampler_name, [sampler]))
    return Node("block", children=tuple(parts), formula=formula)


def added_kv_mid_block(channels: int, height: Any, width: Any, *, temb_channels: int, scale_shift: bool,
                       head_dim: int, context_tokens: Any, context_dim: int, only_cross: bool = False,
                       norm_cross: bool = False) -> Node:
    """``UNetMidBlock2DSimpleCrossAttn`` (one layer): ``resnets.0``, ``attentions.0``, ``resnets.1``."""
    res = resnet_block(channels, channels, height, width, temb_channels=temb_channels, scale_shift=scale_shift)
    attn = added_kv_attention(channels, head_dim, height, width, context_tokens=context_tokens,
                              context_dim=context_dim, only_cross=only_cross, norm_cross=norm_cross)
    return Node("mid_block", children=(module_list("attentions", [attn]), module_list("resnets", [res, res])),
                formula="UNetMidBlock2DSimpleCrossAttn")
