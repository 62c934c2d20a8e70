r"""The CogVideoX causal 3-D VAE (diffusers ``models/autoencoders/autoencoder_kl_cogvideox.py``:
``CogVideoXCausalConv3d``, ``CogVideoXSafeConv3d``, ``CogVideoXSpatialNorm3D``,
``CogVideoXResnetBlock3D``, ``CogVideoXDownBlock3D``, ``CogVideoXMidBlock3D``,
``CogVideoXUpBlock3D``, ``CogVideoXEncoder3D``, ``CogVideoXDecoder3D``; ``downsampling.py``
``CogVideoXDownsample3D``, ``upsampling.py`` ``CogVideoXUpsample3D``). No attention: every term
is a convolution, so a call's cost is a sum over *levels* :math:`k` (the resolution steps of the
encoder or decoder) of :math:`P_k`, the output positions (frames × height × width) summed over
every frame batch the call runs, times a per-position weight.

**Frame batches.** ``_decode`` runs the decoder on latent frames in batches of 2 (the first
batch takes one more when the count is odd), ``_encode`` the encoder on batches of 8 video frames
(the first takes the ``F mod 8`` extra frames); a conv cache carries the last frames of each
batch to the next, so a causal convolution with a :math:`k_t`-frame kernel keeps the batch's
frame count either way. Temporal resampling acts per batch:

* ``CogVideoXUpsample3D(compress_time=True)``: a batch of :math:`f` frames becomes :math:`2f`
  (even :math:`f`) or :math:`2f - 1` (odd: the first frame is only upsampled in space). Batches
  keep their parity, so after :math:`k` such levels :math:`T` latent frames give
  :math:`2^k (T - o) + o` frames, :math:`o = T \bmod 2`: 13 latent frames decode to 49.
* ``CogVideoXDownsample3D(compress_time=True)``: ``avg_pool1d`` over time, :math:`f \to f/2`
  (even) or :math:`1 + \lfloor (f-1)/2 \rfloor` (odd); functional, no MACs.

The up/down blocks with ``compress_time`` are the first ``log2(temporal_compression_ratio)``.

**Tiles** (``enable_tiling()``; off by default): ``tiled_decode`` / ``tiled_encode`` cut the
latent (the video) into overlapping tiles and run the whole frame-batched call on each: a tiled
call costs the untiled call on every tile (:func:`tiles`; how a call is split:
``AutoencoderKLCogVideoX``'s ``decode_split`` / ``encode_split``), overlaps counted in full.

**Causal convolutions.** ``CogVideoXCausalConv3d`` pads time with :math:`k_t - 1` cached (or
repeated first) frames and holds a ``CogVideoXSafeConv3d`` (an ``nn.Conv3d`` subclass that splits
inputs over 2 GiB along time, re-feeding :math:`k_t - 1` frames: the same output positions, so the
same MACs): :math:`\mathrm{MACs} = P\,C_o C_i k^3`, ``functional`` (thop matches rules by exact
type and counts the subclass as 0). Only the resamplers' 3×3 ``nn.Conv2d`` count in thop.

Per position (channel widths :math:`c`, latent channels :math:`z` for the decoder's spatial
norms): a resnet block :math:`27 c_o (c_i + c_o) + [c_i \ne c_o] c_o c_i` MACs, plus in the
decoder :math:`2 z (c_i + c_o)` for the ``conv_y``/``conv_b`` of its two spatial norms.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.tiling import extents

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cogvideox_resnet_block", "cogvideox_downsampler", "cogvideox_upsampler")

#: ``AutoencoderKLCogVideoX.__init__``: ``num_latent_frames_batch_size`` and
#: ``num_sample_frames_batch_size`` (frames per decoder / encoder call).
LATENT_FRAMES_BATCH = 2
SAMPLE_FRAMES_BATCH = 8
#: ``AutoencoderKLCogVideoX.__init__``: ``tile_overlap_factor_height`` / ``_width``.
TILE_OVERLAP_HEIGHT = 1 / 6
TILE_OVERLAP_WIDTH = 1 / 5


def causal_conv(name: str, c_in: int, c_out: int, kernel: int, positions: Any) -> Node:
    """``CogVideoXCausalConv3d(c_in, c_out, kernel)`` (its ``conv``, a ``CogVideoXSafeConv3d``)
    producing ``positions`` output positions: :math:`P C_o C_i k^3` MACs, invisible to thop."""
    return Node(name, children=(Node("conv", safe_conv(c_in, c_out, kernel, positions)),))


def safe_conv(c_in: int, c_out: int, kernel: int, positions: Any) -> Cost:
    """A bare ``CogVideoXSafeConv3d(c_in, c_out, kernel)`` (``nn.Conv3d`` subclass, bias)."""
    return ops.conv(c_in, c_out, kernel ** 3, positions, thop_hooked=False)


def spatial_norm(name: str, channels: int, zq_channels: int, positions: Any) -> Node:
    r"""``CogVideoXSpatialNorm3D(channels, zq_channels)``: the latent ``zq`` interpolated (nearest, no
    MACs) to the feature map, ``GroupNorm(channels)``, and two causal 1×1×1 convolutions
    ``conv_y``, ``conv_b`` (z → c) giving the scale and shift: :math:`2 P z c` MACs."""
    return Node(name, children=(
        Node("norm_layer", ops.group_norm(channels, positions)),
        causal_conv("conv_y", zq_channels, channels, 1, positions),
        causal_conv("conv_b", zq_channels, channels, 1, positions),
    ), formula="cogvideox_spatial_norm")


def _norm(name: str, channels: int, positions: Any, zq_channels: int | None) -> Node:
    """A resnet block's norm: ``nn.GroupNorm`` (encoder) or a spatial norm (decoder), then SiLU."""
    act = ops.activation(channels * positions)
    if zq_channels is None:
        return Node(name, ops.group_norm(channels, positions) + act)
    node = spatial_norm(name, channels, zq_channels, positions)
    return Node(name, act, node.children, formula=node.formula)


