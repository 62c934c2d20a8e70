r"""LTX-Video block formulas: the transformer block of ``LTXVideoTransformer3DModel`` (diffusers
``models/transformers/transformer_ltx.py``) and the blocks of the causal video VAE
``AutoencoderKLLTXVideo`` (``models/autoencoders/autoencoder_kl_ltx.py``).

**Transformer block** (``LTXVideoTransformerBlock``): :math:`N` video tokens of width
:math:`d = h d_h`, :math:`T` text tokens (already projected to :math:`d` by the model's
``caption_projection``) entering keys and values of width :math:`d_c` (``cross_attention_dim``,
which must equal :math:`d`), feed-forward width :math:`f` (``4d``; :math:`g = 2` for the gated
``geglu``/``swiglu`` activations, else 1):

.. math::

   \mathrm{MACs} = \underbrace{4 N d^2 + 2 h N^2 d_h}_{\text{attn1}}
                 + \underbrace{2 N d^2 + 2 T d_c d + 2 h N T d_h}_{\text{attn2}}
                 + \underbrace{(g + 1)\,N d f}_{\text{ff}}

``norm1``/``norm2`` are diffusers ``RMSNorm`` without affine (``norm_elementwise_affine``: false),
the modulation comes from a per-block ``scale_shift_table`` (6·d parameters) plus the model's
``temb``; ``attn1`` is self-attention with rotary q/k (``apply_rotary_emb``: elementwise, no
matmul), ``attn2`` cross-attention to the text without rotary. Both ``LTXAttention`` modules
normalise q and k over all heads at once (``qk_norm = "rms_norm_across_heads"``: one
``torch.nn.RMSNorm(h·d_h)`` each, affine, so :math:`h d_h` parameters each, no thop rule).
``LTXVideoRotaryPosEmbed`` builds its cos/sin tables from ``arange``/``meshgrid``/``linspace`` and
broadcast products: no counted work.

**VAE** (``AutoencoderKLLTXVideo``): every convolution is an ``LTXVideoCausalConv3d`` wrapping a
plain ``nn.Conv3d`` (``.conv``; thop counts it): time is padded by repeating the first frame
(causal: :math:`k_t - 1` in front) or the first and last frames (non-causal: :math:`(k_t-1)/2` each
side), space by zeros (:math:`k/2`), so a stride-1 convolution keeps :math:`t \times h \times w` and
costs :math:`t h w\,C_o C_i k^3` MACs. The stride-2 ``downsamplers`` convolution of
``LTXVideoDownBlock3D`` gives :math:`\lfloor (t-1)/2 \rfloor + 1` frames and likewise in space;
``LTXVideoDownsampler3d`` (0.9.5 encoders) prepends :math:`s_t - 1` frames, convolves to
:math:`C_o / (s_t s_h s_w)` channels at full size and folds space-time into channels;
``LTXVideoUpsampler3d`` convolves to :math:`C\,s_t s_h s_w / u` channels at the input size and
unfolds them to :math:`(s_t t - s_t + 1) \times s_h h \times s_w w` (the first :math:`s_t - 1`
frames are dropped). Residual blocks (``LTXVideoResnetBlock3d``): RMS norm (no affine), SiLU,
3×3×3 ``conv1``, RMS norm, SiLU, 3×3×3 ``conv2``, and, when the widths differ, an
``nn.LayerNorm`` (affine; thop: 4 ops per element) and a 1×1×1 ``conv_shortcut``:

.. math:: \mathrm{MACs} = P\,(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o]\,C_o C_i),\quad P = t h w

With ``timestep_conditioning`` (0.9.1+ decoders) every mid/up block embeds the decode timestep
(``PixArtAlphaCombinedTimestepSizeEmbeddings``: sinusoidal 256 → E → E, E = 4·C) and the decoder
one more time (E = 2·C) before ``conv_out``; with ``inject_noise`` the blocks add scaled spatial noise
(``per_channel_scale1/2``, elementwise). Decoder cost is :math:`\alpha(t)\,hw + \beta`, linear in the
latent area: a spatially tiled decode costs the same formula summed over its (overlapping) tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder

from flopcalc.engine.cost import Node, block_kinds, module_list

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds(
    "ltx_video_block", "feed_forward", "attention", "ltx_resnet_block", "ltx_downsampler", "ltx_upsampler",
)

#: ``FeedForward`` activations whose projection emits value and gate (``GEGLU``, ``SwiGLU``).
GATED_ACTIVATIONS = ("geglu", "swiglu")
#: Every ``activation_fn`` diffusers' ``FeedForward`` builds.
ACTIVATIONS = ("gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu", "linear-silu")
#: ``Timesteps(num_channels=256)`` feeds every ``TimestepEmbedding`` here.
TIMESTEP_CHANNELS = 256
#: ``FeedForward(dim)``'s default ``mult``.
FF_MULT = 4


# --------------------------------------------------------------------------- transformer


def ltx_attention(name: str, *, tokens: Any, dim: int, heads: int, head_dim: int, context_tokens: Any = None,
                  context_dim: int | None = None, bias: bool = True, out_bias: bool = True) -> Node:
    r"""``LTXAttention`` with ``LTXVideoAttnProcessor``: ``to_q`` (d → h·d_h) on the ``tokens``
    queries, ``to_k``/``to_v`` (d_c → h·d_h) on the keys (the queries themselves for self-attention,
    ``context_tokens`` vectors of width ``context_dim`` for cross-attention), ``norm_q``/``norm_k``
    (``nn.RMSNorm(h·d_h)`` across heads), scaled dot-product attention, ``to_out.0`` (h·d_h → d).

    .. math:: \mathrm{MACs} = 2 N d d_i + 2 M d_c d_i + 2 h N M d_h,\quad d_i = h d_h

    with :math:`M = N`, :math:`d_c = d` for self-attention. The projections are children named as the real
    module's; the node's own cost is the norms and the attention.
    """
    inner = heads * head_dim
    kv_tokens = tokens if context_tokens is None else context_tokens
    kv_dim = dim if context_dim is None else context_dim
    cost = ops.rms_norm(tokens, inner) + ops.rms_norm(kv_tokens, inner) + ops.attention(tokens, kv_tokens, heads, head_dim)
    projections = (
        Node("to_q", ops.linear(tokens, dim, inner, bias=bias)),
        Node("to_k", ops.linear(kv_tokens, kv_dim, inner, bias=bias)),
        Node("to_v", ops.linear(kv_tokens, kv_dim, inner, bias=bias)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=out_bias)),)),
    )
    return Node(name, cost, projections, formula="attention")


def ltx_feed_forward(name: str, tokens: Any, dim: int, activation: str) -> Node:
    r"""diffusers ``FeedForward(dim, activation_fn=activation)``: ``net.0.proj`` (d → f, or d → 2f
    for the gated activations), the activation, ``net.2`` (f → d), f = 4d, with biases; the projections as
    children with the real module's paths.

    .. math:: \mathrm{MACs} = (g + 1)\,N d f
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation_fn {activation!r} is not one diffusers' FeedForward builds "
                         f"({', '.join(ACTIVATIONS)})")
    gated = activation in GATED_ACTIVATIONS
    hidden = FF_MULT * dim
    up = Node("proj", ops.linear(tokens, dim, hidden * (2 if gated else 1)))
    net = Node("net", children=(Node("0", ops.activation(tokens * hidden), (up,)),
                                Node("2", ops.linear(tokens, hidden, dim))))
    return Node(name, children=(net,), formula="feed_forward")


