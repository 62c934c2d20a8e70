r"""Causal 3-D convolutional VAE pieces: the Wan-style video VAE that ``AutoencoderKLQwenImage``
fine-tunes (diffusers ``models/autoencoders/autoencoder_kl_qwenimage.py``: ``QwenImageCausalConv3d``,
``QwenImageRMS_norm``, ``QwenImageResidualBlock``, ``QwenImageAttentionBlock``, ``QwenImageResample``,
``QwenImageMidBlock``, ``QwenImageUpBlock``, ``QwenImageEncoder3d``, ``QwenImageDecoder3d``; the Wan
VAE, ``autoencoder_kl_wan.py``, has the same blocks under ``Wan*`` names).

**Chunks.** The model encodes and decodes a video chunk by chunk, with a feature cache standing in
for the frames before the chunk: ``_decode`` calls the decoder once per latent frame, ``_encode``
the encoder on the first frame and then on chunks of 4 frames. Every function here takes
``frames``, the number of frames of each chunk (a tuple, first chunk first) at the point where the
block runs, and returns the cost summed over the chunks, the way ``FlopCounterMode`` sums a module's
calls. An image is one chunk of one frame: ``frames = (1,)``.

**Causal convolutions** (``QwenImageCausalConv3d``, a ``nn.Conv3d`` subclass) pad time by
``2·p_t`` frames in front (or take them from the cache), so a chunk of :math:`f` frames keeps
:math:`f` frames: :math:`\mathrm{MACs} = f H W\,C_o C_i\,k_t k_h k_w`. thop matches rules by exact
type and counts the subclass as 0, so these MACs are ``functional`` (torch counts them, thop does
not). The resampling and attention 2-D convolutions are plain ``nn.Conv2d`` and thop counts them.

**Resampling** (``QwenImageResample``): ``upsample2d``/``upsample3d`` is nearest-exact 2× upsampling
and a 3×3 ``nn.Conv2d(c, c/2)`` at the doubled size; ``downsample2d``/``downsample3d`` a
``ZeroPad2d((0,1,0,1))`` and a stride-2 3×3 ``nn.Conv2d(c, c)``. The ``3d`` modes add a causal
``time_conv`` that the *first* chunk never runs (its cache slot is still empty: ``"Rep"`` when
upsampling, the stored chunk when downsampling): on an image it holds parameters and does no work.
From the second chunk on, ``upsample3d``'s ``time_conv`` (c → 2c, kernel 3×1×1) runs before the
spatial upsampling and doubles the frames; ``downsample3d``'s (c → c, 3×1×1, stride 2) runs after it
on the previous chunk's last frame and the chunk's frames, :math:`f \to \lfloor (f-2)/2 \rfloor + 1`.

**Attention** (``QwenImageAttentionBlock``): per frame, one head over the :math:`HW` pixels, with
1×1 ``nn.Conv2d`` ``to_qkv`` (c → 3c) and ``proj``: :math:`\mathrm{MACs} = f\,(4 H W C^2 + 2 (HW)^2 C)`.

**Norms** (``QwenImageRMS_norm``): ``F.normalize`` times a learned gain (``C`` parameters; no bias
in these models): elementwise only, no thop rule.

Image decode (one latent frame, :math:`h \times w`, widths :math:`c_k`): every term is a
convolution over :math:`hw\,4^{i}` positions plus the mid-block attention :math:`2 (hw)^2 c_0`, so the
cost is :math:`\alpha\,hw + \beta\,(hw)^2` exactly, as in the 2-D ``AutoencoderKL``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from flopcalc.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds(
    "causal_residual_block", "causal_vae_attention", "causal_vae_downsample", "causal_vae_upsample",
)

Frames = tuple[int, ...]


def _positions(frames: Frames, height: Any, width: Any) -> Any:
    return sum(frames) * height * width


def causal_conv3d(c_in: int, c_out: int, kernel: tuple[int, int, int], positions: Any, *, bias: bool = True) -> Cost:
    r"""``QwenImageCausalConv3d(c_in, c_out, kernel)`` producing ``positions`` output positions
    (frames × H × W, summed over chunks): :math:`\mathrm{MACs} = P\,C_o C_i\,k_t k_h k_w`, ``functional``
    (an ``nn.Conv3d`` subclass: thop counts 0)."""
    kt, kh, kw = kernel
    return ops.conv(c_in, c_out, kt * kh * kw, positions, bias=bias, thop_hooked=False)


def rms_norm(channels: int, positions: Any) -> Cost:
    """``QwenImageRMS_norm(channels)``: ``F.normalize`` over channels × gain (``channels`` parameters)."""
    return ops.rms_norm(positions, channels)


def norm_act(name: str, channels: int, positions: Any) -> Node:
    """An RMS norm (``QwenImageRMS_norm`` / ``WanRMS_norm``) followed by the block's SiLU (the
    activation module has no cost node)."""
    return Node(name, rms_norm(channels, positions) + ops.activation(channels * positions))


@lru_cache(maxsize=4096)  # nodes are immutable; a VAE repeats the same few blocks
def residual_block(c_in: int, c_out: int, frames: Frames, height: Any, width: Any) -> Node:
    r"""``QwenImageResidualBlock(c_in, c_out)`` on the frames of each chunk: see
    :func:`residual_block_at`, with :math:`P = \textstyle\sum f\,HW`."""
    return residual_block_at(c_in, c_out, _positions(frames, height, width))


@lru_cache(maxsize=4096)
def residual_block_at(c_in: int, c_out: int, pos: Any) -> Node:
    r"""The causal residual block of the Wan-style VAEs (``QwenImageResidualBlock``,
    ``WanResidualBlock``) over ``pos`` output positions (frames × H × W, summed over calls): RMS norm,
    SiLU, causal 3×3×3 ``conv1``, RMS norm, SiLU, causal 3×3×3 ``conv2``, and a causal 1×1×1
    ``conv_shortcut`` when the widths differ.

    .. math:: \mathrm{MACs} = P\,(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o]\,C_o C_i)
    """
    children = [
        norm_act("norm1", c_in, pos),
        Node("conv1", causal_conv3d(c_in, c_out, (3, 3, 3), pos)),
        norm_act("norm2", c_out, pos),
        Node("conv2", causal_conv3d(c_out, c_out, (3, 3, 3), pos)),
    ]
    if c_in != c_out:
        children.append(Node("conv_shortcut", causal_conv3d(c_in, c_out, (1, 1, 1), pos)))
    return Node("resnet", children=tuple(children), formula="causal_residual_block")


@lru_cache(maxsize=1024)
def attention_block(channels: int, frames: Frames, height: Any, width: Any) -> Node:
    r"""``QwenImageAttentionBlock(c)``: per frame, RMS norm, 1×1 ``to_qkv`` (c → 3c), one-head
    attention over the :math:`HW` pixels (head width c), 1×1 ``proj``.

    .. math:: \mathrm{MACs} = F\,(4 H W C^2 + 2 (HW)^2 C),\quad F = \textstyle\sum f
    """
    n_frames = sum(frames)
    hw = height * width
    pos = n_frames * hw
    return Node(
        "attention",
        ops.attention(hw, hw, 1, channels) * n_frames,
        children=(
            Node("norm", rms_norm(channels, pos)),
            Node("to_qkv", ops.conv(channels, 3 * channels, 1, pos)),
            Node("proj", ops.conv(channels, channels, 1, pos)),
        ),
        formula="causal_vae_attention",
    )


def mid_block(channels: int, frames: Frames, height: Any, width: Any, *, num_layers: int = 1) -> Node:
    """``QwenImageMidBlock(c, num_layers=1)``: a residual block, then ``num_layers`` × (attention,
    residual block)."""
    res = residual_block(channels, channels, frames, height, width)
    att = attention_block(channels, frames, height, width)
    return Node(
        "mid_block",
        children=(module_list("resnets", [res] * (num_layers + 1)), module_list("attentions", [att] * num_layers)),
        formula="causal_vae_mid_block",
    )


def upsample(channels: int, mode: str, frames: Frames, height: Any, width: Any) -> tuple[Node, Frames]:
    r"""``QwenImageResample(c, "upsample2d" | "upsample3d")`` on a ``height × width`` input; returns
    the node and the frames per chunk after it.

    ``upsample3d``'s causal ``time_conv`` (c → 2c, 3×1×1) runs on every chunk but the first and
    doubles its frames; then nearest-exact 2× upsampling and ``nn.Conv2d(c, c/2, 3)`` per frame:
    :math:`\mathrm{MACs} = 9\,F' \cdot 4HW\,\tfrac{C}{2} C + [\text{3d}]\,3 F_{>0} HW\,2C^2`.
    """
    if mode not in ("upsample2d", "upsample3d"):
        raise ValueError(f"unknown upsampling mode {mode!r}")
    children = []
    if mode == "upsample3d":
        later = frames[1:]
        children.append(Node("time_conv", causal_conv3d(channels, 2 * channels, (3, 1, 1),
                                                        _positions(later, height, width))))
        frames = frames[:1] + tuple(2 * f for f in later)
    h2, w2 = 2 * height, 2 * width
    pos = _positions(frames, h2, w2)
    resample = Node("resample", children=(
        Node("0", ops.upsample_nearest(channels * pos)),
        Node("1", ops.conv(channels, channels // 2, 9, pos)),
    ))
    return Node("upsample", children=(resample, *children), formula="causal_vae_upsample"), frames


def downsample(channels: int, mode: str, frames: Frames, height: Any, width: Any) -> tuple[Node, Frames]:
    r"""``QwenImageResample(c, "downsample2d" | "downsample3d")`` on a ``height × width`` input;
    returns the node and the frames per chunk after it.

    ``ZeroPad2d((0, 1, 0, 1))`` and ``nn.Conv2d(c, c, 3, stride=2)`` per frame (output
    :math:`\lfloor H/2 \rfloor \times \lfloor W/2 \rfloor`); ``downsample3d``'s causal ``time_conv``
    (c → c, 3×1×1, stride 2 in time) then runs on every chunk but the first, on the previous chunk's
    last frame and the chunk's :math:`f` frames, leaving :math:`\lfloor (f-2)/2 \rfloor + 1`.
    """
    if mode not in ("downsample2d", "downsample3d"):
        raise ValueError(f"unknown downsampling mode {mode!r}")
    h2, w2 = ops.conv_output_size(height + 1, 3, 2), ops.conv_output_size(width + 1, 3, 2)
    resample = Node("resample", children=(
        Node("0"),  # ZeroPad2d: no work (thop: zero_ops)
        Node("1", ops.conv(channels, channels, 9, _positions(frames, h2, w2))),
    ))
    children = [resample]
    if mode == "downsample3d":
        later = tuple((f + 1 - 3) // 2 + 1 for f in frames[1:])
        children.append(Node("time_conv", causal_conv3d(channels, channels, (3, 1, 1), _positions(later, h2, w2))))
        frames = frames[:1] + later
    return Node("downsample", children=tuple(children), formula="causal_vae_downsample"), frames


def causal_decoder(
    *,
    base_dim: int,
    z_dim: int,
    dim_mult: Sequence[int],
    num_res_blocks: int,
    temperal_upsample: Sequence[bool],
    out_channels: int,
    height: Any,
    width: Any,
    frames: Frames = (1,),
) -> Node:
    r"""``QwenImageDecoder3d``: causal ``conv_in`` (z → c₀), mid block at c₀, ``len(dim_mult)`` up
    blocks of ``num_res_blocks + 1`` residual blocks each, all but the last followed by an upsampler
    (``upsample3d`` where ``temperal_upsample``), RMS norm, SiLU, causal ``conv_out`` to the image.

    Widths: :math:`c = \text{base\_dim}\cdot[m_{-1}, m_{-1}, m_{-2}, \dots, m_0]`; an upsampler halves
    its block's width, so every block after the first starts from half the previous width.
    ``frames``: latent frames per chunk (``_decode`` decodes one latent frame per call).
    """
    dims = [base_dim * m for m in [dim_mult[-1], *dim_mult[::-1]]]
    h, w = height, width
    pos = _positions(frames, h, w)
    children = [
        Node("conv_in", causal_conv3d(z_dim, dims[0], (3, 3, 3), pos)),
        mid_block(dims[0], frames, h, w),
    ]
    ups = []
    levels = len(dim_mult)
    for i in range(levels):
        c_in, c_out = (dims[i] // 2 if i > 0 else dims[i]), dims[i + 1]
        resnets = [residual_block(c_in if j == 0 else c_out, c_out, frames, h, w) for j in range(num_res_blocks + 1)]
        parts = [module_list("resnets", resnets)]
        if i != levels - 1:
            mode = "upsample3d" if temperal_upsample[i] else "upsample2d"
            node, frames = upsample(c_out, mode, frames, h, w)
            h, w = 2 * h, 2 * w
            parts.append(module_list("upsamplers", [node]))
        ups.append(Node("up_block", children=tuple(parts), formula="causal_vae_up_block"))
    pos = _positions(frames, h, w)
    children += [
        module_list("up_blocks", ups),
        norm_act("norm_out", dims[-1], pos),
        Node("conv_out", causal_conv3d(dims[-1], out_channels, (3, 3, 3), pos)),
    ]
    return Node("decoder", children=tuple(children), formula="causal_vae_decoder")


def causal_encoder(
    *,
    base_dim: int,
    z_channels: int,
    dim_mult: Sequence[int],
    num_res_blocks: int,
    attn_scales: Sequence[float],
    temperal_downsample: Sequence[bool],
    in_channels: int,
    height: Any,
    width: Any,
    frames: Frames = (1,),
) -> Node:
    r"""``QwenImageEncoder3d``: causal ``conv_in`` (image → c₀), then one flat ``down_blocks`` list:
    per level ``num_res_blocks`` residual blocks (each followed by an attention block when the
    level's scale :math:`2^{-i}` is in ``attn_scales``) and, for all but the last level, a
    downsampler (``downsample3d`` where ``temperal_downsample``); mid block, RMS norm, SiLU, causal
    ``conv_out`` to ``z_channels`` (2·z_dim: mean and log-variance).

    Widths: :math:`c = \text{base\_dim}\cdot[1, m_0, m_1, \dots]`. ``frames``: frames per chunk
    (``_encode`` runs the first frame alone, then chunks of 4).
    """
    dims = [base_dim * m for m in [1, *dim_mult]]
    h, w = height, width
    children = [Node("conv_in", causal_conv3d(in_channels, dims[0], (3, 3, 3), _positions(frames, h, w)))]
    blocks: list[Node] = []
    scale = 1.0
    for i, (c_in, c_out) in enumerate(zip(dims[:-1], dims[1:])):
        for _ in range(num_res_blocks):
            blocks.append(residual_block(c_in, c_out, frames, h, w))
            if scale in attn_scales:
                blocks.append(attention_block(c_out, frames, h, w))
            c_in = c_out
        if i != len(dim_mult) - 1:
            mode = "downsample3d" if temperal_downsample[i] else "downsample2d"
            node, frames = downsample(c_out, mode, frames, h, w)
            h, w = ops.conv_output_size(h + 1, 3, 2), ops.conv_output_size(w + 1, 3, 2)
            blocks.append(node)
            scale /= 2.0
    top = dims[-1]
    pos = _positions(frames, h, w)
    children += [
        module_list("down_blocks", blocks),
        mid_block(top, frames, h, w),
        norm_act("norm_out", top, pos),
        Node("conv_out", causal_conv3d(top, z_channels, (3, 3, 3), pos)),
    ]
    return Node("encoder", children=tuple(children), formula="causal_vae_encoder")


def decode_chunks(latent_frames: int) -> Frames:
    """Frames per decoder call: ``_decode`` decodes one latent frame at a time."""
    return (1,) * latent_frames


def encode_chunks(frames: int) -> Frames:
    """Frames per encoder call: ``_encode`` runs ``1 + (T − 1) // 4`` calls, the first frame alone
    and then chunks of 4 (frames past the last full chunk are not encoded)."""
    return (1,) + (4,) * ((frames - 1) // 4)


def encoded_frames(frames: Frames, temperal_downsample: Sequence[bool], levels: int) -> Frames:
    """Latent frames per chunk after the encoder's ``levels − 1`` downsamplers (``downsample3d``
    where ``temperal_downsample``: every chunk but the first goes from f to ⌊(f−2)/2⌋ + 1)."""
    for i in range(levels - 1):
        if temperal_downsample[i]:
            frames = frames[:1] + tuple((f + 1 - 3) // 2 + 1 for f in frames[1:])
    return frames
