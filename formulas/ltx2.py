r"""LTX-2 block formulas: the audio-video transformer ``LTX2VideoTransformer3DModel`` (diffusers
``models/transformers/transformer_ltx2.py``), its text connectors ``LTX2TextConnectors``
(``pipelines/ltx2/connectors.py``), the video VAE ``AutoencoderKLLTX2Video``
(``models/autoencoders/autoencoder_kl_ltx2.py``), the audio VAE ``AutoencoderKLLTX2Audio``
(``models/autoencoders/autoencoder_kl_ltx2_audio.py``) and the vocoder ``LTX2Vocoder``
(``pipelines/ltx2/vocoder.py``).

**Attention** (``LTX2Attention`` with ``LTX2AudioVideoAttnProcessor``, transformer_ltx2.py:140-220, 317-389):
queries from :math:`n` vectors of width :math:`d_q`, keys and values from :math:`m` vectors of width
:math:`d_c` (the queries themselves for self-attention), :math:`h` heads of :math:`d_h`
(:math:`d_i = h d_h`); ``norm_q`` / ``norm_k`` are ``torch.nn.RMSNorm(d_i)`` across heads (affine by default,
no thop rule); rotary tables are applied elementwise (``apply_split_rotary_emb``'s ``addcmul_``: no matmul);
``to_gate_logits`` (``d_q → h``, with bias) when the attention is gated:

.. math:: \mathrm{MACs} = n d_q d_i + 2 m d_c d_i + 2 h n m d_h + n d_i d_q\;[+\,n d_q h]

With the perturbed processor (``perturbed_attn``) a spatio-temporal-guidance block of the STG pass skips the
attention (``all_perturbed``: ``hidden_states = value``, transformer_ltx2.py:262-266): only ``to_v`` and
``to_out`` run, :math:`2 n d d_i`.

**Transformer block** (``LTX2VideoTransformerBlock``, :392-748), :math:`N` video tokens of width :math:`d`,
:math:`A` audio tokens of width :math:`d_a`, :math:`T` prompt tokens (each stream its own, of widths
:math:`c` and :math:`c_a`): video and audio self-attention (``attn1``, ``audio_attn1``), prompt
cross-attention (``attn2``, ``audio_attn2``), audio-to-video (``audio_to_video_attn``: q video, k/v audio) and
video-to-audio (``video_to_audio_attn``: q audio, k/v video) cross-attention, both at the audio heads'
width :math:`d_{ia} = h_a d_{ha}`, and the feed-forwards (``ff``, ``audio_ff``: ``FeedForward``, 4× width):

.. math::

   \mathrm{MACs} = \underbrace{4 N d^2 + 2 h N^2 d_h}_{\text{attn1}}
   + \underbrace{4 A d_a^2 + 2 h_a A^2 d_{ha}}_{\text{audio\_attn1}}
   + \underbrace{2 N d^2 + 2 T c d + 2 h N T d_h}_{\text{attn2}}
   + \underbrace{2 A d_a^2 + 2 T c_a d_a + 2 h_a A T d_{ha}}_{\text{audio\_attn2}}
   + \underbrace{2 N d d_{ia} + 2 A d_a d_{ia} + 2 h_a N A d_{ha}}_{\text{a2v}}
   + \underbrace{2 A d_a d_{ia} + 2 N d d_{ia} + 2 h_a A N d_{ha}}_{\text{v2a}}
   + \underbrace{(g+1)(4 N d^2 + 4 A d_a^2)}_{\text{ff, audio\_ff}}

The modality-isolation pass (``isolate_modalities``) skips the a2v / v2a attentions and their norms (:648).
The norms (``RMSNorm`` of diffusers, no affine by default) and the modulations (``scale_shift_table`` s) are
elementwise.

**Connectors** (``LTX2ConnectorTransformer1d``, connectors.py:228-330): a 1-D transformer over the :math:`T`
prompt tokens (padding replaced by ``learnable_registers``: a gather, no matmul), each block
``norm1`` → ``attn1`` (rotary, ungated by default) → ``norm2`` → ``ff``, then ``norm_out``:
:math:`\mathrm{MACs} = L\,(4 T d^2 + 2 h T^2 d_h + (g + 1)\,4 T d^2)`.

**Video VAE** (``AutoencoderKLLTX2Video``): as LTX-Video's (``formulas/ltx.py``), every convolution a
``LTX2VideoCausalConv3d`` wrapping an ``nn.Conv3d`` (``.conv``; reflect or zero spatial padding, causal or
symmetric frame padding: the same output size either way); residual blocks normalise with a parameter-free
``PerChannelRMSNorm`` and, where the widths differ, ``norm3`` (``nn.LayerNorm``, affine) and a plain
``nn.Conv3d`` 1×1×1 ``conv_shortcut``:

.. math:: \mathrm{MACs} = P\,(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o]\,C_o C_i),\quad P = t h w

**Audio VAE** (``AutoencoderKLLTX2Audio``): a 2-D VAE over (time, mel bins); every 3×3 convolution a
``LTX2AudioCausalConv2d`` wrapping an ``nn.Conv2d`` (causal padding along time: the output keeps the input
size), ``LTX2AudioPixelNorm`` (parameter-free RMS over channels), residual blocks as the LDM ones
(``nin_shortcut``, a 1×1 causal convolution, where the widths differ), ``LTX2AudioUpsample``: nearest ×2, a 3×3
causal convolution at the doubled size, then the first time row dropped; ``LTX2AudioDownsample``: zero padding
and a stride-2 3×3 ``nn.Conv2d``.

**Vocoder** (``LTX2Vocoder``, HiFi-GAN style): ``conv_in`` (``nn.Conv1d`` k 7) over the :math:`T` mel frames
(channels × mel bins folded), per upsampling stage a ``ConvTranspose1d`` (stride :math:`s`, kernel :math:`k`,
padding :math:`(k-s)/2`) then ``len(resnet_kernel_sizes)`` ``ResBlock`` s averaged, each pairs of dilated and
plain ``nn.Conv1d`` (``padding='same'``), then ``conv_out`` (k 7). A transposed convolution costs
:math:`T_\text{in}\,C_i C_o k` MACs for torch (FlopCounterMode counts over the input positions) and
:math:`T_\text{out}\,C_i C_o k` for thop (its ``count_convNd`` counts over the output).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from flopcalc.engine.cost import WEIGHT_FIELDS, Cost, Node, block_kinds, module_list
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.ltx import (
    GATED_ACTIVATIONS, TIMESTEP_CHANNELS, causal_conv3d, combined_timestep_embedding, halve_frames, halve_side,
    space_to_depth_downsampler, upsampler,
)
from flopcalc.formulas.transformer_parts import feed_forward

#: Block kinds this module builds: a per-block summary stops at them.
BLOCK_KINDS = block_kinds(
    "ltx2_av_block", "ltx2_attention", "ltx2_connector_block", "ltx2_resnet_block", "ltx2_audio_resnet_block",
    "ltx2_vocoder_resblock",
)

#: ``FeedForward``'s default ``mult``.
FF_MULT = 4


def weights_only(node: Node) -> Node:
    """A module that is built but not called: its parameters, no work."""
    cost = Cost(**{f: getattr(node.cost, f) for f in WEIGHT_FIELDS})
    return replace(node, cost=cost, children=tuple(weights_only(c) for c in node.children))


# --------------------------------------------------------------------------- attention and blocks


def ltx2_attention(name: str, *, tokens: Any, dim: int, heads: int, head_dim: int, context_tokens: Any = None,
                   context_dim: int | None = None, bias: bool = True, out_bias: bool = True, gated: bool = False,
                   norm_affine: bool = True, identity: bool = False) -> Node:
    r"""``LTX2Attention`` (transformer_ltx2.py:317): ``to_q`` (d → h·d_h) on the ``tokens`` queries,
    ``to_k``/``to_v`` (d_c → h·d_h) on the keys (the queries for self-attention), ``norm_q``/``norm_k``
    (``nn.RMSNorm(h·d_h)``), scaled dot-product attention, ``to_out.0`` (h·d_h → d), and with ``gated`` a
    ``to_gate_logits`` (d → h, bias) on the queries' input (:178, :212-217).

    .. math:: \mathrm{MACs} = n d d_i + 2 m d_c d_i + 2 h n m d_h + n d_i d\;[+\,n d h]

    ``identity``: the perturbed processor of an STG block with every row perturbed (:262-266): only ``to_v``
    and ``to_out`` run (and the gate); the other modules keep their parameters."""
    inner = heads * head_dim
    kv_tokens = tokens if context_tokens is None else context_tokens
    kv_dim = dim if context_dim is None else context_dim
    run_qk = 0 if identity else 1
    cost = (ops.rms_norm(tokens * run_qk, inner, affine=norm_affine)
            + ops.rms_norm(kv_tokens * run_qk, inner, affine=norm_affine))
    if not identity:
        cost = cost + ops.attention(tokens, kv_tokens, heads, head_dim)
    children = [
        Node("to_q", ops.linear(tokens * run_qk, dim, inner, bias=bias)),
        Node("to_k", ops.linear(kv_tokens * run_qk, kv_dim, inner, bias=bias)),
        Node("to_v", ops.linear(kv_tokens, kv_dim, inner, bias=bias)),
        Node("to_out", children=(Node("0", ops.linear(tokens, inner, dim, bias=out_bias)),)),
    ]
    if gated:
        children.append(Node("to_gate_logits", ops.linear(tokens, dim, heads) + ops.activation(tokens * heads)))
    return Node(name, cost, tuple(children), formula="identity_attention" if identity else "ltx2_attention")


def ltx2_feed_forward(name: str, tokens: Any, dim: int, activation: str, *, bias: bool = True) -> Node:
    """diffusers ``FeedForward(dim, activation_fn=activation, bias=bias)``: ``net.0.proj`` (d → 4d, or d → 8d
    for the gated activations), the activation, ``net.2`` (4d → d)."""
    return feed_forward(name, tokens, dim, mult=FF_MULT, gated=activation in GATED_ACTIVATIONS, bias=bias)


@lru_cache(maxsize=512)
def ltx2_av_block(*, dim: int, heads: int, head_dim: int, audio_dim: int, audio_heads: int, audio_head_dim: int,
                  cross_attention_dim: int, audio_cross_attention_dim: int, tokens: Any, audio_tokens: Any,
                  text_tokens: Any, activation: str = "gelu-approximate", attention_bias: bool = True,
                  attention_out_bias: bool = True, norm_affine: bool = False, video_gated: bool = False,
                  audio_gated: bool = False, video_cross_mod: bool = False, audio_cross_mod: bool = False,
                  ff_bias: bool = True, audio_ff_bias: bool = True, identity_self_attention: bool = False,
                  isolate_modalities: bool = False) -> Node:
    r"""One ``LTX2VideoTransformerBlock`` (module names as in diffusers); closed form in the module doc.
    ``identity_self_attention``: an STG block of the STG pass with the perturbed processor (``attn1`` and
    ``audio_attn1`` run ``to_v`` and ``to_out`` only); ``isolate_modalities``: the modality-isolation pass
    (no a2v / v2a attention, no ``audio_to_video_norm`` / ``video_to_audio_norm``)."""
    n, a, t = tokens, audio_tokens, text_tokens
    common = {"bias": attention_bias, "out_bias": attention_out_bias}
    cross_tokens = 0 if isolate_modalities else 1
    children = [
        Node("norm1", ops.rms_norm(n, dim, affine=norm_affine)),
        ltx2_attention("attn1", tokens=n, dim=dim, heads=heads, head_dim=head_dim, gated=video_gated,
                       identity=identity_self_attention, **common),
        Node("audio_norm1", ops.rms_norm(a, audio_dim, affine=norm_affine)),
        ltx2_attention("audio_attn1", tokens=a, dim=audio_dim, heads=audio_heads, head_dim=audio_head_dim,
                       gated=audio_gated, identity=identity_self_attention, **common),
        Node("norm2", ops.rms_norm(n, dim, affine=norm_affine)),
        ltx2_attention("attn2", tokens=n, dim=dim, heads=heads, head_dim=head_dim, context_tokens=t,
                       context_dim=cross_attention_dim, gated=video_gated, **common),
        Node("audio_norm2", ops.rms_norm(a, audio_dim, affine=norm_affine)),
        ltx2_attention("audio_attn2", tokens=a, dim=audio_dim, heads=audio_heads, head_dim=audio_head_dim,
                       context_tokens=t, context_dim=audio_cross_attention_dim, gated=audio_gated, **common),
        Node("audio_to_video_norm", ops.rms_norm(n * cross_tokens, dim, affine=norm_affine)),
        ltx2_attention("audio_to_video_attn", tokens=n * cross_tokens, dim=dim, heads=audio_heads,
                       head_dim=audio_head_dim, context_tokens=a * cross_tokens, context_dim=audio_dim,
                       gated=video_gated, **common),
        Node("video_to_audio_norm", ops.rms_norm(a * cross_tokens, audio_dim, affine=norm_affine)),
        ltx2_attention("video_to_audio_attn", tokens=a * cross_tokens, dim=audio_dim, heads=audio_heads,
                       head_dim=audio_head_dim, context_tokens=n * cross_tokens, context_dim=dim,
                       gated=audio_gated, **common),
        Node("norm3", ops.rms_norm(n, dim, affine=norm_affine)),
        ltx2_feed_forward("ff", n, dim, activation, bias=ff_bias),
        Node("audio_norm3", ops.rms_norm(a, audio_dim, affine=norm_affine)),
        ltx2_feed_forward("audio_ff", a, audio_dim, activation, bias=audio_ff_bias),
        # 6 modulation rows (9 with the cross-attention AdaLN) per stream, :535-539
        Node("scale_shift_table", ops.parameters((9 if video_cross_mod else 6) * dim)),
        Node("audio_scale_shift_table", ops.parameters((9 if audio_cross_mod else 6) * audio_dim)),
    ]
    if video_cross_mod or audio_cross_mod:  # :542-545
        children += [Node("prompt_scale_shift_table", ops.parameters(2 * dim)),
                     Node("audio_prompt_scale_shift_table", ops.parameters(2 * audio_dim))]
    children += [Node("video_a2v_cross_attn_scale_shift_table", ops.parameters(5 * dim)),
                 Node("audio_a2v_cross_attn_scale_shift_table", ops.parameters(5 * audio_dim))]
    return Node("block", children=tuple(children), formula="ltx2_av_block")


def ada_layer_norm_single(name: str, dim: int, mod_params: int, steps: Any = 1) -> Node:
    r"""``LTX2AdaLayerNormSingle(dim, num_mod_params=k)`` (transformer_ltx2.py:99) on ``steps`` timesteps:
    ``emb.timestep_embedder`` (sinusoidal 256 → d → d) and ``linear`` (SiLU, d → k·d):
    :math:`\mathrm{MACs} = s\,(256 d + d^2 + k d^2)`."""
    return Node(name, children=(
        Node("emb", children=(mlp_embedder("timestep_embedder", TIMESTEP_CHANNELS, dim, tokens=steps),)),
        Node("linear", ops.activation(steps * dim) + ops.linear(steps, dim, mod_params * dim)),
    ), formula="ada_layer_norm_single")


# --------------------------------------------------------------------------- connectors


@lru_cache(maxsize=256)
def connector_block(*, tokens: Any, dim: int, heads: int, head_dim: int, gated: bool = False) -> Node:
    r"""``LTX2TransformerBlock1d`` (connectors.py:175): ``norm1`` (``nn.RMSNorm``, no affine), ``attn1``
    (``LTX2Attention`` with its defaults: biases, affine q/k norms), ``norm2``, ``ff`` (``FeedForward``, tanh
    GELU, 4× width): :math:`4 T d^2 + 2 h T^2 d_h + 8 T d^2`."""
    return Node("block", children=(
        Node("norm1", ops.rms_norm(tokens, dim, affine=False)),
        ltx2_attention("attn1", tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, gated=gated),
        Node("norm2", ops.rms_norm(tokens, dim, affine=False)),
        ltx2_feed_forward("ff", tokens, dim, "gelu-approximate"),
    ), formula="ltx2_connector_block")


def connector_transformer(name: str, *, tokens: Any, heads: int, head_dim: int, layers: int,
                          registers: int | None, gated: bool = False) -> Node:
    """``LTX2ConnectorTransformer1d`` (connectors.py:212): ``learnable_registers`` (registers × d) replacing
    the padding, ``layers`` connector blocks, ``norm_out`` (``nn.RMSNorm``, no affine)."""
    dim = heads * head_dim
    block = connector_block(tokens=tokens, dim=dim, heads=heads, head_dim=head_dim, gated=gated)
    children = []
    if registers is not None:
        children.append(Node("learnable_registers", ops.parameters(registers * dim)))
    children += [module_list("transformer_blocks", [block] * layers),
                 Node("norm_out", ops.rms_norm(tokens, dim, affine=False))]
    return Node(name, children=tuple(children), formula="ltx2_connector")


# --------------------------------------------------------------------------- video VAE

Geometry = tuple[Any, Any, Any]


def _positions(g: Geometry) -> Any:
    return g[0] * g[1] * g[2]


def _norm_act(name: str, channels: int, positions: Any) -> Node:
    """``PerChannelRMSNorm`` (no parameters), then the block's SiLU."""
    return Node(name, ops.rms_norm(positions, channels, affine=False) + ops.activation(channels * positions))