@lru_cache(maxsize=4096)  # nodes are immutable; the decoder repeats the same blocks per frame batch
def resnet_block(c_in: int, c_out: int, positions: Any, zq_channels: int | None = None) -> Node:
    r"""``CogVideoXResnetBlock3D(c_in, c_out, temb_channels=0)``: norm1, SiLU, causal 3×3×3 ``conv1``,
    norm2, SiLU, causal 3×3×3 ``conv2``, and a 1×1×1 ``CogVideoXSafeConv3d`` ``conv_shortcut`` when
    the widths differ. Norms are ``GroupNorm`` in the encoder and spatial norms on the latent
    (``zq_channels`` = z) in the decoder.

    .. math:: \mathrm{MACs} = P\,\bigl(27 c_o (c_i + c_o) + [c_i \ne c_o]\,c_o c_i + [\text{dec}]\,2z(c_i + c_o)\bigr)
    """
    children = [
        _norm("norm1", c_in, positions, zq_channels),
        causal_conv("conv1", c_in, c_out, 3, positions),
        _norm("norm2", c_out, positions, zq_channels),
        causal_conv("conv2", c_out, c_out, 3, positions),
    ]
    if c_in != c_out:
        children.append(Node("conv_shortcut", safe_conv(c_in, c_out, 1, positions)))
    return Node("resnet", children=tuple(children), formula="cogvideox_resnet_block")


def _resampler(name: str, channels: int, out_positions: Any) -> Node:
    """``CogVideoX{Up,Down}sample3D(c, c)``: per frame, a 3×3 ``nn.Conv2d(c, c)`` (padding 1 after a
    nearest 2× upsampling, or stride 2 after a ``(0, 1, 0, 1)`` pad) producing ``out_positions``."""
    return module_list(name, [Node(name.rstrip("s"), children=(
        Node("conv", ops.conv(channels, channels, 9, out_positions)),
    ), formula=f"cogvideox_{name.rstrip('s')}")])


