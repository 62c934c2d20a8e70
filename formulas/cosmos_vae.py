r"""The Cosmos 1.0 video tokenizer, ``AutoencoderKLCosmos`` (diffusers
``models/autoencoders/autoencoder_kl_cosmos.py``).

Every convolution is a ``CosmosCausalConv3d`` (:46-80, an ``nn.Conv3d`` subclass: thop counts 0), called once on the
whole video: the first frame is repeated ``temporal_pad = (k_t − 1) + (1 − s_t)`` times in front, the sides padded by
``padding``. ``CosmosConvProjection3d`` (:266-276) is a (1, 3, 3) conv ``conv_s`` then a (3, 1, 1) conv ``conv_t``:

.. math:: \mathrm{MACs} = T H W\,(9\,C_o C_i + 3\,C_o^2)

``CosmosResnetBlock3d`` (:279-315): per-frame GroupNorm (one group), SiLU, ``conv1``, GroupNorm, SiLU, ``conv2``, a
1×1×1 ``conv_shortcut`` when the width changes. ``CosmosCausalAttention`` with the spatial processor (:446-482) runs
one-head attention over the ``H·W`` positions of each frame, the temporal one (:485-521) over the ``T`` frames of each
position (a causal boolean mask: SDPA still multiplies every pair); each has a GroupNorm and four 1×1×1 convs
(``to_q/k/v``, ``to_out.0``).

**Patching** (``CosmosPatchEmbed3d``, :107-184, ``patch_type`` ``haar``): the first frame is repeated ``p`` times (``T
= F + p − 1``), then ``log2 p`` Haar levels, each one ``F.conv3d`` per filter (depthwise, ``g`` = the channels, kernel
2, stride 2, after a reflect pad of one on the right): 2 along time on ``⌈T/2⌉ (H+1)(W+1)``, 4 along height on ``⌈T/2⌉
⌈H/2⌉ (W+1)``, 8 along width on ``⌈T/2⌉ ⌈H/2⌉ ⌈W/2⌉`` positions, 2 MACs per output each; the channels grow 8×.
``rearrange`` is a reshape (no work). **Unpatching** (``CosmosUnpatcher3d``, :187-263): per level, from ``8g``
channels on ``T × H × W``, ``F.conv_transpose3d`` (counted on the *input* positions, 2 MACs each per channel): 8 along
width on ``T H W``, 4 along height on ``T H (2W)``, 2 along time on ``T (2H)(2W)``; then the first ``p − 1`` frames
are dropped.

**Encoder** (``CosmosEncoder3d``, :710-791): patching, ``conv_in`` (a projection from ``in·p³``), down blocks (``i`` <
n − 1, ``num_layers`` ResNets, attention where ``resolution / p / 2^i`` is in ``attention_resolutions``, a
``CosmosDownsample3d`` (:318-365) after all but the last: spatial (a (0, 1, 0, 1) pad, a stride-2 (1, 3, 3) conv plus
average pooling; even sizes only, else the sum fails) for the first ``log2(spatial_ratio / p)`` blocks, temporal (the
first frame repeated, a stride-2 (3, 1, 1) conv plus pooling: ``⌈T/2⌉`` frames) for the first ``log2(temporal_ratio /
p)``, then a 1×1×1 ``conv3``), the mid block (ResNet, spatial attention, temporal attention, ResNet), GroupNorm, SiLU,
``conv_out`` (a projection to ``latent_channels``). ``quant_conv``: 1×1×1.

**Decoder** (``CosmosDecoder3d``, :794-876): ``post_quant_conv`` (1×1×1, in ``_decode``), ``conv_in``, the mid block,
up blocks (``num_layers + 1`` ResNets, attention as above from ``resolution / p / 2^(n−2)`` up, a ``CosmosUpsample3d``
(:368-413) after all but the last: temporal (``2T − 1`` frames, a (3, 1, 1) conv) for blocks ``0 < i ≤
log2(temporal_ratio / p)``, spatial (nearest ×2, a (1, 3, 3) conv) there too or, when the spatial ratio is the larger,
for ``i < log2(spatial_ratio / p)``; a 1×1×1 ``conv3``), GroupNorm, SiLU, ``conv_out`` (to ``out·p³``) and unpatching.
"""