@lru_cache(maxsize=4096)
def ltx2_resnet_block(c_in: int, c_out: int, g: Geometry, *, inject_noise: bool = False,
                      timestep_conditioning: bool = False) -> Node:
    r"""``LTX2VideoResnetBlock3d(c_in, c_out)`` (autoencoder_kl_ltx2.py:110) on ``g`` = (t, h, w): ``norm1``
    (``PerChannelRMSNorm``) + SiLU, ``conv1`` (3³), ``norm2`` + SiLU, ``conv2`` (3³), and when the widths
    differ ``norm3`` (``nn.LayerNorm(c_in)``, affine) and ``conv_shortcut`` (a plain ``nn.Conv3d``, 1³);
    ``per_channel_scale1/2`` (c_in each) with ``inject_noise``, ``scale_shift_table`` (4·c_in) with
    ``timestep_conditioning``.

    .. math:: \mathrm{MACs} = P\,(27 C_o C_i + 27 C_o^2 + [C_i \ne C_o]\,C_o C_i)
    """
    pos = _positions(g)
    children = [
        _norm_act("norm1", c_in, pos),
        causal_conv3d("conv1", c_in, c_out, 3, g),
        _norm_act("norm2", c_out, pos),
        causal_conv3d("conv2", c_out, c_out, 3, g),
    ]
    if c_in != c_out:
        children += [Node("norm3", ops.layer_norm(pos, c_in)), Node("conv_shortcut", ops.conv(c_in, c_out, 1, pos))]
    if inject_noise:
        children += [Node("per_channel_scale1", ops.parameters(c_in)), Node("per_channel_scale2", ops.parameters(c_in))]
    if timestep_conditioning:
        children.append(Node("scale_shift_table", ops.parameters(4 * c_in)))
    return Node("resnet", children=tuple(children), formula="ltx2_resnet_block")


