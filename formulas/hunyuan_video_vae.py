r"""HunyuanVideo's causal 3-D VAE (diffusers ``models/autoencoders/autoencoder_kl_hunyuan_video.py``:
``HunyuanVideoCausalConv3d``, ``HunyuanVideoResnetBlockCausal3D``, ``HunyuanVideoMidBlock3D``,
``HunyuanVideoUpsampleCausal3D``, ``HunyuanVideoDownsampleCausal3D``, ``HunyuanVideoDecoder3D``,
``HunyuanVideoEncoder3D``, ``AutoencoderKLHunyuanVideo``).

**Chunks and tiles.** Unlike the Wan / Qwen-Image VAE (``causal_vae.py``) there is no feature
cache: every chunk and tile is an independent ``post_quant_conv`` + ``decoder`` call
(``encoder`` + ``quant_conv``), and ``FlopCounterMode`` sums the calls. ``AutoencoderKLHunyuanVideo``
decodes with ``use_framewise_decoding`` on and ``use_tiling`` off by default:

* ``_temporal_tiled_decode`` (more than ``16 // r_t`` latent frames): chunks ``z[:, :, i : i + 16//r_t + 1]``
  for ``i`` in ``range(0, F_lat, 12 // r_t)``: 5 latent frames every 3 (r_t = 4), overlapping by 2;
  the last chunks are shorter. 33 latent frames: ten chunks of 5 and one of 3 (53 frames decoded);
* ``_temporal_tiled_encode`` (more than 16 frames): ``x[:, :, i : i + 17]`` every 12 frames;
* ``tiled_decode`` / ``tiled_encode`` (``enable_tiling()``, when a side exceeds 256 pixels):
  overlapping tiles of ``256 // r_s`` latent pixels every ``192 // r_s`` (256 pixels every 192), each
  decoded in full (overlaps counted in full), inside every temporal chunk.

A chunk of ``t`` frames is a ``(t, h, w)`` call; :func:`sum_calls` adds the trees of all calls
(work × calls, parameters once). Which chunks and tiles a call makes is its ``CallSplit``
(``formulas/tiling.py``: ``slices`` gives the (size, calls) list along one axis), made by
``AutoencoderKLHunyuanVideo``'s ``decode_split`` / ``encode_split``.

**Causal convolutions** (``HunyuanVideoCausalConv3d``): replicate padding (``k − 1`` frames in
front, ``k // 2`` pixels on each side), then a plain ``nn.Conv3d`` (``.conv``, which thop counts):
:math:`\mathrm{MACs} = f' h' w'\,C_o C_i k^3`; stride 1 keeps ``(f, h, w)``, the downsamplers'
stride ``(s_t, s, s)`` gives :math:`(\lfloor (f-1)/s_t \rfloor + 1, \lfloor (h-1)/s \rfloor + 1, …)`.

**Upsampling** (``HunyuanVideoUpsampleCausal3D``, factors ``(u_t, u, u)``): the first frame is
upsampled spatially only, the others in time too (nearest), then a causal 3×3×3 conv:
:math:`f \to 1 + u_t (f - 1)`, :math:`h \to u h`.

**Mid-block attention** (``Attention`` with ``norm_num_groups``, one head of width :math:`C`), over
all :math:`n = f h w` positions of the chunk with a causal frame mask (dense):
:math:`\mathrm{MACs} = 4 n C^2 + 2 n^2 C`.

Decoder of one chunk of :math:`t` latent frames at :math:`h \times w` (widths :math:`c_k`): each
conv term is :math:`f_k(t)\,4^{j} h w \cdot C_o C_i k^3` with :math:`f_k(t)` one of
:math:`t, 2t - 1, 4t - 3` (after each temporal upsampling), plus the attention
:math:`2 (t h w)^2 c_{-1}`: per chunk :math:`(\alpha t + \beta) h w + \gamma\,t^2 (hw)^2`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import Node, block_kinds, total_of
from flopcalc.formulas import ops
from flopcalc.formulas.tiling import Slices
from flopcalc.formulas.tiling import slices as tiles  # noqa: F401  (the slicing rule, by its old name here)

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds(
    "hunyuan_video_vae_resnet", "hunyuan_video_vae_attention", "hunyuan_video_vae_downsample",
    "hunyuan_video_vae_upsample",
)

#: ``AutoencoderKLHunyuanVideo.__init__``: tile and chunk sizes in sample pixels / frames.
TILE_SAMPLE_MIN_SIZE = 256
TILE_SAMPLE_STRIDE = 192
TILE_SAMPLE_MIN_FRAMES = 16
TILE_SAMPLE_STRIDE_FRAMES = 12


def floor_div(a: Any, b: int) -> Any:
    """``a // b`` as the real code floors it; a floor expression for a symbolic ``a``."""
    if isinstance(a, int):
        return a // b
    import sympy as sp  # symbolic path only

    return sp.floor(a / b)


# --------------------------------------------------------------------------- summing the calls