from __future__ import annotations

from typing import Any, Sequence

from flopcalc.engine.cost import Cost, Node, block_kinds, module_list
from flopcalc.engine.errors import ResolutionError
from flopcalc.formulas import ops

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds("cosmos_vae_resnet", "cosmos_vae_attention", "cosmos_vae_down_block", "cosmos_vae_up_block",
                          "cosmos_vae_mid_block")


def causal_conv(c_in: int, c_out: int, kernel_volume: int, positions: Any) -> Cost:
    """A ``CosmosCausalConv3d`` producing ``positions`` output positions (thop: 0, a subclass)."""
    return ops.conv(c_in, c_out, kernel_volume, positions, thop_hooked=False)


def projection(name: str, c_in: int, c_out: int, positions: Any) -> Node:
    """``CosmosConvProjection3d``: ``conv_s`` (1, 3, 3) then ``conv_t`` (3, 1, 1), sizes kept."""
    return Node(name, children=(Node("conv_s", causal_conv(c_in, c_out, 9, positions)),
                                Node("conv_t", causal_conv(c_out, c_out, 3, positions))))


def _norm_act(name: str, channels: int, positions: Any) -> Node:
    """``CosmosCausalGroupNorm`` (one group, per frame) followed by the SiLU the caller applies."""
    return Node(name, ops.activation(channels * positions), (Node("norm", ops.group_norm(channels, positions)),))


def resnet(c_in: int, c_out: int, positions: Any) -> Node:
    """``CosmosResnetBlock3d`` on ``positions = T·H·W``."""
    children = [_norm_act("norm1", c_in, positions), projection("conv1", c_in, c_out, positions),
                _norm_act("norm2", c_out, positions), projection("conv2", c_out, c_out, positions)]
    if c_in != c_out:
        children.append(Node("conv_shortcut", causal_conv(c_in, c_out, 1, positions)))
    return Node("resnet", children=tuple(children), formula="cosmos_vae_resnet")


def attention(channels: int, frames: Any, area: Any, temporal: bool) -> Node:
    """``CosmosCausalAttention``, spatial (per frame over ``area``) or temporal (per position over ``frames``)."""
    n = frames * area
    core = ops.attention(frames, frames, 1, channels) * area if temporal else ops.attention(area, area, 1, channels) \
        * frames
    return Node("attention", core, (
        Node("norm", children=(Node("norm", ops.group_norm(channels, n)),)),
        *(Node(p, causal_conv(channels, channels, 1, n)) for p in ("to_q", "to_k", "to_v")),
        Node("to_out", children=(Node("0", causal_conv(channels, channels, 1, n)),)),
    ), formula="cosmos_vae_attention")


def _attention_lists(channels: int, frames: Any, area: Any, count: int) -> list[Node]:
    return [module_list("attentions", [attention(channels, frames, area, False)] * count),
            module_list("temp_attentions", [attention(channels, frames, area, True)] * count)]


def mid_block(channels: int, frames: Any, h: Any, w: Any) -> Node:
    """``CosmosMidBlock3d`` with one layer (:594-637): ResNet, spatial and temporal attention, ResNet."""
    n = frames * h * w
    return Node("mid_block", children=(module_list("resnets", [resnet(channels, channels, n)] * 2),
                                       *_attention_lists(channels, frames, h * w, 1)), formula="cosmos_vae_mid_block")