DOWNSAMPLE_STRIDES = {"spatial": (1, 2, 2), "temporal": (2, 1, 1), "spatiotemporal": (2, 2, 2)}
UPSAMPLE_STRIDES = DOWNSAMPLE_STRIDES


def ltx2_down_block(c_in: int, c_out: int, num_layers: int, g: Geometry, *, spatio_temporal_scale: bool,
                    downsample_type: str) -> tuple[Node, Geometry]:
    """``LTX2VideoDownBlock3D(c_in, c_out)`` (:371): ``num_layers`` residual blocks at c_in, then with
    ``spatio_temporal_scale`` the downsampler: ``conv`` a stride-2 causal convolution (c_in → c_in), else
    ``LTX2VideoDownsampler3d`` to c_out with the ``spatial`` / ``temporal`` / ``spatiotemporal`` stride."""
    res = ltx2_resnet_block(c_in, c_in, g)
    children = [module_list("resnets", [res] * num_layers)]
    if spatio_temporal_scale:
        if downsample_type == "conv":
            out = (halve_frames(g[0]), halve_side(g[1]), halve_side(g[2]))
            node, g = Node("0", children=causal_conv3d("0", c_in, c_in, 3, out).children,
                           formula="ltx_downsampler"), out
        elif downsample_type in DOWNSAMPLE_STRIDES:
            node, g = space_to_depth_downsampler(c_in, c_out, DOWNSAMPLE_STRIDES[downsample_type], g)
        else:
            raise ValueError(f"unknown downsample_type {downsample_type!r}")
        children.append(Node("downsamplers", children=(node,)))
    return Node("down_block", children=tuple(children), formula="ltx_down_block"), g


