r"""The causal 3-D convolutional VAE of Wan and Qwen-Image, on images and videos of any length:
diffusers ``models/autoencoders/autoencoder_kl_wan.py`` (``WanCausalConv3d``, ``WanRMS_norm``,
``WanResidualBlock``, ``WanAttentionBlock``, ``WanResample``, ``WanMidBlock``, ``WanUpBlock`` /
``WanResidualUpBlock``, ``WanResidualDownBlock``, ``WanEncoder3d``, ``WanDecoder3d``) and its
Qwen-Image fine-tune ``autoencoder_kl_qwenimage.py`` (the same blocks under ``QwenImage*`` names:
``QwenImageCausalConv3d``, ``QwenImageRMS_norm``, ``QwenImageResidualBlock``,
``QwenImageAttentionBlock``, ``QwenImageResample``, ``QwenImageMidBlock``, ``QwenImageUpBlock``,
``QwenImageEncoder3d``, ``QwenImageDecoder3d``; Wan 2.1's layout, no ``is_residual``).

**Chunks.** The model encodes and decodes a video chunk by chunk, with a feature cache standing in
for the frames before the chunk: ``_decode`` calls the decoder once per latent frame, ``_encode``
the encoder on the first frame and then on chunks of 4 frames. A video is therefore a
:class:`Chunks`: a first chunk of ``first`` frames and ``count`` later chunks of ``later`` frames
each, ``count`` an int or a sympy expression (the latent frame count of a symbolic law). Every
function returns the cost summed over the chunks, as ``FlopCounterMode`` sums a module's calls.
An image is one chunk of one frame: ``Chunks(1, 1, 0)`` (the functions also take the frames per
chunk as a tuple, ``(1,)``).

**Causal convolutions** (``WanCausalConv3d`` / ``QwenImageCausalConv3d``, ``nn.Conv3d`` subclasses)
pad time by ``2·p_t`` frames in front (or take them from the cache), so a chunk of :math:`f` frames
keeps :math:`f` frames: :math:`\mathrm{MACs} = P\,C_o C_i\,k_t k_h k_w`, :math:`P` the output
positions (frames × H × W summed over the chunks). thop matches rules by exact type and counts the
subclass as 0, so these MACs are ``functional`` (torch counts them, thop does not). The resampling
and attention 2-D convolutions are plain ``nn.Conv2d`` and thop counts them.

**Resampling** (``WanResample`` / ``QwenImageResample``): ``upsample2d``/``upsample3d`` is
nearest-exact 2× upsampling (an ``nn.Upsample`` subclass: thop counts 0) and a 3×3 ``nn.Conv2d`` to
``upsample_out_dim`` (c/2 in ``WanUpBlock`` / ``QwenImageUpBlock``, c in ``WanResidualUpBlock``) at
the doubled size; ``downsample2d``/``downsample3d`` a ``ZeroPad2d((0,1,0,1))`` and a stride-2 3×3
``nn.Conv2d(c, c)``. The ``3d`` modes add a causal ``time_conv`` that the *first* chunk never runs
(its cache slot is still empty: ``"Rep"`` when upsampling, the stored chunk when downsampling): on
an image it holds parameters and does no work. From the second chunk on, ``upsample3d``'s
``time_conv`` (c → 2c, kernel 3×1×1) runs before the spatial upsampling and doubles the frames;
``downsample3d``'s (c → c, 3×1×1, stride 2) runs after it on the previous chunk's last frame and the
chunk's frames, :math:`f \to \lfloor (f-2)/2 \rfloor + 1`.

**Attention** (``WanAttentionBlock``): per frame, one head over the :math:`HW` pixels, with 1×1
``nn.Conv2d`` ``to_qkv`` (c → 3c) and ``proj``: :math:`\mathrm{MACs} = F\,(4 H W C^2 + 2 (HW)^2 C)`.

**Norms** (``WanRMS_norm``): ``F.normalize`` times a learned gain (``C`` parameters; no bias in these
models): elementwise only, no thop rule.

**Qwen-Image 2.1** (``autoencoder_kl_qwenimage21.py``, ``AutoencoderKLQwenImage21``): Wan 2.2's residual
layout specialised to images: ``QwenImage21CausalConv3d`` is an ``nn.Conv2d`` subclass (:137-183) that squeezes
the single frame away, so every causal kernel loses its temporal extent (3×3×3 → 3×3, the ``time_conv``\ s
3×1×1 → 1×1): the functions take ``kt=1`` (thop still counts the subclass as 0).

**Wan 2.2** (``is_residual``): the encoder's levels are ``WanResidualDownBlock``\ s and the
decoder's ``WanResidualUpBlock``\ s; their ``avg_shortcut`` (``AvgDown3D`` / ``DupUp3D``: reshapes,
a mean, a repeat) counts nothing.

Decode, for :math:`T` latent frames of :math:`h \times w`: every term is a convolution over
:math:`(1 + m (T-1))\,hw\,4^i` positions (:math:`m` the temporal upsampling reached so far) or a
``time_conv`` over the later chunks only, plus the mid-block attention
:math:`T \cdot 2 (hw)^2 c_0`: linear in :math:`T`, :math:`\alpha\,hw + \beta\,(hw)^2` per frame (an
image, :math:`T = 1`: :math:`\alpha\,hw + \beta\,(hw)^2` exactly, as in the 2-D ``AutoencoderKL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds(
    "causal_residual_block", "causal_vae_attention", "causal_vae_downsample", "causal_vae_upsample",
)

@dataclass(frozen=True)
class Chunks:
    """Frames as the causal VAE sees them: a first chunk of ``first`` frames, then ``count`` chunks of
    ``later`` frames each (``count`` an int or a sympy expression)."""

    first: int
    later: int
    count: Any

    @property
    def frames(self) -> Any:
        """All frames, summed over the chunks."""
        return self.first + self.later * self.count

    @property
    def later_frames(self) -> Any:
        """Frames of the later chunks only (where the temporal ``time_conv``\\ s run)."""
        return self.later * self.count

    def upsampled(self) -> Chunks:
        """After ``upsample3d``: every later chunk has twice its frames."""
        return Chunks(self.first, 2 * self.later, self.count)

    def __iter__(self) -> Iterator[int]:
        """The frames of each chunk, first first (a numeric count only)."""
        yield self.first
        yield from (self.later,) * self.count

    def downsampled(self) -> Chunks:
        """After ``downsample3d``: a later chunk of f frames keeps ⌊(f − 2)/2⌋ + 1."""
        later = (self.later + 1 - 3) // 2 + 1
        if later < 1 and not (isinstance(self.count, int) and self.count == 0):
            raise ValueError(f"a {self.later}-frame chunk is too short for another temporal downsampling "
                             "(WanCausalConv3d would get fewer frames than its kernel)")
        return Chunks(self.first, later, self.count)


def as_chunks(frames: Chunks | Sequence[int]) -> Chunks:
    """``frames`` as :class:`Chunks`: the frames of each chunk, first first (``(1,)``, ``(1, 4, 4)``;
    the later chunks alike), or already :class:`Chunks`."""
    if isinstance(frames, Chunks):
        return frames
    first, *later = frames
    if len(set(later)) > 1:
        raise ValueError(f"the later chunks differ in length: {tuple(frames)}")
    return Chunks(first, later[0] if later else 1, len(later))


def encoded_frames(chunks: Chunks | Sequence[int], temperal_downsample: Sequence[bool], levels: int) -> Chunks:
    """Latent frames per chunk after the encoder's ``levels − 1`` downsamplers (``downsample3d``
    where ``temperal_downsample``: every chunk but the first goes from f to ⌊(f−2)/2⌋ + 1)."""
    chunks = as_chunks(chunks)
    for i in range(levels - 1):
        if temperal_downsample[i]:
            chunks = chunks.downsampled()
    return chunks


def decode_chunks(latent_frames: Any) -> Chunks:
    """``_decode``: one decoder call per latent frame."""
    return Chunks(1, 1, latent_frames - 1)


def encode_chunks(frames: Any) -> Chunks:
    """``_encode``: ``1 + (F − 1) // 4`` encoder calls, the first frame alone, then chunks of 4 (frames past
    the last full chunk are not encoded). On a symbol, ``(F − 1)/4`` (a law for F = 4k + 1)."""
    later = (frames - 1) // 4 if isinstance(frames, int) else (frames - 1) / 4
    return Chunks(1, 4, later)


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


def residual_block(c_in: int, c_out: int, chunks: Chunks | Sequence[int], height: Any, width: Any,
                   kt: int = 3) -> Node:
    r"""``WanResidualBlock(c_in, c_out)`` over the frames of all chunks (:math:`P = F\,HW`): see
    :func:`residual_block_at`."""
    return residual_block_at(c_in, c_out, as_chunks(chunks).frames * height * width, kt)


@lru_cache(maxsize=4096)
def residual_block_at(c_in: int, c_out: int, pos: Any, kt: int = 3) -> Node:
    r"""The causal residual block of the Wan-style VAEs (``QwenImageResidualBlock``,
    ``WanResidualBlock``) over ``pos`` output positions (frames × H × W, summed over calls): RMS norm,
    SiLU, causal 3×3×3 ``conv1``, RMS norm, SiLU, causal 3×3×3 ``conv2``, and a causal 1×1×1
    ``conv_shortcut`` when the widths differ.

    .. math:: \mathrm{MACs} = P\,(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o]\,C_o C_i)

    ``kt``: the convolutions' temporal kernel, 3; 1 for Qwen-Image 2.1's image specialisation
    (``QwenImage21CausalConv3d``, an ``nn.Conv2d`` subclass with 3×3 kernels: :math:`9` in place of :math:`27`).
    """
    children = [
        norm_act("norm1", c_in, pos),
        Node("conv1", causal_conv3d(c_in, c_out, (kt, 3, 3), pos)),
        norm_act("norm2", c_out, pos),
        Node("conv2", causal_conv3d(c_out, c_out, (kt, 3, 3), pos)),
    ]
    if c_in != c_out:
        children.append(Node("conv_shortcut", causal_conv3d(c_in, c_out, (1, 1, 1), pos)))
    return Node("resnet", children=tuple(children), formula="causal_residual_block")


def attention_block(channels: int, chunks: Chunks | Sequence[int], height: Any, width: Any) -> Node:
    """``WanAttentionBlock(c)`` over the frames of all chunks: see :func:`_attention_block`."""
    return _attention_block(channels, as_chunks(chunks), height, width)


@lru_cache(maxsize=1024)
def _attention_block(channels: int, chunks: Chunks, height: Any, width: Any) -> Node:
    r"""``WanAttentionBlock(c)``: per frame, RMS norm, 1×1 ``to_qkv`` (``nn.Conv2d`` c → 3c), one-head
    attention over the :math:`HW` pixels (head width c), 1×1 ``proj``.

    .. math:: \mathrm{MACs} = F\,(4 H W C^2 + 2 (HW)^2 C)
    """
    frames = chunks.frames
    hw = height * width
    pos = frames * hw
    return Node(
        "attention",
        ops.attention(hw, hw, 1, channels) * frames,
        children=(
            Node("norm", rms_norm(channels, pos)),
            Node("to_qkv", ops.conv(channels, 3 * channels, 1, pos)),
            Node("proj", ops.conv(channels, channels, 1, pos)),
        ),
        formula="causal_vae_attention",
    )


def mid_block(channels: int, chunks: Chunks, height: Any, width: Any, kt: int = 3) -> Node:
    """``WanMidBlock(c, num_layers=1)``: residual block, attention block, residual block."""
    res = residual_block(channels, channels, chunks, height, width, kt)
    att = attention_block(channels, chunks, height, width)
    return Node("mid_block", children=(module_list("resnets", [res, res]), module_list("attentions", [att])),
                formula="causal_vae_mid_block")


def upsample(channels: int, out_channels: int, mode: str, chunks: Chunks, height: Any, width: Any,
             name: str = "upsample", kt: int = 3) -> tuple[Node, Chunks]:
    r"""``WanResample(c, "upsample2d" | "upsample3d", upsample_out_dim)`` on an ``H × W`` input;
    returns the node and the chunks after it.

    ``upsample3d``'s ``time_conv`` (c → 2c, 3×1×1) runs on the later chunks and doubles their frames;
    then nearest-exact 2× upsampling (``WanUpsample``, an ``nn.Upsample`` subclass: thop counts 0) and
    ``nn.Conv2d(c, c_o, 3)`` per frame:
    :math:`\mathrm{MACs} = 9\,F' \cdot 4HW\,C_o C + [\text{3d}]\,3 F_\text{later} HW\,2C^2`.
    """
    if mode not in ("upsample2d", "upsample3d"):
        raise ValueError(f"unknown upsampling mode {mode!r}")
    children = []
    if mode == "upsample3d":
        children.append(Node("time_conv", causal_conv3d(channels, 2 * channels, (kt, 1, 1),
                                                        chunks.later_frames * height * width)))
        chunks = chunks.upsampled()
    pos = chunks.frames * 4 * height * width
    resample = Node("resample", children=(
        Node("0", ops.upsample_nearest(channels * pos)),
        Node("1", ops.conv(channels, out_channels, 9, pos)),
    ))
    return Node(name, children=(resample, *children), formula="causal_vae_upsample"), chunks


def downsample(channels: int, mode: str, chunks: Chunks, height: Any, width: Any,
               name: str = "downsample", kt: int = 3) -> tuple[Node, Chunks]:
    r"""``WanResample(c, "downsample2d" | "downsample3d")`` on an ``H × W`` input; returns the node and
    the chunks after it.

    ``ZeroPad2d((0, 1, 0, 1))`` and ``nn.Conv2d(c, c, 3, stride=2)`` per frame (output
    :math:`\lfloor H/2 \rfloor \times \lfloor W/2 \rfloor`); ``downsample3d``'s ``time_conv`` (c → c,
    3×1×1, stride 2 in time) then runs on the later chunks, each with the previous chunk's last frame.
    """
    if mode not in ("downsample2d", "downsample3d"):
        raise ValueError(f"unknown downsampling mode {mode!r}")
    h2, w2 = ops.conv_output_size(height + 1, 3, 2), ops.conv_output_size(width + 1, 3, 2)
    children = [Node("resample", children=(
        Node("0"),  # ZeroPad2d: no work
        Node("1", ops.conv(channels, channels, 9, chunks.frames * h2 * w2)),
    ))]
    if mode == "downsample3d":
        chunks = chunks.downsampled()
        children.append(Node("time_conv", causal_conv3d(channels, channels, (kt, 1, 1),
                                                        chunks.later_frames * h2 * w2)))
    return Node(name, children=tuple(children), formula="causal_vae_downsample"), chunks


def halve(size: Any) -> Any:
    """A side after a stride-2 downsampler (``ZeroPad2d((0,1,0,1))`` + 3×3 stride 2): ⌊size/2⌋."""
    return ops.conv_output_size(size + 1, 3, 2)


def causal_decoder(*, base_dim: int, z_dim: int, dim_mult: Sequence[int], num_res_blocks: int,
                   temperal_upsample: Sequence[bool], out_channels: int, height: Any, width: Any,
                   frames: Chunks | Sequence[int] = (1,), is_residual: bool = False, kt: int = 3) -> Node:
    r"""``WanDecoder3d`` / ``QwenImageDecoder3d`` on ``frames`` (latent frames per chunk: ``_decode``
    decodes one latent frame per call, :func:`decode_chunks`): causal ``conv_in`` (z → c₀), mid block at c₀, ``len(dim_mult)`` up blocks of
    ``num_res_blocks + 1`` residual blocks, all but the last followed by an upsampler
    (``upsample3d`` where ``temperal_upsample``), RMS norm, SiLU, causal ``conv_out``.

    Widths :math:`c = \text{base}\cdot[m_{-1}, m_{-1}, m_{-2}, \dots, m_0]`. Wan 2.1 (``WanUpBlock``):
    the upsampler halves its block's width and the next block starts from half the previous width,
    modules ``up_blocks.i.upsamplers.0``. Wan 2.2 (``WanResidualUpBlock``): the upsampler keeps the
    width, module ``up_blocks.i.upsampler``. ``kt``: the temporal kernel of the causal convolutions (3; 1 for
    ``QwenImage21Decoder3d``, whose causal convolutions are 2-D: :func:`residual_block_at`).
    """
    chunks = as_chunks(frames)
    dims = [base_dim * m for m in [dim_mult[-1], *dim_mult[::-1]]]
    h, w = height, width
    children = [
        Node("conv_in", causal_conv3d(z_dim, dims[0], (kt, 3, 3), chunks.frames * h * w)),
        mid_block(dims[0], chunks, h, w, kt),
    ]
    ups = []
    levels = len(dim_mult)
    for i in range(levels):
        c_in, c_out = dims[i], dims[i + 1]
        if i > 0 and not is_residual:
            c_in //= 2
        resnets = [residual_block(c_in if j == 0 else c_out, c_out, chunks, h, w, kt)
                   for j in range(num_res_blocks + 1)]
        parts = [module_list("resnets", resnets)]
        if i != levels - 1:
            mode = "upsample3d" if temperal_upsample[i] else "upsample2d"
            if is_residual:
                node, chunks = upsample(c_out, c_out, mode, chunks, h, w, name="upsampler", kt=kt)
                parts.append(node)
            else:
                node, chunks = upsample(c_out, c_out // 2, mode, chunks, h, w, kt=kt)
                parts.append(module_list("upsamplers", [node]))
            h, w = 2 * h, 2 * w
        ups.append(Node("up_block", children=tuple(parts), formula="causal_vae_up_block"))
    pos = chunks.frames * h * w
    children += [
        module_list("up_blocks", ups),
        norm_act("norm_out", dims[-1], pos),
        Node("conv_out", causal_conv3d(dims[-1], out_channels, (kt, 3, 3), pos)),
    ]
    return Node("decoder", children=tuple(children), formula="causal_vae_decoder")


def causal_encoder(*, base_dim: int, z_channels: int, dim_mult: Sequence[int], num_res_blocks: int,
                   attn_scales: Sequence[float], temperal_downsample: Sequence[bool], in_channels: int,
                   height: Any, width: Any, frames: Chunks | Sequence[int] = (1,), is_residual: bool = False,
                   kt: int = 3) -> Node:
    r"""``WanEncoder3d`` / ``QwenImageEncoder3d`` on ``frames`` (frames per chunk: ``_encode`` runs the
    first frame alone, then chunks of 4, :func:`encode_chunks`): causal ``conv_in`` (input → c₀), the
    levels, mid block, RMS norm, SiLU, causal ``conv_out`` to ``z_channels`` (2·z_dim: mean and
    log-variance). Its output: :func:`encoded_frames` of :func:`halve`\ d sides.

    Wan 2.1: one flat ``down_blocks`` list, per level ``num_res_blocks`` residual blocks (each followed
    by an attention block when the level's scale :math:`2^{-i}` is in ``attn_scales``) and, for all but
    the last level, a downsampler (``downsample3d`` where ``temperal_downsample``). Wan 2.2
    (``is_residual``): one ``WanResidualDownBlock`` per level (``resnets``, ``downsampler``; no
    attention). Widths :math:`c = \text{base}\cdot[1, m_0, m_1, \dots]`. ``kt``: as in :func:`causal_decoder`.
    """
    chunks = as_chunks(frames)
    dims = [base_dim * m for m in [1, *dim_mult]]
    h, w = height, width
    children = [Node("conv_in", causal_conv3d(in_channels, dims[0], (kt, 3, 3), chunks.frames * h * w))]
    blocks: list[Node] = []
    scale = 1.0
    last = len(dim_mult) - 1
    for i, (c_in, c_out) in enumerate(zip(dims[:-1], dims[1:])):
        level: list[Node] = []
        for _ in range(num_res_blocks):
            level.append(residual_block(c_in, c_out, chunks, h, w, kt))
            if not is_residual and scale in attn_scales:
                level.append(attention_block(c_out, chunks, h, w))
            c_in = c_out
        sampler = None
        if i != last:
            mode = "downsample3d" if temperal_downsample[i] else "downsample2d"
            sampler, chunks = downsample(c_out, mode, chunks, h, w, name="downsampler" if is_residual else "downsample",
                                         kt=kt)
            h, w = halve(h), halve(w)
            scale /= 2.0
        if is_residual:
            parts = [module_list("resnets", level)] + ([sampler] if sampler is not None else [])
            blocks.append(Node("down_block", children=tuple(parts), formula="wan_vae_down_block"))
        else:
            blocks += level + ([sampler] if sampler is not None else [])
    top = dims[-1]
    pos = chunks.frames * h * w
    children += [
        module_list("down_blocks", blocks),
        mid_block(top, chunks, h, w, kt),
        norm_act("norm_out", top, pos),
        Node("conv_out", causal_conv3d(top, z_channels, (kt, 3, 3), pos)),
    ]
    return Node("encoder", children=tuple(children), formula="causal_vae_encoder")