@lru_cache(maxsize=256)
def ltx_video_block(*, dim: int, heads: int, head_dim: int, tokens: Any, text_tokens: Any, cross_attention_dim: int,
                    activation: str = "gelu-approximate", attention_bias: bool = True, attention_out_bias: bool = True,
                    norm_affine: bool = False) -> Node:
    r"""One ``LTXVideoTransformerBlock`` (module names as in diffusers); closed form in the module
    doc: :math:`6 N d^2 + 2 T d_c d + 2 h N (N + T) d_h + (g + 1) N d f`."""
    norm = ops.rms_norm(tokens, dim, affine=norm_affine)
    return Node(
        "block",
        children=(
            Node("norm1", norm),
            ltx_attention("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, bias=attention_bias,
                          out_bias=attention_out_bias),
            Node("norm2", norm),
            ltx_attention("attn2", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, context_tokens=text_tokens,
                          context_dim=cross_attention_dim, bias=attention_bias, out_bias=attention_out_bias),
            ltx_feed_forward("ff", tokens, dim, activation),
            Node("scale_shift_table", ops.parameters(6 * dim)),
        ),
        formula="ltx_video_block",
    )


def combined_timestep_embedding(name: str, dim: int) -> Node:
    r"""``PixArtAlphaCombinedTimestepSizeEmbeddings(dim, 0)`` without additional conditions: the
    sinusoidal ``time_proj`` (256 channels, no matmul) and ``timestep_embedder`` (256 → d → d) on
    one timestep: :math:`\mathrm{MACs} = 256 d + d^2`."""
    return Node(name, children=(mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim),),
                formula="timestep_embedding")