def sum_calls(calls: Sequence[tuple[Node, Any]]) -> Node:
    """One module called several times (one ``(tree, times)`` per kind of call, trees of the same
    structure): work adds up, as ``FlopCounterMode`` sums a module's calls; parameters count once."""
    first = calls[0][0]
    if len(calls) == 1 and calls[0][1] == 1:
        return first
    cost = total_of(node.cost * times for node, times in calls)
    children = []
    for i, child in enumerate(first.children):
        parts = [(node.children[i], times) for node, times in calls]
        if any(p.name != child.name for p, _ in parts):
            raise ValueError(f"calls of {first.name} differ in structure")
        children.append(sum_calls(parts))
    return Node(first.name, replace(cost, params=first.cost.params), tuple(children), first.count, first.span,
                first.formula)


# --------------------------------------------------------------------------- structure


@dataclass(frozen=True)
class VaeStructure:
    """What ``AutoencoderKLHunyuanVideo.__init__`` builds from its config."""

    in_channels: int
    out_channels: int
    latent_channels: int
    block_out_channels: tuple[int, ...]
    layers_per_block: int
    groups: int
    mid_attention: bool
    spatial_ratio: int
    temporal_ratio: int

    def _log2(self, ratio: int) -> int:
        return ratio.bit_length() - 1  # int(np.log2(ratio)) for the powers of two the configs use

    def encoder_strides(self) -> list[tuple[int, int] | None]:
        """Per down block: ``(s_t, s)`` of its downsampler, or None (``HunyuanVideoEncoder3D``,
        temporal ratio 4: spatial in the first log2(r_s) blocks, temporal in the two before the last)."""
        levels = len(self.block_out_channels)
        spatial, temporal = self._log2(self.spatial_ratio), self._log2(self.temporal_ratio)
        out = []
        for i in range(levels):
            final = i == levels - 1
            add_s = i < spatial
            add_t = i >= levels - 1 - temporal and not final
            out.append(((2 if add_t else 1), (2 if add_s else 1)) if add_s or add_t else None)
        return out

    def decoder_factors(self) -> list[tuple[int, int] | None]:
        """Per up block: ``(u_t, u)`` of its upsampler, or None (``HunyuanVideoDecoder3D``)."""
        return self.encoder_strides()  # the same rule, block by block


def _conv(name: str, c_in: int, c_out: int, kernel: int, positions: Any) -> Node:
    """A module holding an ``nn.Conv3d`` as ``.conv`` (``HunyuanVideoCausalConv3d``)."""
    return Node(name, children=(Node("conv", ops.conv(c_in, c_out, kernel ** 3, positions)),))


def _norm_act(name: str, channels: int, positions: Any, groups: int) -> Node:
    """``nn.GroupNorm(groups, channels)`` (no thop rule) and the SiLU after it."""
    return Node(name, ops.group_norm(channels, positions) + ops.activation(channels * positions))


def _list(name: str, items: Sequence[Node]) -> Node:
    """A ``ModuleList`` (entries named by index, not grouped: calls of several sizes add up
    entry by entry)."""
    return Node(name, children=tuple(replace(item, name=str(i)) for i, item in enumerate(items)))


def resnet_block(c_in: int, c_out: int, positions: Any, groups: int) -> Node:
    r"""``HunyuanVideoResnetBlockCausal3D``: GroupNorm, SiLU, causal 3×3×3 ``conv1``, GroupNorm,
    SiLU, causal 3×3×3 ``conv2``, causal 1×1×1 ``conv_shortcut`` when the widths differ.
    :math:`\mathrm{MACs} = P(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o] C_o C_i)`."""
    children = [
        _norm_act("norm1", c_in, positions, groups),
        _conv("conv1", c_in, c_out, 3, positions),
        _norm_act("norm2", c_out, positions, groups),
        _conv("conv2", c_out, c_out, 3, positions),
    ]
    if c_in != c_out:
        children.append(_conv("conv_shortcut", c_in, c_out, 1, positions))
    return Node("resnet", children=tuple(children), formula="hunyuan_video_vae_resnet")


def mid_attention(channels: int, positions: Any) -> Node:
    r"""The mid block's ``Attention`` (one head of width C, ``group_norm`` first) over all the
    chunk's positions: :math:`4 n C^2 + 2 n^2 C`."""
    return Node("attention", ops.attention(positions, positions, 1, channels), children=(
        Node("group_norm", ops.group_norm(channels, positions)),
        Node("to_q", ops.linear(positions, channels, channels)),
        Node("to_k", ops.linear(positions, channels, channels)),
        Node("to_v", ops.linear(positions, channels, channels)),
        Node("to_out", children=(Node("0", ops.linear(positions, channels, channels)),)),
    ), formula="hunyuan_video_vae_attention")


def mid_block(channels: int, positions: Any, groups: int, *, add_attention: bool) -> Node:
    """``HunyuanVideoMidBlock3D`` (one layer): resnet, attention (``add_attention``), resnet."""
    res = resnet_block(channels, channels, positions, groups)
    attentions = [mid_attention(channels, positions)] if add_attention else []
    return Node("mid_block", children=(_list("attentions", attentions), _list("resnets", [res, res])),
                formula="hunyuan_video_vae_mid_block")