def halve_up(size: Any) -> Any:
    """``⌈size / 2⌉`` (a Haar level, a stride-2 pad-one convolution); on a symbol ``size / 2`` (the law holds for
    the pipelines' sizes, ``F ≡ 1 (mod 8)`` frames repeated to an even count and sizes multiples of 16)."""
    return -(-size // 2) if isinstance(size, int) else size / 2


def temporal_down(frames: Any) -> Any:
    """``CosmosDownsample3d``'s temporal output: ``⌊(T − 1)/2⌋ + 1``; on a symbol ``(T + 1)/2`` (T odd there)."""
    return (frames - 1) // 2 + 1 if isinstance(frames, int) else (frames + 1) / 2


def spatial_down(size: Any, what: str) -> Any:
    """``CosmosDownsample3d``'s spatial output: the stride-2 conv and the average pool agree only on even sizes."""
    if isinstance(size, int):
        if size % 2:
            raise ResolutionError(f"AutoencoderKLCosmos: a spatial down-sampler meets an odd {what} of {size} (its "
                                  "strided conv and average pool then differ in size: the real encode fails); use a "
                                  "size that is a multiple of the spatial compression ratio")
        return size // 2
    return size / 2


def temporal_up(frames: Any) -> Any:
    """``CosmosUpsample3d``'s temporal output: ``2T − 1`` (one frame stays one)."""
    if isinstance(frames, int) and frames == 1:
        return 1
    return 2 * frames - 1


def haar_patch(channels: int, frames: Any, h: Any, w: Any, levels: int) -> tuple[Cost, int, Any, Any, Any]:
    """``CosmosPatchEmbed3d._haar`` on ``frames`` input frames: its functional convolutions, the output channels
    and sizes."""
    t = frames + 2 ** levels - 1
    macs = 0
    for _ in range(levels):
        t2, h2, w2 = halve_up(t), halve_up(h), halve_up(w)
        macs += 2 * 2 * channels * t2 * (h + 1) * (w + 1) + 4 * 2 * channels * t2 * h2 * (w + 1) \
            + 8 * 2 * channels * t2 * h2 * w2
        channels, t, h, w = 8 * channels, t2, h2, w2
    return Cost(functional=macs), channels, t, h, w


def haar_unpatch(channels: int, frames: Any, h: Any, w: Any, levels: int) -> tuple[Cost, Any, Any, Any]:
    """``CosmosUnpatcher3d._ihaar``: its transposed convolutions (counted on their input positions) and the output
    sizes (the first ``p − 1`` frames dropped)."""
    macs = 0
    for _ in range(levels):
        g = channels // 8
        macs += 8 * 2 * g * frames * h * w + 4 * 2 * g * frames * h * (2 * w) + 2 * 2 * g * frames * (2 * h) * (2 * w)
        channels, frames, h, w = g, 2 * frames, 2 * h, 2 * w
    return Cost(functional=macs), frames - (2 ** levels - 1), h, w


def cosmos_encoder(*, in_channels: int, latent: int, widths: Sequence[int], layers: int, attention_at: Sequence[int],
                   resolution: int, patch: int, haar: bool, spatial_layers: int, temporal_layers: int, frames: Any,
                   height: Any, width: Any) -> tuple[Node, Any, Any, Any]:
    """``CosmosEncoder3d`` on ``frames × height × width`` (module doc); returns it and the latent sizes."""
    levels = patch.bit_length() - 1
    if haar:
        cost, channels, t, h, w = haar_patch(in_channels, frames, height, width, levels)
    else:  # rearrange: a reshape of (F + p − 1) frames into p-sized patches
        cost, channels = Cost(), in_channels * patch ** 3
        t, h, w = (ops.exact_div(frames + patch - 1, patch), ops.exact_div(height, patch),
                   ops.exact_div(width, patch))
    children = [Node("patch_embed", cost), projection("conv_in", channels, widths[0], t * h * w)]
    res, downs = resolution // patch, []
    for i in range(len(widths) - 1):
        c_in, c_out = widths[i], widths[i + 1]
        attend = res in attention_at
        parts = [module_list("resnets", [resnet(c_in if j == 0 else c_out, c_out, t * h * w) for j in range(layers)])]
        if attend:
            parts += _attention_lists(c_out, t, h * w, layers)
        if i < len(widths) - 2:
            spatial, temporal = i < spatial_layers, i < temporal_layers
            res //= 2
            if spatial or temporal:
                sampler = []
                if spatial:
                    h, w = spatial_down(h, "height"), spatial_down(w, "width")
                    sampler.append(Node("conv1", causal_conv(c_out, c_out, 9, t * h * w)))
                if temporal:
                    t = temporal_down(t)
                    sampler.append(Node("conv2", causal_conv(c_out, c_out, 3, t * h * w)))
                sampler.append(Node("conv3", causal_conv(c_out, c_out, 1, t * h * w)))
                parts.append(module_list("downsamplers", [Node("downsampler", children=tuple(sampler))]))
        downs.append(Node("down_block", children=tuple(parts), formula="cosmos_vae_down_block"))
    top = widths[-1]
    n = t * h * w
    children += [module_list("down_blocks", downs), mid_block(top, t, h, w), _norm_act("norm_out", top, n),
                 projection("conv_out", top, latent, n)]
    return Node("encoder", children=tuple(children), formula="cosmos_vae_encoder"), t, h, w


def cosmos_decoder(*, latent: int, out_channels: int, widths: Sequence[int], layers: int,
                   attention_at: Sequence[int], resolution: int, patch: int, haar: bool, spatial_layers: int,
                   temporal_layers: int, frames: Any, height: Any, width: Any) -> tuple[Node, Any]:
    """``CosmosDecoder3d`` on a ``frames × height × width`` latent (module doc); ``widths`` as configured (it
    reverses them). Returns it and the decoded frames."""
    rev = list(reversed(widths))
    t, h, w = frames, height, width
    children = [projection("conv_in", latent, rev[0], t * h * w), mid_block(rev[0], t, h, w)]
    res, ups = (resolution // patch) // 2 ** (len(widths) - 2), []
    for i in range(len(widths) - 1):
        c_in, c_out = rev[i], rev[i + 1]
        attend = res in attention_at
        parts = [module_list("resnets", [resnet(c_in if j == 0 else c_out, c_out, t * h * w)
                                         for j in range(layers + 1)])]
        if attend:
            parts += _attention_lists(c_out, t, h * w, layers + 1)
        if i < len(widths) - 2:
            temporal = 0 < i < temporal_layers + 1
            spatial = temporal or (i < spatial_layers and spatial_layers > temporal_layers)
            res *= 2
            if spatial or temporal:
                sampler = []
                if temporal:
                    t = temporal_up(t)
                    sampler.append(Node("conv1", causal_conv(c_out, c_out, 3, t * h * w)))
                if spatial:
                    h, w = 2 * h, 2 * w
                    sampler.append(Node("conv2", causal_conv(c_out, c_out, 9, t * h * w)))
                sampler.append(Node("conv3", causal_conv(c_out, c_out, 1, t * h * w)))
                parts.append(module_list("upsamplers", [Node("upsampler", children=tuple(sampler))]))
        ups.append(Node("up_block", children=tuple(parts), formula="cosmos_vae_up_block"))
    bottom = rev[-1]
    inner = out_channels * patch ** 3
    n = t * h * w
    if haar:
        cost, out_frames, _, _ = haar_unpatch(inner, t, h, w, patch.bit_length() - 1)
    else:
        cost, out_frames = Cost(), t * patch - (patch - 1)
    children += [module_list("up_blocks", ups), _norm_act("norm_out", bottom, n),
                 projection("conv_out", bottom, inner, n), Node("unpatch_embed", cost)]
    return Node("decoder", children=tuple(children), formula="cosmos_vae_decoder"), out_frames