def ltx2_encoder(*, in_channels: int, latent_channels: int, block_out_channels: Sequence[int],
                 spatio_temporal_scaling: Sequence[bool], layers_per_block: Sequence[int],
                 downsample_type: Sequence[str], patch_size: int, patch_size_t: int, g: Geometry) -> Node:
    r"""``LTX2VideoEncoder3d`` (:689) on a video of geometry ``g``: patchify to ``(t/p_t, h/p, w/p)``,
    ``conv_in`` (in_channels · p² → latent_channels), one down block per width (the first from
    latent_channels), ``mid_block`` (``layers_per_block[-1]`` residual blocks), ``norm_out`` + SiLU,
    ``conv_out`` (→ latent_channels + 1). The card: :math:`F` frames of :math:`H \times W` →
    :math:`(F-1)/8 + 1` latent frames of :math:`H/32 \times W/32`."""
    g = (ops.exact_div(g[0], patch_size_t), ops.exact_div(g[1], patch_size), ops.exact_div(g[2], patch_size))
    c = latent_channels
    children = [causal_conv3d("conv_in", in_channels * patch_size ** 2, c, 3, g)]
    downs = []
    for i, width in enumerate(block_out_channels):
        scale = bool(spatio_temporal_scaling[i])
        if (not scale or downsample_type[i] == "conv") and c != width:
            # the block keeps its input width (no space-to-depth downsampler), but the next one is built for
            # ``width``: the real encoder fails there
            raise ValueError(f"encoder block {i} keeps {c} channels (downsample {downsample_type[i]!r}, "
                             f"spatio_temporal_scaling {scale}) but block_out_channels[{i}] is {width}")
        node, g = ltx2_down_block(c, width, layers_per_block[i], g, spatio_temporal_scale=scale,
                                  downsample_type=downsample_type[i])
        downs.append(node)
        c = width
    pos = _positions(g)
    children += [
        module_list("down_blocks", downs),
        Node("mid_block", children=(module_list("resnets", [ltx2_resnet_block(c, c, g)] * layers_per_block[-1]),),
             formula="ltx_mid_block"),
        _norm_act("norm_out", c, pos),
        causal_conv3d("conv_out", c, latent_channels + 1, 3, g),
    ]
    return Node("encoder", children=tuple(children), formula="ltx2_encoder")