def decoder(*, latent_channels: int, out_channels: int, block_out_channels: Sequence[int], layers_per_block: int,
            positions: Sequence[Any]) -> Node:
    r"""``CogVideoXDecoder3D``: causal ``conv_in`` (z → c₀), a mid block of 2 resnets at c₀, one up
    block per width (``layers_per_block + 1`` resnets; an upsampler on all but the last), the spatial
    ``norm_out``, SiLU, causal ``conv_out`` to the video. Widths
    :math:`c = \text{block\_out\_channels}` reversed; every norm is a spatial norm on the latent.

    ``positions[k]``: output positions at level k (after k upsamplers), summed over the frame
    batches (:func:`decoder_positions`).
    """
    widths = list(reversed(block_out_channels))
    z = latent_channels
    p0 = positions[0]
    mid = [resnet_block(widths[0], widths[0], p0, z)] * 2
    ups = []
    prev = widths[0]
    for i, width in enumerate(widths):
        resnets = [resnet_block(prev if j == 0 else width, width, positions[i], z) for j in range(layers_per_block + 1)]
        parts = [module_list("resnets", resnets)]
        if i < len(widths) - 1:
            parts.append(_resampler("upsamplers", width, positions[i + 1]))
        ups.append(Node("up_block", children=tuple(parts), formula="cogvideox_up_block"))
        prev = width
    last = positions[len(widths) - 1]
    norm_out = spatial_norm("norm_out", widths[-1], z, last)
    return Node("decoder", children=(
        causal_conv("conv_in", z, widths[0], 3, p0),
        Node("mid_block", children=(module_list("resnets", mid),), formula="cogvideox_mid_block"),
        module_list("up_blocks", ups),
        Node("norm_out", ops.activation(widths[-1] * last), norm_out.children, formula=norm_out.formula),
        causal_conv("conv_out", widths[-1], out_channels, 3, last),
    ), formula="cogvideox_decoder")


def encoder(*, in_channels: int, latent_channels: int, block_out_channels: Sequence[int], layers_per_block: int,
            positions: Sequence[Any]) -> Node:
    r"""``CogVideoXEncoder3D``: causal ``conv_in`` (video → c₀), one down block per width
    (``layers_per_block`` resnets; a downsampler on all but the last), a mid block of 2 resnets,
    ``GroupNorm``, SiLU, causal ``conv_out`` to 2z (mean and log-variance).

    ``positions[k]``: output positions at level k (after k downsamplers), summed over the frame
    batches (:func:`encoder_positions`).
    """
    widths = list(block_out_channels)
    downs = []
    prev = widths[0]
    for i, width in enumerate(widths):
        resnets = [resnet_block(prev if j == 0 else width, width, positions[i]) for j in range(layers_per_block)]
        parts = [module_list("resnets", resnets)]
        if i < len(widths) - 1:
            parts.append(_resampler("downsamplers", width, positions[i + 1]))
        downs.append(Node("down_block", children=tuple(parts), formula="cogvideox_down_block"))
        prev = width
    last = positions[len(widths) - 1]
    top = widths[-1]
    return Node("encoder", children=(
        causal_conv("conv_in", in_channels, widths[0], 3, positions[0]),
        module_list("down_blocks", downs),
        Node("mid_block", children=(module_list("resnets", [resnet_block(top, top, last)] * 2),),
             formula="cogvideox_mid_block"),
        Node("norm_out", ops.group_norm(top, last) + ops.activation(top * last)),
        causal_conv("conv_out", top, 2 * latent_channels, 3, last),
    ), formula="cogvideox_encoder")


# --------------------------------------------------------------------------- frames


def decoded_frames(latent_frames: Any, levels: int, odd: int) -> Any:
    r"""Frames after ``levels`` time-compressing upsamplers, summed over ``_decode``'s frame batches:
    :math:`2^k (T - o) + o` with :math:`o = T \bmod 2` (the only odd batch is the first)."""
    return 2 ** levels * (latent_frames - odd) + odd


def first_batch_odd(latent_frames: Any, output_frames: Any | None, levels: int) -> int:
    r""":math:`T \bmod 2`: whether ``_decode``'s first frame batch is odd. For an int; for a symbolic
    :math:`T`, recovered from the decoded frame count (:math:`o = (2^k T - F_\text{out}) / (2^k - 1)`,
    a constant on the branch a law is stated for)."""
    if isinstance(latent_frames, int):
        return latent_frames % 2
    if levels == 0:
        return 0
    if output_frames is None:
        raise ValueError("a symbolic latent frame count needs the decoded frame count (RunShape.frames)")
    odd = ops.exact_div(2 ** levels * latent_frames - output_frames, 2 ** levels - 1)
    if odd not in (0, 1):
        raise ValueError(f"decoded frames {output_frames} do not follow from {latent_frames} latent frames")
    return int(odd)