# --------------------------------------------------------------------------- VAE

#: Geometry of a video tensor: (frames, height, width).
Geometry = tuple[Any, Any, Any]


def causal_conv3d(name: str, c_in: int, c_out: int, kernel: int, out: Geometry) -> Node:
    r"""``LTXVideoCausalConv3d(c_in, c_out, kernel)`` producing ``out`` = (t, h, w): the wrapped
    ``nn.Conv3d`` (``.conv``, cubic kernel, bias), :math:`\mathrm{MACs} = t h w\,C_o C_i k^3`."""
    t, h, w = out
    return Node(name, children=(Node("conv", ops.conv(c_in, c_out, kernel ** 3, t * h * w)),), formula="causal_conv3d")


def _positions(g: Geometry) -> Any:
    return g[0] * g[1] * g[2]


def _norm_act(name: str, channels: int, positions: Any) -> Node:
    """diffusers ``RMSNorm`` without affine, then the block's SiLU (no module of its own here)."""
    return Node(name, ops.rms_norm(positions, channels, affine=False) + ops.activation(channels * positions))


@lru_cache(maxsize=4096)
def ltx_resnet_block(c_in: int, c_out: int, g: Geometry, *, inject_noise: bool = False,
                     timestep_conditioning: bool = False) -> Node:
    r"""``LTXVideoResnetBlock3d(c_in, c_out)`` on ``g`` = (t, h, w): ``norm1`` + SiLU, ``conv1``
    (3³, c_in → c_out), ``norm2`` + SiLU, ``conv2`` (3³), and when ``c_in != c_out`` ``norm3``
    (``nn.LayerNorm(c_in)``, affine) and ``conv_shortcut`` (1³). ``inject_noise`` adds
    ``per_channel_scale1``/``per_channel_scale2`` (c_in parameters each), ``timestep_conditioning``
    a ``scale_shift_table`` (4·c_in): no counted work.

    .. math:: \mathrm{MACs} = P\,(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o]\,C_o C_i),\quad P = t h w
    """
    pos = _positions(g)
    children = [
        _norm_act("norm1", c_in, pos),
        causal_conv3d("conv1", c_in, c_out, 3, g),
        _norm_act("norm2", c_out, pos),
        causal_conv3d("conv2", c_out, c_out, 3, g),
    ]
    if c_in != c_out:
        children += [Node("norm3", ops.layer_norm(pos, c_in)), causal_conv3d("conv_shortcut", c_in, c_out, 1, g)]
    if inject_noise:
        children += [Node("per_channel_scale1", ops.parameters(c_in)), Node("per_channel_scale2", ops.parameters(c_in))]
    if timestep_conditioning:
        children.append(Node("scale_shift_table", ops.parameters(4 * c_in)))
    return Node("resnet", children=tuple(children), formula="ltx_resnet_block")


def halve_frames(t: Any) -> Any:
    r"""Frames after a causal stride-2 convolution with kernel 3 and the 2 padded frames:
    :math:`\lfloor (t - 1)/2 \rfloor + 1` (symbolic: :math:`(t-1)/2 + 1`, exact for the
    :math:`8k + 1` frame counts the pipeline takes)."""
    return (t - 1) // 2 + 1 if isinstance(t, int) else (t - 1) / 2 + 1