@lru_cache(maxsize=512)
def decoder(s: VaeStructure, frames: Any, height: Any, width: Any) -> Node:
    """``HunyuanVideoDecoder3D`` on one ``(frames, height, width)`` latent chunk."""
    widths = list(reversed(s.block_out_channels))
    f, h, w = frames, height, width
    children = [_conv("conv_in", s.latent_channels, widths[0], 3, f * h * w),
                mid_block(widths[0], f * h * w, s.groups, add_attention=s.mid_attention)]
    ups = []
    c_prev = widths[0]
    for (c, factors) in zip(widths, s.decoder_factors()):
        pos = f * h * w
        resnets = [resnet_block(c_prev if j == 0 else c, c, pos, s.groups) for j in range(s.layers_per_block + 1)]
        parts = [_list("resnets", resnets)]
        if factors is not None:
            ut, u = factors
            f, h, w = 1 + ut * (f - 1), u * h, u * w
            pos = f * h * w
            upsampler = Node("upsampler", ops.upsample_nearest(c * pos), children=(_conv("conv", c, c, 3, pos),),
                             formula="hunyuan_video_vae_upsample")
            parts.append(_list("upsamplers", [upsampler]))
        ups.append(Node("up_block", children=tuple(parts), formula="hunyuan_video_vae_up_block"))
        c_prev = c
    c0, pos = s.block_out_channels[0], f * h * w
    children += [_list("up_blocks", ups), _norm_act("conv_norm_out", c0, pos, s.groups),
                 _conv("conv_out", c0, s.out_channels, 3, pos)]
    return Node("decoder", children=tuple(children), formula="hunyuan_video_vae_decoder")


def _down(size: Any, stride: int) -> Any:
    """Output length of the downsamplers' causal conv along one axis (kernel 3, 2 padded):
    ``(size − 1) // stride + 1``."""
    return size if stride == 1 else floor_div(size - 1, stride) + 1


@lru_cache(maxsize=512)
def encoder(s: VaeStructure, frames: Any, height: Any, width: Any) -> tuple[Node, tuple[Any, Any, Any]]:
    """``HunyuanVideoEncoder3D`` on one ``(frames, height, width)`` chunk; also returns the latent
    size it produces."""
    widths = s.block_out_channels
    f, h, w = frames, height, width
    children = [_conv("conv_in", s.in_channels, widths[0], 3, f * h * w)]
    downs = []
    c_prev = widths[0]
    for c, strides in zip(widths, s.encoder_strides()):
        pos = f * h * w
        resnets = [resnet_block(c_prev if j == 0 else c, c, pos, s.groups) for j in range(s.layers_per_block)]
        parts = [_list("resnets", resnets)]
        if strides is not None:
            st, sp = strides
            f, h, w = _down(f, st), _down(h, sp), _down(w, sp)
            parts.append(_list("downsamplers", [Node("downsampler", children=(_conv("conv", c, c, 3, f * h * w),),
                                                     formula="hunyuan_video_vae_downsample")]))
        downs.append(Node("down_block", children=tuple(parts), formula="hunyuan_video_vae_down_block"))
        c_prev = c
    top, pos = widths[-1], f * h * w
    children += [_list("down_blocks", downs), mid_block(top, pos, s.groups, add_attention=s.mid_attention),
                 _norm_act("conv_norm_out", top, pos, s.groups), _conv("conv_out", top, 2 * s.latent_channels, 3, pos)]
    return Node("encoder", children=tuple(children), formula="hunyuan_video_vae_encoder"), (f, h, w)


# --------------------------------------------------------------------------- whole calls


@lru_cache(maxsize=256)
def decode_call(s: VaeStructure, frames: Slices, rows: Slices, cols: Slices) -> Node:
    """``post_quant_conv`` + ``decoder`` on every chunk (temporal ``frames`` × spatial ``rows`` ×
    ``cols`` tiles), summed."""
    z = s.latent_channels
    calls = []
    for f, nf in frames:
        for h, nh in rows:
            for w, nw in cols:
                tree = Node("vae", children=(Node("post_quant_conv", ops.conv(z, z, 1, f * h * w)),
                                             decoder(s, f, h, w)))
                calls.append((tree, nf * nh * nw))
    return replace(sum_calls(calls), formula="hunyuan_video_vae_decode")


@lru_cache(maxsize=256)
def encode_call(s: VaeStructure, frames: Slices, rows: Slices, cols: Slices) -> Node:
    """``encoder`` + ``quant_conv`` on every chunk, summed."""
    z2 = 2 * s.latent_channels
    calls = []
    for f, nf in frames:
        for h, nh in rows:
            for w, nw in cols:
                enc, (lf, lh, lw) = encoder(s, f, h, w)
                tree = Node("vae", children=(enc, Node("quant_conv", ops.conv(z2, z2, 1, lf * lh * lw))))
                calls.append((tree, nf * nh * nw))
    return replace(sum_calls(calls), formula="hunyuan_video_vae_encode")