def encode_batches(frames: int) -> tuple[int, ...]:
    """Frames per encoder call: ``_encode`` makes ``max(F // 8, 1)`` batches, the first of
    ``8 + F mod 8`` frames (all of them when F < 8), the others of 8."""
    batches = max(frames // SAMPLE_FRAMES_BATCH, 1)
    first = min(SAMPLE_FRAMES_BATCH + frames % SAMPLE_FRAMES_BATCH, frames)
    return (first,) + (SAMPLE_FRAMES_BATCH,) * (batches - 1)


def _halve_frames(f: int) -> int:
    """``CogVideoXDownsample3D(compress_time=True)`` on ``f`` frames."""
    return 1 + (f - 1) // 2 if f % 2 else f // 2


def encoder_frames(frames: Any, levels: int, temporal_levels: int) -> list[Any]:
    r"""Frames at each of ``levels`` encoder levels, summed over ``_encode``'s batches (levels
    below ``temporal_levels`` halve time). For a symbolic frame count the layout of a valid
    CogVideoX length, :math:`F \equiv 1 \pmod 8` (batches 9, 8, …, 8), is assumed:
    :math:`(F - 1)/2^k + 1` at level k (exact while 8 halves, i.e. up to 3 temporal levels)."""
    if not isinstance(frames, int):
        return [(frames - 1) / 2 ** min(k, temporal_levels) + 1 for k in range(levels)]
    batches = list(encode_batches(frames))
    out = [sum(batches)]
    for k in range(1, levels):
        if k - 1 < temporal_levels:
            batches = [_halve_frames(f) for f in batches]
        out.append(sum(batches))
    return out


# --------------------------------------------------------------------------- positions


def decoder_positions(latent_frames: Any, odd: int, area: Any, levels: int, temporal_levels: int) -> list[Any]:
    r""":math:`P_k = \bigl(2^{\min(k, K)} (T - o) + o\bigr)\,4^k A`: positions at decoder level k for
    ``area`` A latent pixels per frame, K time-compressing levels."""
    return [decoded_frames(latent_frames, min(k, temporal_levels), odd) * 4 ** k * area for k in range(levels)]


def encoder_positions(frames: Any, height: Any, width: Any, levels: int, temporal_levels: int) -> list[Any]:
    r"""Positions at encoder level k: frames at level k × the size after k stride-2 downsamplers
    (``(0,1,0,1)`` pad, 3×3 stride 2: :math:`h \to \lfloor (h - 2)/2 \rfloor + 1`)."""
    frames_at = encoder_frames(frames, levels, temporal_levels)
    out = []
    for k in range(levels):
        out.append(frames_at[k] * height * width)
        if k < levels - 1 and any(isinstance(v, int) and v < 2 for v in (height, width)):
            raise ValueError(f"a {min(height, width)}-pixel side cannot be downsampled again (the 3×3 stride-2 "
                             "convolution needs at least 2 after its one-pixel pad)")
        height, width = ops.conv_output_size(height + 1, 3, 2), ops.conv_output_size(width + 1, 3, 2)
    return out


# --------------------------------------------------------------------------- tiles


def tile_stride(tile: int, overlap: float) -> int:
    """``int(tile · (1 − overlap))``: every how many rows (columns) ``tiled_decode`` / ``tiled_encode``
    start a tile."""
    stride = int(tile * (1 - overlap))
    if stride <= 0:
        from flopcalc.engine.errors import ConfigError

        raise ConfigError(f"a tile stride of {stride}: the VAE's tile (sample_height / sample_width) is too small "
                          "for its overlap")
    return stride


def tiles(height: int, width: int, tile_h: int, tile_w: int, overlap_h: float,
          overlap_w: float) -> list[tuple[int, int]]:
    """``tiled_decode`` / ``tiled_encode``: tiles start every ``int(tile · (1 − overlap))`` rows
    and columns and take ``tile`` of them (fewer at the edge, ``formulas/tiling.py``): the ``(h, w)``
    of each, in order."""
    rows = extents(height, tile_h, tile_stride(tile_h, overlap_h))
    cols = extents(width, tile_w, tile_stride(tile_w, overlap_w))
    return [(h, w) for h in rows for w in cols]