def halve_side(x: Any) -> Any:
    r"""A side after a stride-2, padding-1, kernel-3 convolution: :math:`\lfloor (x-1)/2 \rfloor + 1`
    (symbolic: :math:`x/2`, exact for the even sides the pipeline's sizes give)."""
    return (x - 1) // 2 + 1 if isinstance(x, int) else x / 2


def strided_downsampler(c: int, g: Geometry) -> tuple[Node, Geometry]:
    r"""``LTXVideoCausalConv3d(c, c, 3, stride=(2, 2, 2))`` (the ``"conv"`` downsampler): its node
    and the geometry after it, :math:`(\lfloor (t-1)/2 \rfloor + 1, \lfloor (h-1)/2 \rfloor + 1, \dots)`;
    :math:`\mathrm{MACs} = 27\,t' h' w'\,C^2`."""
    out = (halve_frames(g[0]), halve_side(g[1]), halve_side(g[2]))
    conv = causal_conv3d("0", c, c, 3, out)
    return Node("0", children=conv.children, formula="ltx_downsampler"), out


def space_to_depth_downsampler(c_in: int, c_out: int, stride: Sequence[int], g: Geometry) -> tuple[Node, Geometry]:
    r"""``LTXVideoDownsampler3d(c_in, c_out, stride)``: ``s_t − 1`` frames prepended, a 3³
    convolution to :math:`C_o / (s_t s_h s_w)` channels over :math:`(t + s_t - 1) h w` positions, then
    space-time folded into channels (plus a channel-mean residual: no MACs);
    returns the node and :math:`((t + s_t - 1)/s_t, h/s_h, w/s_w)`."""
    st, sh, sw = stride
    padded = (g[0] + st - 1, g[1], g[2])
    conv = causal_conv3d("conv", c_in, c_out // (st * sh * sw), 3, padded)
    out = (ops.exact_div(padded[0], st), ops.exact_div(g[1], sh), ops.exact_div(g[2], sw))
    return Node("0", children=(conv,), formula="ltx_downsampler"), out


def upsampler(c_in: int, g: Geometry, *, stride: Sequence[int] = (2, 2, 2), upscale_factor: int = 1
              ) -> tuple[Node, Geometry]:
    r"""``LTXVideoUpsampler3d(c_in, stride, upscale_factor=u)``: a 3³ convolution to
    :math:`C_i s_t s_h s_w / u` channels at the input size, unfolded into
    :math:`(s_t t - s_t + 1) \times s_h h \times s_w w` (the residual path, with
    ``upsample_residual``, only rearranges): :math:`\mathrm{MACs} = 27\,t h w\,C_i^2 s_t s_h s_w / u`."""
    st, sh, sw = stride
    conv = causal_conv3d("conv", c_in, (c_in * st * sh * sw) // upscale_factor, 3, g)
    out = (st * g[0] - (st - 1), sh * g[1], sw * g[2])
    return Node("0", children=(conv,), formula="ltx_upsampler"), out


def ltx_mid_block(channels: int, num_layers: int, g: Geometry, *, inject_noise: bool = False,
                  timestep_conditioning: bool = False) -> Node:
    """``LTXVideoMidBlock3d(c, num_layers)``: with ``timestep_conditioning`` a ``time_embedder``
    (E = 4c), then ``num_layers`` residual blocks at width c."""
    res = ltx_resnet_block(channels, channels, g, inject_noise=inject_noise,
                           timestep_conditioning=timestep_conditioning)
    children = [module_list("resnets", [res] * num_layers)]
    if timestep_conditioning:
        children.insert(0, combined_timestep_embedding("time_embedder", 4 * channels))
    return Node("mid_block", children=tuple(children), formula="ltx_mid_block")


def ltx_up_block(c_in: int, c_out: int, num_layers: int, g: Geometry, *, spatio_temporal_scale: bool,
                 inject_noise: bool = False, timestep_conditioning: bool = False, upscale_factor: int = 1
                 ) -> tuple[Node, Geometry]:
    """``LTXVideoUpBlock3d(c_in, c_out, num_layers)``: ``conv_in`` residual block (c_in → c_out)
    when the widths differ, ``time_embedder`` (E = 4·c_in) with ``timestep_conditioning``, an
    upsampler (on ``c_out · upscale_factor`` channels) when ``spatio_temporal_scale``, then
    ``num_layers`` residual blocks at c_out; returns the node and the geometry after it."""
    kw = {"inject_noise": inject_noise, "timestep_conditioning": timestep_conditioning}
    children = []
    if c_in != c_out:
        children.append(Node("conv_in", children=ltx_resnet_block(c_in, c_out, g, **kw).children,
                             formula="ltx_resnet_block"))
    if timestep_conditioning:
        children.append(combined_timestep_embedding("time_embedder", 4 * c_in))
    if spatio_temporal_scale:
        node, g = upsampler(c_out * upscale_factor, g, upscale_factor=upscale_factor)
        children.append(Node("upsamplers", children=(node,)))
    res = ltx_resnet_block(c_out, c_out, g, **kw)
    children.append(module_list("resnets", [res] * num_layers))
    return Node("up_block", children=tuple(children), formula="ltx_up_block"), g


def ltx_down_block(c_in: int, c_out: int, num_layers: int, g: Geometry, *, spatio_temporal_scale: bool,
                   block_type: str = "LTXVideoDownBlock3D", downsample_type: str = "conv"
                   ) -> tuple[Node, Geometry]:
    """``LTXVideoDownBlock3D(c_in, c_out, num_layers)``: ``num_layers`` residual blocks at c_in, the
    stride-2 convolution (c_in → c_in) when ``spatio_temporal_scale``, and a ``conv_out`` residual
    block (c_in → c_out) when the widths differ. ``LTXVideo095DownBlock3D``: the residual blocks,
    then the ``downsample_type`` downsampler (``conv``: the stride-2 convolution; ``spatial`` /
    ``temporal`` / ``spatiotemporal``: ``LTXVideoDownsampler3d`` to c_out with stride (1,2,2) /
    (2,1,1) / (2,2,2)) and no ``conv_out``. Returns the node and the geometry after it."""
    res = ltx_resnet_block(c_in, c_in, g)
    children = [module_list("resnets", [res] * num_layers)]
    if spatio_temporal_scale:
        if block_type == "LTXVideoDownBlock3D" or downsample_type == "conv":
            node, g = strided_downsampler(c_in, g)
        else:
            strides = {"spatial": (1, 2, 2), "temporal": (2, 1, 1), "spatiotemporal": (2, 2, 2)}
            if downsample_type not in strides:
                raise ValueError(f"unknown downsample_type {downsample_type!r}")
            node, g = space_to_depth_downsampler(c_in, c_out, strides[downsample_type], g)
        children.append(Node("downsamplers", children=(node,)))
    if block_type == "LTXVideoDownBlock3D" and c_in != c_out:
        children.append(Node("conv_out", children=ltx_resnet_block(c_in, c_out, g).children,
                             formula="ltx_resnet_block"))
    return Node("down_block", children=tuple(children), formula="ltx_down_block"), g


def ltx_decoder(*, latent_channels: int, out_channels: int, block_out_channels: Sequence[int],
                spatio_temporal_scaling: Sequence[bool], layers_per_block: Sequence[int], patch_size: int,
                inject_noise: Sequence[bool], upsample_factor: Sequence[int], timestep_conditioning: bool,
                g: Geometry) -> Node:
    r"""``LTXVideoDecoder3d`` on a latent of geometry ``g``; arguments in config order (the
    decoder reverses them): ``conv_in`` (latent → c₀), ``mid_block`` (``layers_per_block[0]``
    residual blocks at c₀), one up block per width, ``norm_out`` (RMS, no affine) + SiLU,
    ``conv_out`` (→ out_channels · p²), unpatchified to pixels. With ``timestep_conditioning`` a
    final ``time_embedder`` (E = 2·c_last), ``scale_shift_table`` (2·c_last) and the scalar
    ``timestep_scale_multiplier``.

    Up block i takes ``c_prev // u_i`` → ``boc_i // u_i`` (``u`` = ``upsample_factor``). Latent
    ``t × h × w`` → :math:`(8(t-1)+1) \times 8h \times 8w` with three scaling blocks."""
    boc = list(block_out_channels)[::-1]
    scaling = list(spatio_temporal_scaling)[::-1]
    layers = list(layers_per_block)[::-1]
    noise = list(inject_noise)[::-1]
    factor = list(upsample_factor)[::-1]
    c = boc[0]
    children = [
        causal_conv3d("conv_in", latent_channels, c, 3, g),
        ltx_mid_block(c, layers[0], g, inject_noise=noise[0], timestep_conditioning=timestep_conditioning),
    ]
    ups = []
    for i in range(len(boc)):
        c_in, c = c // factor[i], boc[i] // factor[i]
        node, g = ltx_up_block(c_in, c, layers[i + 1], g, spatio_temporal_scale=scaling[i],
                               inject_noise=noise[i + 1], timestep_conditioning=timestep_conditioning,
                               upscale_factor=factor[i])
        ups.append(node)
    pos = _positions(g)
    children += [
        module_list("up_blocks", ups),
        _norm_act("norm_out", c, pos),
        causal_conv3d("conv_out", c, out_channels * patch_size ** 2, 3, g),
    ]
    if timestep_conditioning:
        children += [
            combined_timestep_embedding("time_embedder", 2 * c),
            Node("scale_shift_table", ops.parameters(2 * c)),
            Node("timestep_scale_multiplier", ops.parameters(1)),
        ]
    return Node("decoder", children=tuple(children), formula="ltx_decoder")


def ltx_encoder(*, in_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                down_block_types: Sequence[str], spatio_temporal_scaling: Sequence[bool],
                layers_per_block: Sequence[int], downsample_type: Sequence[str], patch_size: int,
                patch_size_t: int, g: Geometry) -> Node:
    r"""``LTXVideoEncoder3d`` on a video of geometry ``g`` = (frames, height, width): patchify to
    ``(t/p_t, h/p, w/p)``, ``conv_in`` (in_channels · p² → c₀), the down blocks
    (``len(block_out_channels)``, one fewer for 0.9.5 encoders whose last block type is
    ``LTXVideo095DownBlock3D``), ``mid_block`` (``layers_per_block[-1]`` residual blocks),
    ``norm_out`` (RMS, no affine) + SiLU, ``conv_out`` (→ latent_channels + 1).

    The card's encoder: :math:`F` frames of :math:`H \times W` → :math:`(F-1)/8 + 1` latent frames
    of :math:`H/32 \times W/32`."""
    boc = list(block_out_channels)
    g = (ops.exact_div(g[0], patch_size_t), ops.exact_div(g[1], patch_size), ops.exact_div(g[2], patch_size))
    c = boc[0]
    children = [causal_conv3d("conv_in", in_channels * patch_size ** 2, c, 3, g)]
    is_095 = down_block_types[-1] == "LTXVideo095DownBlock3D"
    count = len(boc) - (1 if is_095 else 0)
    downs = []
    for i in range(count):
        if down_block_types[i] not in ("LTXVideoDownBlock3D", "LTXVideo095DownBlock3D"):
            raise ValueError(f"unknown down block type {down_block_types[i]!r}")
        c_in, c = c, (boc[i + 1] if (is_095 or i + 1 < count) else boc[i])
        node, g = ltx_down_block(c_in, c, layers_per_block[i], g, spatio_temporal_scale=bool(spatio_temporal_scaling[i]),
                                 block_type=down_block_types[i], downsample_type=downsample_type[i])
        downs.append(node)
    pos = _positions(g)
    children += [
        module_list("down_blocks", downs),
        ltx_mid_block(c, layers_per_block[-1], g),
        _norm_act("norm_out", c, pos),
        causal_conv3d("conv_out", c, latent_channels + 1, 3, g),
    ]
    return Node("encoder", children=tuple(children), formula="ltx_encoder")

