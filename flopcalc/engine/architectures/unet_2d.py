r"""Unconditional / class-conditional UNet: ``UNet2DModel`` (diffusers ``models/unets/unet_2d.py``), the denoiser of
DDPM, DDIM, the latent-diffusion super-resolution model and consistency models.

One forward on an :math:`H \times W` grid (the image, or a latent): ``conv_in``, the time embedding (a sinusoid,
Gaussian Fourier features or a learned table, then ``TimestepEmbedding``), an optional class embedding (a table
lookup, or a ``TimestepEmbedding`` of the label's sinusoid), the down blocks (``DownBlock2D``, ``AttnDownBlock2D``,
``ResnetDownsampleBlock2D``: ResNets ``ResnetBlock2D`` with the time embedding, each optionally followed by a
self-attention ``Attention(C, heads=C // d_h, dim_head=d_h, norm_num_groups, residual_connection=True)`` over the
:math:`HW` pixels, then a sampler: a stride-2 3×3 convolution, or a ResNet with a 2×2 average pool), the mid block
(``UNetMidBlock2D``: ResNet, attention when ``add_attention``, ResNet), the up blocks (their mirrors, each ResNet on
the concatenation with a skip state; nearest ×2 and a 3×3 convolution, or a ResNet with a nearest ×2), then
``conv_norm_out`` and ``conv_out``. The formulas are those of the conditional UNet's blocks
(:mod:`flopcalc.formulas.resnet_block`, :mod:`flopcalc.formulas.unet_blocks`,
:mod:`flopcalc.formulas.unet_added_kv_blocks`) and :func:`pixel_attention`:

.. math:: \mathrm{MACs}_\text{attention} = 4 H W C\,d_i + 2 h\,(HW)^2 d_h, \quad d_i = h\,d_h
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flopcalc.engine.config import (
    COUNT, FLAG, LAYERS, MAX_WIDTH, NAMES, NULL, SIZE, SIZES, TEXT, Choice, Config, Int, ListOf, count_int, declare_keys,
    positive_int,
)
from flopcalc.engine.cost import Node, block_kinds, module_list
from flopcalc.engine.errors import ConfigError, ResolutionError, UnknownArchitectureError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.resnet_block import resnet_block
from flopcalc.formulas.unet_added_kv_blocks import resnet_resample
from flopcalc.formulas.unet_blocks import downsample, upsample

SOURCE = "diffusers/models/unets/unet_2d.py"

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("pixel_attention")

#: ``UNet2DModel.__init__`` keyword defaults (unet_2d.py).
DEFAULTS = {
    "sample_size": None,
    "in_channels": 3,
    "out_channels": 3,
    "time_embedding_type": "positional",
    "time_embedding_dim": None,
    "down_block_types": ["DownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D"],
    "mid_block_type": "UNetMidBlock2D",
    "up_block_types": ["AttnUpBlock2D", "AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D"],
    "block_out_channels": [224, 448, 672, 896],
    "layers_per_block": 2,
    "downsample_padding": 1,
    "downsample_type": "conv",
    "upsample_type": "conv",
    "attention_head_dim": 8,
    "norm_num_groups": 32,
    "attn_norm_num_groups": None,
    "resnet_time_scale_shift": "default",
    "add_attention": True,
    "class_embed_type": None,
    "num_class_embeds": None,
    "num_train_timesteps": None,
}
DOWN = ("DownBlock2D", "AttnDownBlock2D", "ResnetDownsampleBlock2D")
UP = ("UpBlock2D", "AttnUpBlock2D", "ResnetUpsampleBlock2D")

declare_keys("UNet2DModel", {
    "sample_size": SIZE | ListOf(SIZE, lo=2, hi=2) | NULL, "in_channels": SIZE, "out_channels": COUNT,
    "time_embedding_type": Choice("positional", "fourier", "learned"), "time_embedding_dim": SIZE | NULL,
    "down_block_types": NAMES, "mid_block_type": TEXT | NULL, "up_block_types": NAMES, "block_out_channels": SIZES,
    "layers_per_block": LAYERS, "downsample_padding": Int(0, MAX_WIDTH), "downsample_type": Choice("conv", "resnet"),
    "upsample_type": Choice("conv", "resnet"), "attention_head_dim": SIZE | NULL, "norm_num_groups": SIZE | NULL,
    "attn_norm_num_groups": SIZE | NULL, "resnet_time_scale_shift": Choice("default", "scale_shift"),
    "add_attention": FLAG, "class_embed_type": Choice(None, "timestep", "identity"), "num_class_embeds": SIZE | NULL,
    "num_train_timesteps": SIZE | NULL,
})


@lru_cache(maxsize=1024)
def pixel_attention(channels: int, head_dim: int, height: Any, width: Any, *, group_norm: bool) -> Node:
    """``Attention(C, heads=C // head_dim, dim_head=head_dim, norm_num_groups, residual_connection=True, bias=True)``
    run by ``AttnProcessor2_0`` (``attention_processor.py``) on the pixels: ``group_norm`` (when the block gives it
    groups), ``to_q`` / ``to_k`` / ``to_v`` (C → heads · head_dim), attention, ``to_out.0``."""
    n = height * width
    heads = channels // head_dim
    if heads == 0:
        raise ValueError(f"a {channels}-channel attention of head width {head_dim} has no head")
    inner = heads * head_dim
    children = ((Node("group_norm", ops.group_norm(channels, n)),) if group_norm else ()) + (
        Node("to_q", ops.linear(n, channels, inner)), Node("to_k", ops.linear(n, channels, inner)),
        Node("to_v", ops.linear(n, channels, inner)),
        Node("to_out", children=(Node("0", ops.linear(n, inner, channels)),)))
    return Node("attention", ops.attention(n, n, heads, head_dim), children, formula="pixel_attention")


def _block(resnets: list[Node], attentions: list[Node] | None, sampler: Node | None, sampler_name: str,
           formula: str) -> Node:
    parts = [module_list("resnets", resnets)]
    if attentions:
        parts.append(module_list("attentions", attentions))
    if sampler is not None:
        parts.append(module_list(sampler_name, [sampler]))
    return Node("block", children=tuple(parts), formula=formula)


def _time_embeddings(config: Config, c0: int, ted: int) -> list[Node]:
    """``time_proj`` (unet_2d.py:141-152: a sinusoid, no weights; ``GaussianFourierProjection(c0, scale=16)``, a
    fixed weight of ``c0`` values; or a learned ``nn.Embedding(num_train_timesteps, c0)``), ``time_embedding``
    (``TimestepEmbedding``) and ``class_embedding`` (:156-163)."""
    kind = config["time_embedding_type"]
    nodes = []
    t_in = 2 * c0 if kind == "fourier" else c0
    if kind == "fourier":
        nodes.append(Node("time_proj", ops.parameters(c0)))
    elif kind == "learned":
        nodes.append(Node("time_proj", ops.embedding(positive_int(config, "num_train_timesteps"), c0)))
    nodes.append(mlp_embedder("time_embedding", t_in, ted))
    cls, n_classes = config["class_embed_type"], config["num_class_embeds"]
    if cls is None and n_classes is not None:
        nodes.append(Node("class_embedding", ops.embedding(n_classes, ted)))
    elif cls == "timestep":
        nodes.append(mlp_embedder("class_embedding", t_in, ted))
    return nodes


def uses_class_labels(config: Config) -> bool:
    """Whether the forward takes ``class_labels`` (a class embedding exists; ``identity`` too)."""
    return config["class_embed_type"] is not None or config["num_class_embeds"] is not None


@register("UNet2DModel", role="denoiser", defaults=DEFAULTS, source=SOURCE)
def unet_2d(config: Config, shape: RunShape) -> Node:
    """``UNet2DModel`` on the ``latent_height × latent_width`` grid it is fed (the image itself in pixel space)."""
    comp = config.component
    channels = [int(c) for c in config["block_out_channels"]]
    nb = len(channels)
    down_types, up_types = list(config["down_block_types"]), list(config["up_block_types"])
    if len(down_types) != nb or len(up_types) != nb:
        raise ConfigError(f"{comp}/config.json: down/up_block_types must have one entry per block_out_channels")
    for kind in down_types + up_types:
        if kind not in DOWN + UP:
            raise UnknownArchitectureError(f"{comp}: UNet2DModel block type {kind!r} is not supported yet "
                                           f"(supported: {', '.join(DOWN + UP)}).")
    if config["mid_block_type"] not in ("UNetMidBlock2D", None):
        raise UnknownArchitectureError(f"{comp}: mid_block_type {config['mid_block_type']!r} is not supported yet.")
    lpb = positive_int(config, "layers_per_block")
    groups = config["norm_num_groups"]
    scale_shift = config["resnet_time_scale_shift"] == "scale_shift"
    head = config["attention_head_dim"]
    c0 = channels[0]
    ted = config["time_embedding_dim"] or 4 * c0
    h, w = shape.latent_height, shape.latent_width

    def head_of(c: int) -> int:
        return head if head is not None else c  # attention_head_dim null: one head of the block's width

    # down (unet_2d.py:170-190; unet_2d_blocks.py get_down_block: AttnDownBlock2D has no sampler on the last level)
    sizes = [(h, w)]
    downs, c_out = [], c0
    for i, kind in enumerate(down_types):
        c_in, c_out = c_out, channels[i]
        hh, ww = sizes[-1]
        last = i == nb - 1
        resnets = [resnet_block(c_in if j == 0 else c_out, c_out, hh, ww, temb_channels=ted, scale_shift=scale_shift)
                   for j in range(lpb)]
        attentions = [pixel_attention(c_out, head_of(c_out), hh, ww, group_norm=groups is not None)
                      for _ in range(lpb)] if kind == "AttnDownBlock2D" else None
        sampler = None
        if not last:
            if kind == "ResnetDownsampleBlock2D" or (kind == "AttnDownBlock2D" and config["downsample_type"] == "resnet"):
                h2, w2 = hh // 2, ww // 2
                sampler = resnet_resample(c_out, hh, ww, h2, w2, temb_channels=ted, scale_shift=scale_shift, up=False)
            else:
                sampler, h2, w2 = downsample(c_out, hh, ww, config["downsample_padding"])
            sizes.append((h2, w2))
        downs.append(_block(resnets, attentions, sampler, "downsamplers", kind))

    # mid (UNetMidBlock2D, unet_2d_blocks.py: attn_groups = resnet_groups under the default time shift, else None)
    top = channels[-1]
    hm, wm = sizes[-1]
    mid = None
    if config["mid_block_type"] == "UNetMidBlock2D":
        res = resnet_block(top, top, hm, wm, temb_channels=ted, scale_shift=scale_shift)
        attn_groups = config["attn_norm_num_groups"]
        if attn_groups is None:
            attn_groups = groups if not scale_shift else None
        parts = []
        if config["add_attention"]:
            parts.append(module_list("attentions", [pixel_attention(top, head_of(top), hm, wm,
                                                                    group_norm=attn_groups is not None)]))
        parts.append(module_list("resnets", [res, res]))
        mid = Node("mid_block", children=tuple(parts), formula="UNetMidBlock2D")

    # up (unet_2d.py:209-236): each up block's ResNets take the previous output and the skip states
    rev = channels[::-1]
    ups, out_c = [], rev[0]
    for i, kind in enumerate(up_types):
        prev, out_c = out_c, rev[i]
        skip_in = rev[min(i + 1, nb - 1)]
        layers = lpb + 1
        hh, ww = sizes[nb - 1 - i]
        resnets = [resnet_block((prev if j == 0 else out_c) + (skip_in if j == layers - 1 else out_c), out_c, hh, ww,
                                temb_channels=ted, scale_shift=scale_shift) for j in range(layers)]
        attentions = [pixel_attention(out_c, head_of(out_c), hh, ww, group_norm=groups is not None)
                      for _ in range(layers)] if kind == "AttnUpBlock2D" else None
        sampler = None
        if i < nb - 1:
            nxt = sizes[nb - 2 - i]
            if isinstance(hh, int) and isinstance(nxt[0], int) and (2 * hh, 2 * ww) != tuple(nxt):
                raise ResolutionError(f"{comp}: up block {i} doubles a {hh}×{ww} level to {2 * hh}×{2 * ww}, but the "
                                      f"skip connection is {nxt[0]}×{nxt[1]}: the grid must divide by {2 ** (nb - 1)} "
                                      "(the real model fails too)")
            if kind == "ResnetUpsampleBlock2D" or (kind == "AttnUpBlock2D" and config["upsample_type"] == "resnet"):
                sampler = resnet_resample(out_c, hh, ww, 2 * hh, 2 * ww, temb_channels=ted, scale_shift=scale_shift,
                                          up=True)
            else:
                sampler = upsample(out_c, 2 * hh, 2 * ww)
        ups.append(_block(resnets, attentions, sampler, "upsamplers", kind))

    out_groups = groups if groups is not None else min(c0 // 4, 32)
    if c0 % out_groups:  # nn.GroupNorm refuses it
        raise ConfigError(f"{comp}/config.json: conv_norm_out splits {c0} channels into {out_groups} groups")
    children = [Node("conv_in", ops.conv2d(positive_int(config, "in_channels"), c0, 3, h, w)),
                *_time_embeddings(config, c0, ted), module_list("down_blocks", downs)]
    if mid is not None:
        children.append(mid)
    children += [module_list("up_blocks", ups),
                 Node("conv_norm_out", ops.group_norm(c0, h * w) + ops.activation(c0 * h * w)),
                 Node("conv_out", ops.conv2d(c0, count_int(config, "out_channels"), 3, h, w))]
    return Node("unet", children=tuple(children), formula="unet_2d")