def ltx2_decoder(*, latent_channels: int, out_channels: int, block_out_channels: Sequence[int],
                 spatio_temporal_scaling: Sequence[bool], layers_per_block: Sequence[int],
                 upsample_type: Sequence[str], patch_size: int, inject_noise: Sequence[bool],
                 upsample_factor: Sequence[int], timestep_conditioning: bool, g: Geometry) -> Node:
    r"""``LTX2VideoDecoder3d`` (:847) on a latent of geometry ``g``, arguments in config order (reversed
    inside): ``conv_in`` (latent → c₀), ``mid_block`` (``layers_per_block[0]`` residual blocks at c₀, with
    ``time_embedder`` when ``timestep_conditioning``), one ``LTX2VideoUpBlock3d`` per width — block i takes
    ``c_prev // u_i`` → ``boc_i // u_i``: a ``conv_in`` residual block when those differ, a ``time_embedder``,
    the upsampler on ``(boc_i // u_i) · u_i`` channels with the ``upsample_type`` stride, the residual
    blocks — then ``norm_out`` + SiLU and ``conv_out`` (→ out_channels · p²). The card: latent
    ``t × h × w`` → :math:`(8(t-1)+1) \times 32h \times 32w`."""
    boc = list(block_out_channels)[::-1]
    scaling = list(spatio_temporal_scaling)[::-1]
    layers = list(layers_per_block)[::-1]
    noise = list(inject_noise)[::-1]
    factor = list(upsample_factor)[::-1]
    kinds = list(upsample_type)
    c = boc[0]
    kw = {"timestep_conditioning": timestep_conditioning}
    mid = [module_list("resnets", [ltx2_resnet_block(c, c, g, inject_noise=noise[0], **kw)] * layers[0])]
    if timestep_conditioning:
        mid.insert(0, combined_timestep_embedding("time_embedder", 4 * c))
    children = [causal_conv3d("conv_in", latent_channels, c, 3, g),
                Node("mid_block", children=tuple(mid), formula="ltx_mid_block")]
    ups = []
    for i in range(len(boc)):
        hidden, (c_in, c) = c, (c // factor[i], boc[i] // factor[i])
        # the channels the real up block is built for: conv_in takes c_in, else the upsampler c·factor, else the
        # residual blocks c; conv_in gets the raw timestep and its noise scales have c_in entries for c channels
        expected = c_in if c_in != c else (c * factor[i] if scaling[i] else c)
        if hidden != expected:
            raise ValueError(f"decoder up block {i} is built for {expected} input channels but gets {hidden} "
                             "(decoder_block_out_channels / upsample_factor / decoder_spatio_temporal_scaling)")
        if c_in != c and (timestep_conditioning or noise[i + 1]):
            raise ValueError(f"decoder up block {i} changes width ({c_in} → {c}) with timestep_conditioning or "
                             "inject_noise: its conv_in residual block cannot take the raw timestep / noise")
        block = []
        if c_in != c:
            block.append(Node("conv_in", children=ltx2_resnet_block(c_in, c, g, inject_noise=noise[i + 1], **kw).children,
                              formula="ltx2_resnet_block"))
        if timestep_conditioning:
            block.append(combined_timestep_embedding("time_embedder", 4 * c_in))
        if scaling[i]:
            if kinds[i] not in UPSAMPLE_STRIDES:
                raise ValueError(f"unknown upsample_type {kinds[i]!r}")
            node, g = upsampler(c * factor[i], g, stride=UPSAMPLE_STRIDES[kinds[i]], upscale_factor=factor[i])
            block.append(Node("upsamplers", children=(node,)))
        block.append(module_list("resnets", [ltx2_resnet_block(c, c, g, inject_noise=noise[i + 1], **kw)]
                                 * layers[i + 1]))
        ups.append(Node("up_block", children=tuple(block), formula="ltx_up_block"))
    pos = _positions(g)
    children += [
        module_list("up_blocks", ups),
        _norm_act("norm_out", c, pos),
        causal_conv3d("conv_out", c, out_channels * patch_size ** 2, 3, g),
    ]
    if timestep_conditioning:
        children += [
            Node("timestep_scale_multiplier", ops.parameters(1)),
            combined_timestep_embedding("time_embedder", 2 * c),
            Node("scale_shift_table", ops.parameters(2 * c)),
        ]
    return Node("decoder", children=tuple(children), formula="ltx2_decoder")


# --------------------------------------------------------------------------- audio VAE

#: ``causality_axis`` values ``AutoencoderKLLTX2Audio`` accepts (autoencoder_kl_ltx2_audio.py:686).
CAUSALITY_AXES = ("none", "width", "height", "width-compatibility")
#: ``LTX2AudioDownsample``'s zero padding ``(left, right, top, bottom)`` per axis (:257-266).
DOWNSAMPLE_PADDING = {"none": (0, 1, 0, 1), "width": (2, 0, 0, 1), "height": (0, 1, 2, 0),
                      "width-compatibility": (1, 0, 0, 1)}


def _causal_conv2d(name: str, c_in: int, c_out: int, kernel: int, out_h: Any, out_w: Any) -> Node:
    """``LTX2AudioCausalConv2d(c_in, c_out, kernel)`` (:22): padding by ``kernel − 1`` along each axis
    (all before along the causal one), then the wrapped ``nn.Conv2d`` (``.conv``): the output keeps the input
    size."""
    return Node(name, children=(Node("conv", ops.conv2d(c_in, c_out, kernel, out_h, out_w)),))


def _audio_norm_act(name: str, channels: int, positions: Any, norm_type: str) -> Node:
    """``LTX2AudioPixelNorm`` (no parameters) or ``nn.GroupNorm(32)``, then SiLU."""
    norm = ops.rms_norm(positions, channels, affine=False) if norm_type == "pixel" else ops.group_norm(channels, positions)
    return Node(name, norm + ops.activation(channels * positions))


@lru_cache(maxsize=1024)
def audio_resnet_block(c_in: int, c_out: int, h: Any, w: Any, *, norm_type: str = "pixel") -> Node:
    r"""``LTX2AudioResnetBlock(c_in, c_out)`` (autoencoder_kl_ltx2_audio.py:133) on an ``h × w`` map: ``norm1``
    + SiLU, ``conv1`` (3×3), ``norm2`` + SiLU, ``conv2`` (3×3), and where the widths differ ``nin_shortcut``
    (1×1), every one a causal convolution (``.conv``); no time embedding (``temb_channels`` 0).
    :math:`\mathrm{MACs} = hw\,(9 C_o C_i + 9 C_o^2 + [C_i \ne C_o] C_o C_i)`."""
    pos = h * w
    children = [_audio_norm_act("norm1", c_in, pos, norm_type), _causal_conv2d("conv1", c_in, c_out, 3, h, w),
                _audio_norm_act("norm2", c_out, pos, norm_type), _causal_conv2d("conv2", c_out, c_out, 3, h, w)]
    if c_in != c_out:
        children.append(_causal_conv2d("nin_shortcut", c_in, c_out, 1, h, w))
    return Node("block", children=tuple(children), formula="ltx2_audio_resnet_block")


def audio_attention_block(name: str, channels: int, h: Any, w: Any, norm_type: str) -> Node:
    r"""``LTX2AudioAttnBlock`` (:84): norm, 1×1 ``q``/``k``/``v`` convolutions, single-head attention over the
    ``hw`` positions (two ``torch.bmm``), ``proj_out``: :math:`4 hw C^2 + 2 (hw)^2 C`."""
    pos = h * w
    norm = ops.rms_norm(pos, channels, affine=False) if norm_type == "pixel" else ops.group_norm(channels, pos)
    return Node(name, ops.attention(pos, pos, 1, channels), children=(
        Node("norm", norm), *(Node(p, ops.conv2d(channels, channels, 1, h, w)) for p in ("q", "k", "v", "proj_out"))),
        formula="attention")


def _mid(c: int, h: Any, w: Any, norm_type: str, attention: bool) -> Node:
    """``mid``: ``block_1``, ``attn_1`` (an ``LTX2AudioAttnBlock`` with ``mid_block_add_attention``, else an
    ``nn.Identity``), ``block_2``."""
    block = audio_resnet_block(c, c, h, w, norm_type=norm_type)
    attn = (audio_attention_block("attn_1", c, h, w, norm_type),) if attention else ()
    return Node("mid", children=(replace(block, name="block_1"), *attn, replace(block, name="block_2")))


def audio_decoder(*, latent_channels: int, base_channels: int, ch_mult: Sequence[int], num_res_blocks: int,
                  output_channels: int, norm_type: str, causality_axis: str, attn_resolutions: Sequence[int],
                  resolution: int, mid_attention: bool, frames: Any, mel_bins: Any) -> Node:
    r"""``LTX2AudioDecoder`` (:449) on a latent of ``frames × mel_bins`` (time is the height): ``conv_in``
    (latent → base·mult[-1]), ``mid``, then from the deepest level up ``num_res_blocks + 1`` residual blocks
    (an attention block after each where the level's resolution is in ``attn_resolutions``) and, but at level
    0, ``upsample`` (nearest ×2, a 3×3 causal convolution at the doubled size, then the first row dropped when
    causal along the height, the first column along the width), ``norm_out`` + SiLU, ``conv_out``
    (→ ``output_channels``). The card: ``L × 16`` → ``(4L − 3) × 64``."""
    levels = len(ch_mult)
    c = base_channels * ch_mult[-1]
    h, w = frames, mel_bins
    res = resolution // 2 ** (levels - 1)
    children = [_causal_conv2d("conv_in", latent_channels, c, 3, h, w), _mid(c, h, w, norm_type, mid_attention)]
    stages: list[Node] = []
    for level in reversed(range(levels)):
        out = base_channels * ch_mult[level]
        blocks, attns = [], []
        for _ in range(num_res_blocks + 1):
            blocks.append(audio_resnet_block(c, out, h, w, norm_type=norm_type))
            c = out
            if attn_resolutions and res in attn_resolutions:
                attns.append(audio_attention_block("attn", c, h, w, norm_type))
        stage = [module_list("block", blocks)]
        if attns:
            stage.append(module_list("attn", attns))
        if level != 0:
            stage.append(Node("upsample", children=(_causal_conv2d("conv", c, c, 3, 2 * h, 2 * w),)))
            h = 2 * h - (1 if causality_axis == "height" else 0)
            w = 2 * w - (1 if causality_axis == "width" else 0)
            res *= 2
        stages.insert(0, Node(str(level), children=tuple(stage)))
    pos = h * w
    children += [Node("up", children=tuple(stages)), _audio_norm_act("norm_out", c, pos, norm_type),
                 _causal_conv2d("conv_out", c, output_channels, 3, h, w)]
    return Node("decoder", children=tuple(children), formula="ltx2_audio_decoder")


def audio_encoder(*, in_channels: int, latent_channels: int, base_channels: int, ch_mult: Sequence[int],
                  num_res_blocks: int, norm_type: str, causality_axis: str, attn_resolutions: Sequence[int],
                  resolution: int, mid_attention: bool, double_z: bool, frames: Any, mel_bins: Any) -> Node:
    r"""``LTX2AudioEncoder`` (:296) on a ``frames × mel_bins`` spectrogram: ``conv_in`` (→ base), per level
    ``num_res_blocks`` residual blocks (attention where listed) and, but at the last level, ``downsample``
    (``LTX2AudioDownsample``: the axis's zero padding, then a stride-2 3×3 ``nn.Conv2d``:
    :math:`\lfloor (x + p - 3)/2 \rfloor + 1`), ``mid``, ``norm_out`` + SiLU, ``conv_out`` (→ 2·latent with
    ``double_z``)."""
    levels = len(ch_mult)
    c = base_channels
    h, w = frames, mel_bins
    res = resolution
    left, right, top, bottom = DOWNSAMPLE_PADDING[causality_axis]
    children = [_causal_conv2d("conv_in", in_channels, c, 3, h, w)]
    stages = []
    for level in range(levels):
        out = base_channels * ch_mult[level]
        blocks, attns = [], []
        for _ in range(num_res_blocks):
            blocks.append(audio_resnet_block(c, out, h, w, norm_type=norm_type))
            c = out
            if attn_resolutions and res in attn_resolutions:
                attns.append(audio_attention_block("attn", c, h, w, norm_type))
        stage = [module_list("block", blocks)]
        if attns:
            stage.append(module_list("attn", attns))
        if level != levels - 1:
            h = ops.conv_output_size(h + top + bottom, 3, 2)
            w = ops.conv_output_size(w + left + right, 3, 2)
            stage.append(Node("downsample", children=(Node("conv", ops.conv2d(c, c, 3, h, w)),)))
            res //= 2
        stages.append(Node(str(level), children=tuple(stage)))
    pos = h * w
    children += [
        Node("down", children=tuple(stages)),
        _mid(c, h, w, norm_type, mid_attention),
        _audio_norm_act("norm_out", c, pos, norm_type),
        _causal_conv2d("conv_out", c, 2 * latent_channels if double_z else latent_channels, 3, h, w),
    ]
    return Node("encoder", children=tuple(children), formula="ltx2_audio_encoder")


# --------------------------------------------------------------------------- vocoder


def conv_transpose1d(c_in: int, c_out: int, kernel: int, t_in: Any, t_out: Any) -> Cost:
    r"""``nn.ConvTranspose1d(c_in, c_out, kernel)`` from ``t_in`` to ``t_out`` positions: torch counts
    :math:`t_\text{in} C_i C_o k` (``conv_flop_count`` over the input for a transposed convolution), thop
    :math:`t_\text{out} C_i C_o k` (``count_convNd``: output elements × input channels × kernel); the
    difference goes to ``functional`` / ``thop_extra`` so each convention sees its own count."""
    torch_macs = t_in * c_in * c_out * kernel
    thop_macs = t_out * c_in * c_out * kernel
    params = c_in * c_out * kernel + c_out
    return Cost(functional=torch_macs, thop_extra=thop_macs, params=params, largest_module=params)


@lru_cache(maxsize=256)
def vocoder_resblock(channels: int, kernel: int, dilations: tuple[int, ...], t: Any) -> Node:
    r"""``ResBlock`` (vocoder.py:229) at ``channels`` over ``t`` positions: per dilation a LeakyReLU, the dilated
    ``convs1`` conv, a LeakyReLU, the plain ``convs2`` conv (``nn.Conv1d``, ``padding='same'``):
    :math:`\mathrm{MACs} = 2\,|D|\,t C^2 k`."""
    conv = Node("c", ops.conv(channels, channels, kernel, t))
    convs = [replace(conv, name=str(i)) for i in range(len(dilations))]
    act = ops.activation(channels * t)
    return Node("resblock", act * (2 * len(dilations)), children=(
        module_list("convs1", convs), module_list("convs2", convs)), formula="ltx2_vocoder_resblock")


def vocoder(*, in_channels: int, hidden_channels: int, out_channels: int, upsample_kernel_sizes: Sequence[int],
            upsample_factors: Sequence[int], resnet_kernel_sizes: Sequence[int],
            resnet_dilations: Sequence[Sequence[int]], final_bias: bool, frames: Any) -> Node:
    r"""``LTX2Vocoder`` (vocoder.py:297) with LeakyReLU activations on ``frames`` mel frames: ``conv_in``
    (in → hidden, k 7), per stage i a LeakyReLU, ``upsamplers.i`` (``ConvTranspose1d``, hidden/2^i → hidden/2^(i+1),
    stride s_i, kernel k_i, padding (k_i − s_i)//2: :math:`t \to (t-1)s - 2p + k`), the stage's residual blocks
    (``resnets`` s_i·… in order), ``act_out`` (LeakyReLU), ``conv_out`` (k 7, bias ``final_bias``)."""
    t = frames
    c = hidden_channels
    children = [Node("conv_in", ops.conv(in_channels, c, 7, t))]
    ups, resnets = [], []
    for s, k in zip(upsample_factors, upsample_kernel_sizes):
        out = c // 2
        pad = (k - s) // 2
        t_out = (t - 1) * s - 2 * pad + k
        ups.append(Node(str(len(ups)), conv_transpose1d(c, out, k, t, t_out) + ops.activation(c * t)))
        t, c = t_out, out
        for kernel, dilations in zip(resnet_kernel_sizes, resnet_dilations):
            resnets.append(vocoder_resblock(c, kernel, tuple(dilations), t))
    children += [module_list("upsamplers", ups), module_list("resnets", resnets),
                 Node("act_out", ops.activation(c * t)),
                 Node("conv_out", ops.conv(c, out_channels, 7, t, bias=final_bias))]
    return Node("vocoder", children=tuple(children), formula="ltx2_vocoder")


# --------------------------------------------------------------------------- latent upsampler

#: ``RATIONAL_RESAMPLER_SCALE_MAPPING`` (latent_upsampler.py:23): scale → (numerator, denominator).
RATIONAL_SCALES = {0.75: (3, 4), 1.5: (3, 2), 2.0: (2, 1), 4.0: (4, 1)}
#: ``BlurDownsample``'s default binomial kernel size.
BLUR_KERNEL = 5


def ltx2_latent_upsampler(*, in_channels: int, mid_channels: int, blocks: int, dims: int, spatial: bool,
                          temporal: bool, rational: bool, scale: float, frames: Any, height: Any, width: Any) -> Node:
    r"""``LTX2LatentUpsamplerModel`` (``pipelines/ltx2/latent_upsampler.py``) on one latent: LTX-Video's latent
    upsampler (:func:`flopcalc.formulas.ltx_latent_upsampler.latent_upsampler`), but for a spatial-only upsampler with
    ``use_rational_resampler`` the ``SpatialRationalResampler`` (:116): per frame a 3×3 ``Conv2d`` M → n²M
    (``upsampler.conv``), a pixel shuffle by n, then ``BlurDownsample`` by d (a depthwise 5×5 ``F.conv2d`` of a fixed
    binomial kernel, stride d, padding 2: torch counts it, thop does not; skipped when d = 1), for ``scale`` = n/d:
    the grid becomes :math:`(\lfloor (n h - 1)/d \rfloor + 1) \times (\lfloor (n w - 1)/d \rfloor + 1)`."""
    from flopcalc.formulas.ltx_latent_upsampler import latent_upsampler, res_block

    if not (spatial and rational and not temporal):
        tree = latent_upsampler(in_channels=in_channels, mid_channels=mid_channels, blocks=blocks, dims=dims,
                                spatial=spatial, temporal=temporal, frames=frames, height=height, width=width)
        return replace(tree, formula="ltx2_latent_upsampler")
    num, den = RATIONAL_SCALES[scale]
    kernel = 27 if dims == 3 else 9
    m = mid_channels
    positions = frames * height * width
    up_h, up_w = num * height, num * width
    children = [Node("conv", ops.conv(m, num * num * m, 9, positions))]  # a Conv2d on each frame
    if den > 1:
        up_h = ops.conv_output_size(up_h, BLUR_KERNEL, den, BLUR_KERNEL // 2)
        up_w = ops.conv_output_size(up_w, BLUR_KERNEL, den, BLUR_KERNEL // 2)
        # a depthwise F.conv2d of the fixed kernel (a buffer): m output channels × 1 input channel × 25 per position
        children.append(Node("blur_down", Cost(functional=frames * up_h * up_w * m * BLUR_KERNEL ** 2)))
    out_positions = frames * up_h * up_w
    return Node("latent_upsampler", children=(
        Node("initial_conv", ops.conv(in_channels, m, kernel, positions)),
        Node("initial_norm", ops.group_norm(m, positions)),
        Node("initial_activation", ops.activation(m * positions)),
        module_list("res_blocks", [res_block(m, kernel, positions)] * blocks),
        Node("upsampler", children=tuple(children)),
        module_list("post_upsample_res_blocks", [res_block(m, kernel, out_positions)] * blocks),
        Node("final_conv", ops.conv(m, in_channels, kernel, out_positions)),
    ), formula="ltx2_latent_upsampler")
