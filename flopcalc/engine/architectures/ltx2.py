"""LTX-2: the audio-video transformer ``LTX2VideoTransformer3DModel`` (diffusers
``models/transformers/transformer_ltx2.py``), its text connectors ``LTX2TextConnectors``
(``pipelines/ltx2/connectors.py``) and the vocoder ``LTX2Vocoder`` (``pipelines/ltx2/vocoder.py``); block
formulas in ``formulas/ltx2.py``.

**Transformer.** ``LTX2Pipeline`` packs the ``C × F × h × w`` video latent into ``N = (F/p_t)(h/p)(w/p)``
tokens of ``in_channels`` features and the ``C_a × L × M`` audio latent into ``L`` tokens of ``C_a·M``
(= ``audio_in_channels``) features (``_pack_audio_latents`` without patch sizes); the video and audio streams
each attend to ``T`` prompt tokens (the connectors' outputs, ``max_sequence_length`` of them). A run shape
says: the latent grid (``latent_frames`` × ``latent_height`` × ``latent_width``), ``text_len`` = T,
``seq_len`` = L (the audio stream's tokens), ``timestep_tokens`` (the image-to-video and condition pipelines' one
video timestep per token), ``reference_tokens`` (keyframe conditions' packed latents appended to the video tokens
by ``LTX2ConditionPipeline``: every video token-wise layer runs on them too) and, in ``perturbed``, an
:class:`LTX2Pass` (which guidance pass: spatio-temporal guidance
blocks, modality isolation, the cross-modal timestep). The model:

* ``proj_in`` (in_channels → d) on N tokens, ``audio_proj_in`` (C_a·M → d_a) on L;
* ``caption_projection`` / ``audio_caption_projection`` (``PixArtAlphaTextProjection``: caption_channels → d → d,
  → d_a → d_a) on the T tokens when ``use_prompt_embeddings`` (LTX-2.0);
* ``time_embed`` / ``audio_time_embed`` (``LTX2AdaLayerNormSingle``: 256 → d → d, then d → 6d, 9d with the
  cross-attention AdaLN) on the timesteps; ``av_cross_attn_video_scale_shift`` (4 rows),
  ``av_cross_attn_video_a2v_gate`` (1), ``av_cross_attn_audio_scale_shift`` (4), ``av_cross_attn_audio_v2a_gate``
  (1) on one timestep each (the other stream's sigma under ``use_cross_timestep``, the pipelines' default; else
  the stream's own timesteps); ``prompt_adaln`` / ``audio_prompt_adaln`` (2 rows) with the cross-attention
  AdaLN and ``use_prompt_adaln_single``;
* ``num_layers`` audio-video blocks; ``norm_out`` / ``audio_norm_out`` (``nn.LayerNorm``, no affine; thop: 2 ops
  per element), ``proj_out`` / ``audio_proj_out``.

Rotary tables (``LTX2AudioVideoRotaryPosEmbed``: ``linspace``, ``pow``, broadcast products, cos/sin) do no
counted work.

**Connectors.** ``LTX2TextConnectors.forward`` on the stacked Gemma hidden states ``(T, caption_channels ·
text_proj_in_factor)``: ``text_proj_in`` (→ caption_channels, no bias) after the masked mean/range
normalisation (elementwise), or with ``per_modality_projections`` (LTX-2.3) ``video_text_proj_in`` /
``audio_text_proj_in`` (→ video / audio hidden width); then ``video_connector`` and ``audio_connector``
(:func:`~flopcalc.formulas.ltx2.connector_transformer`). The run shape's ``seq_len`` is T, which the learnable
registers need to divide.

**Vocoder.** ``LTX2Vocoder`` on the decoded mel spectrogram ``(C, T_mel, M)`` folded to ``C·M`` channels: the run
shape's ``seq_len`` is ``T_mel``.

**Latent upsampler.** ``LTX2LatentUpsamplerModel`` (``LTX2LatentUpsamplePipeline``) on one VAE latent ``C × T × h × w``
(``latent_frames`` / ``latent_height`` / ``latent_width``).
"""

from __future__ import annotations

from dataclasses import dataclass

from flopcalc.engine.config import (
    FLAG, LAYERS, NULL, SIZE, SIZES, TEXT, Choice, Config, Int, ListOf, Real, boolean, count_int, declare_keys,
    positive_int,
)
from flopcalc.engine.cost import Node, module_list
from flopcalc.engine.errors import ConfigError
from flopcalc.engine.registry import RunShape, register
from flopcalc.formulas import ops
from flopcalc.formulas.conditioning import mlp_embedder
from flopcalc.formulas.ltx import ACTIVATIONS
from flopcalc.formulas.ltx2 import (
    RATIONAL_SCALES, ada_layer_norm_single, connector_transformer, ltx2_av_block, ltx2_latent_upsampler, vocoder,
)
from flopcalc.formulas.ltx_latent_upsampler import GROUPS
from flopcalc.engine.loading import Buffer, loading_rules

TRANSFORMER_SOURCE = "diffusers/models/transformers/transformer_ltx2.py"
CONNECTORS_SOURCE = "diffusers/pipelines/ltx2/connectors.py"
VOCODER_SOURCE = "diffusers/pipelines/ltx2/vocoder.py"
UPSAMPLER_SOURCE = "diffusers/pipelines/ltx2/latent_upsampler.py"

#: ``LTX2VideoTransformer3DModel.__init__`` keyword defaults (transformer_ltx2.py:1140-1186, diffusers 0.42.1).
DEFAULTS = {
    "in_channels": 128, "out_channels": 128, "patch_size": 1, "patch_size_t": 1, "num_attention_heads": 32,
    "attention_head_dim": 128, "cross_attention_dim": 4096, "vae_scale_factors": [8, 32, 32], "pos_embed_max_pos": 20,
    "base_height": 2048, "base_width": 2048, "gated_attn": False, "cross_attn_mod": False, "audio_in_channels": 128,
    "audio_out_channels": 128, "audio_patch_size": 1, "audio_patch_size_t": 1, "audio_num_attention_heads": 32,
    "audio_attention_head_dim": 64, "audio_cross_attention_dim": 2048, "audio_scale_factor": 4,
    "audio_pos_embed_max_pos": 20, "audio_sampling_rate": 16000, "audio_hop_length": 160, "audio_gated_attn": False,
    "audio_cross_attn_mod": False, "num_layers": 48, "activation_fn": "gelu-approximate",
    "qk_norm": "rms_norm_across_heads", "norm_elementwise_affine": False, "norm_eps": 1e-6, "caption_channels": 3840,
    "attention_bias": True, "attention_out_bias": True, "rope_theta": 10000.0, "rope_double_precision": True,
    "causal_offset": 1, "timestep_scale_multiplier": 1000, "cross_attn_timestep_scale_multiplier": 1000,
    "rope_type": "interleaved", "use_prompt_embeddings": True, "perturbed_attn": False, "ff_bias": True,
    "audio_ff_bias": True, "use_prompt_adaln_single": True, "use_keyframes_abs_pos_embedding": False,
}

#: A valid shape for parameter counts: 2 latent frames of 4×4, 8 prompt tokens, 4 audio tokens.
NOMINAL = RunShape(latent_height=4, latent_width=4, latent_frames=2, text_len=8, seq_len=4)


@dataclass(frozen=True)
class LTX2Pass:
    """How one ``LTX2VideoTransformer3DModel`` forward of an LTX-2 pipeline runs (a run shape's
    ``perturbed``): ``stg_blocks``, the ``spatio_temporal_guidance_blocks`` of a spatio-temporal-guidance pass
    (with ``perturbed_attn`` their self-attentions take the value path; without it the pass is a plain forward);
    ``isolate``, the modality-isolation pass (``isolate_modalities``: no audio-video cross-attention);
    ``cross_timestep``, ``use_cross_timestep`` (the cross-modal modulation reads the other stream's sigma, one
    value, instead of the stream's own timesteps)."""

    stg_blocks: tuple[int, ...] = ()
    isolate: bool = False
    cross_timestep: bool = True


PLAIN = LTX2Pass()


def video_tokens(config: Config, shape: RunShape):
    """``N = (F/p_t)(h/p)(w/p)``: the tokens ``_pack_latents`` makes of the video latent."""
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    p, pt = positive_int(config, "patch_size"), positive_int(config, "patch_size_t")
    return (ops.exact_div(frames, pt) * ops.exact_div(shape.latent_height, p)
            * ops.exact_div(shape.latent_width, p))


#: Every config key ``LTX2VideoTransformer3DModel`` reads (assembler and pipeline plans).
declare_keys("LTX2VideoTransformer3DModel", {
    "in_channels": SIZE, "out_channels": SIZE | NULL, "patch_size": SIZE, "patch_size_t": SIZE,
    "num_attention_heads": SIZE, "attention_head_dim": SIZE, "cross_attention_dim": SIZE,
    "gated_attn": FLAG, "cross_attn_mod": FLAG, "audio_in_channels": SIZE, "audio_out_channels": SIZE | NULL,
    "audio_num_attention_heads": SIZE, "audio_attention_head_dim": SIZE, "audio_cross_attention_dim": SIZE,
    "audio_gated_attn": FLAG, "audio_cross_attn_mod": FLAG, "num_layers": LAYERS, "activation_fn": TEXT,
    "qk_norm": TEXT, "norm_elementwise_affine": FLAG, "caption_channels": SIZE, "attention_bias": FLAG,
    "attention_out_bias": FLAG, "rope_type": Choice("interleaved", "split"), "use_prompt_embeddings": FLAG,
    "perturbed_attn": FLAG, "ff_bias": FLAG, "audio_ff_bias": FLAG, "use_prompt_adaln_single": FLAG,
    "use_keyframes_abs_pos_embedding": FLAG,
})


def _check_transformer(config: Config) -> None:
    if config["qk_norm"] != "rms_norm_across_heads":
        raise ConfigError(f"{config.component}/config.json: LTX2Attention supports only qk_norm "
                          f"'rms_norm_across_heads', got {config['qk_norm']!r}")
    if config["activation_fn"] not in ACTIVATIONS:
        raise ConfigError(f"{config.component}/config.json: activation_fn {config['activation_fn']!r} is not one "
                          f"diffusers' FeedForward builds ({', '.join(ACTIVATIONS)})")
    audio_inner = positive_int(config, "audio_num_attention_heads") * positive_int(config, "audio_attention_head_dim")
    if positive_int(config, "audio_cross_attention_dim") != audio_inner:
        raise ConfigError(f"{config.component}/config.json: audio_cross_attention_dim {config['audio_cross_attention_dim']}"
                          f" must equal the audio stream's inner width {audio_inner} (the cross-modal rotary tables, "
                          "cross_attn_rope, are that wide)")
    inner = positive_int(config, "num_attention_heads") * positive_int(config, "attention_head_dim")
    prompt_mod = boolean(config, "cross_attn_mod") or boolean(config, "audio_cross_attn_mod")
    if (boolean(config, "use_prompt_embeddings") or prompt_mod) and positive_int(config, "cross_attention_dim") != inner:
        raise ConfigError(f"{config.component}/config.json: cross_attention_dim {config['cross_attention_dim']} must "
                          f"equal the video stream's inner width {inner} (caption_projection feeds the prompt "
                          "cross-attention; the prompt modulation table is that wide)")


@register("LTX2VideoTransformer3DModel", role="denoiser", defaults=DEFAULTS, nominal=NOMINAL,
          source=TRANSFORMER_SOURCE)
def ltx2_video_transformer(config: Config, shape: RunShape) -> Node:
    _check_transformer(config)
    heads, head_dim = positive_int(config, "num_attention_heads"), positive_int(config, "attention_head_dim")
    a_heads, a_head_dim = (positive_int(config, "audio_num_attention_heads"),
                           positive_int(config, "audio_attention_head_dim"))
    d, da = heads * head_dim, a_heads * a_head_dim
    c_in, ca_in = positive_int(config, "in_channels"), positive_int(config, "audio_in_channels")
    c_out = config["out_channels"] or c_in
    ca_out = config["audio_out_channels"] or ca_in
    # the condition pipelines append the packed latents of keyframe conditions to the video tokens
    n, a, t = video_tokens(config, shape) + (shape.reference_tokens or 0), shape.seq_len, shape.text_len
    if a is None or t is None:
        raise ConfigError(f"{config.component}: LTX2VideoTransformer3DModel runs under an LTX-2 pipeline (audio "
                          "tokens and prompt tokens come from its plan)")
    run = shape.perturbed if isinstance(shape.perturbed, LTX2Pass) else PLAIN
    video_mod, audio_mod = boolean(config, "cross_attn_mod"), boolean(config, "audio_cross_attn_mod")
    perturbed_attn = boolean(config, "perturbed_attn")
    layers = count_int(config, "num_layers")
    stg = set(run.stg_blocks) if perturbed_attn else set()

    def block(identity: bool) -> Node:
        return ltx2_av_block(
            dim=d, heads=heads, head_dim=head_dim, audio_dim=da, audio_heads=a_heads, audio_head_dim=a_head_dim,
            cross_attention_dim=positive_int(config, "cross_attention_dim"),
            audio_cross_attention_dim=positive_int(config, "audio_cross_attention_dim"), tokens=n, audio_tokens=a,
            text_tokens=t, activation=config["activation_fn"], attention_bias=boolean(config, "attention_bias"),
            attention_out_bias=boolean(config, "attention_out_bias"),
            norm_affine=boolean(config, "norm_elementwise_affine"), video_gated=boolean(config, "gated_attn"),
            audio_gated=boolean(config, "audio_gated_attn"), video_cross_mod=video_mod, audio_cross_mod=audio_mod,
            ff_bias=boolean(config, "ff_bias"), audio_ff_bias=boolean(config, "audio_ff_bias"),
            identity_self_attention=identity, isolate_modalities=run.isolate)

    plain, perturbed = block(False), (block(True) if stg else None)
    blocks = [perturbed if i in stg else plain for i in range(layers)]
    # one timestep per video, or per token (the image-to-video pipelines' ``t · (1 − conditioning_mask)``)
    steps = 1 if shape.timestep_tokens is None else shape.timestep_tokens
    video_cross = 1 if run.cross_timestep else steps  # video_ca_timestep: audio_sigma, or the video timesteps
    children = [Node("proj_in", ops.linear(n, c_in, d)), Node("audio_proj_in", ops.linear(a, ca_in, da))]
    if boolean(config, "use_keyframes_abs_pos_embedding"):
        children.append(Node("keyframes_abs_pos_embedding", ops.parameters(d)))
    if boolean(config, "use_prompt_embeddings"):
        caption = positive_int(config, "caption_channels")
        children += [mlp_embedder("caption_projection", caption, d, tokens=t),
                     mlp_embedder("audio_caption_projection", caption, da, tokens=t)]
    children += [
        ada_layer_norm_single("time_embed", d, 9 if video_mod else 6, steps),
        ada_layer_norm_single("audio_time_embed", da, 9 if audio_mod else 6),
        ada_layer_norm_single("av_cross_attn_video_scale_shift", d, 4, video_cross),
        ada_layer_norm_single("av_cross_attn_audio_scale_shift", da, 4),
        ada_layer_norm_single("av_cross_attn_video_a2v_gate", d, 1, video_cross),
        ada_layer_norm_single("av_cross_attn_audio_v2a_gate", da, 1),
        Node("scale_shift_table", ops.parameters(2 * d)),
        Node("audio_scale_shift_table", ops.parameters(2 * da)),
    ]
    if (video_mod or audio_mod) and boolean(config, "use_prompt_adaln_single"):
        children += [ada_layer_norm_single("prompt_adaln", d, 2), ada_layer_norm_single("audio_prompt_adaln", da, 2)]
    children += [
        module_list("transformer_blocks", blocks),
        Node("norm_out", ops.layer_norm(n, d, affine=False)),
        Node("proj_out", ops.linear(n, d, c_out)),
        Node("audio_norm_out", ops.layer_norm(a, da, affine=False)),
        Node("audio_proj_out", ops.linear(a, da, ca_out)),
    ]
    return Node("transformer", children=tuple(children), formula="ltx2_video_transformer")


# --------------------------------------------------------------------------- connectors

#: ``LTX2TextConnectors.__init__`` keyword defaults (connectors.py:345-367).
CONNECTOR_DEFAULTS = {
    "caption_channels": 3840, "text_proj_in_factor": 49, "video_connector_num_attention_heads": 30,
    "video_connector_attention_head_dim": 128, "video_connector_num_layers": 2,
    "video_connector_num_learnable_registers": 128, "video_gated_attn": False,
    "audio_connector_num_attention_heads": 30, "audio_connector_attention_head_dim": 128,
    "audio_connector_num_layers": 2, "audio_connector_num_learnable_registers": 128, "audio_gated_attn": False,
    "connector_rope_base_seq_len": 4096, "rope_theta": 10000.0, "rope_double_precision": True,
    "causal_temporal_positioning": False, "rope_type": "interleaved", "per_modality_projections": False,
    "video_hidden_dim": 4096, "audio_hidden_dim": 2048, "proj_bias": False,
}

declare_keys("LTX2TextConnectors", {
    "caption_channels": SIZE, "text_proj_in_factor": SIZE, "video_connector_num_attention_heads": SIZE,
    "video_connector_attention_head_dim": SIZE, "video_connector_num_layers": LAYERS,
    "video_connector_num_learnable_registers": SIZE | NULL, "video_gated_attn": FLAG,
    "audio_connector_num_attention_heads": SIZE, "audio_connector_attention_head_dim": SIZE,
    "audio_connector_num_layers": LAYERS, "audio_connector_num_learnable_registers": SIZE | NULL,
    "audio_gated_attn": FLAG, "rope_type": Choice("interleaved", "split"), "per_modality_projections": FLAG,
    "video_hidden_dim": SIZE, "audio_hidden_dim": SIZE, "proj_bias": FLAG,
})


def register_multiple(config: Config) -> int:
    """The prompt length the connectors accept a multiple of: the learnable registers of both connectors
    (``LTX2ConnectorTransformer1d.forward`` raises otherwise, connectors.py:269); 1 without registers."""
    import math

    counts = [config[f"{s}_connector_num_learnable_registers"] for s in ("video", "audio")]
    return math.lcm(*[c for c in counts if c is not None]) if any(c is not None for c in counts) else 1


def _stream_width(config: Config, stream: str) -> int:
    return (positive_int(config, f"{stream}_connector_num_attention_heads")
            * positive_int(config, f"{stream}_connector_attention_head_dim"))


@register("LTX2TextConnectors", role="text_connector", defaults=CONNECTOR_DEFAULTS,
          nominal=RunShape(seq_len=128), source=CONNECTORS_SOURCE)
def ltx2_text_connectors(config: Config, shape: RunShape) -> Node:
    """``LTX2TextConnectors.forward`` on ``seq_len`` prompt tokens (one prompt row)."""
    t = shape.seq_len
    multiple = register_multiple(config)
    if isinstance(t, int) and t % multiple:
        raise ConfigError(f"{config.component}: {t} prompt tokens do not split into the connectors' "
                          f"{multiple} learnable registers (max_sequence_length must be a multiple of {multiple})")
    caption = positive_int(config, "caption_channels")
    packed = caption * positive_int(config, "text_proj_in_factor")
    bias = boolean(config, "proj_bias")
    widths = {s: _stream_width(config, s) for s in ("video", "audio")}
    if boolean(config, "per_modality_projections"):
        targets = {s: positive_int(config, f"{s}_hidden_dim") for s in ("video", "audio")}
        proj = [Node(f"{s}_text_proj_in", ops.linear(t, packed, targets[s], bias=bias)) for s in ("video", "audio")]
    else:
        targets = {s: caption for s in ("video", "audio")}
        proj = [Node("text_proj_in", ops.linear(t, packed, caption, bias=bias))]
    for s in ("video", "audio"):
        if widths[s] != targets[s]:
            raise ConfigError(f"{config.component}/config.json: the {s} connector's width {widths[s]} (heads × head "
                              f"dim) must equal the projection's {targets[s]}")
    connectors = [connector_transformer(
        f"{s}_connector", tokens=t, heads=positive_int(config, f"{s}_connector_num_attention_heads"),
        head_dim=positive_int(config, f"{s}_connector_attention_head_dim"),
        layers=count_int(config, f"{s}_connector_num_layers"),
        registers=config[f"{s}_connector_num_learnable_registers"], gated=boolean(config, f"{s}_gated_attn"))
        for s in ("video", "audio")]
    return Node("connectors", children=(*proj, *connectors), formula="ltx2_text_connectors")


# --------------------------------------------------------------------------- vocoder

#: ``LTX2Vocoder.__init__`` keyword defaults (vocoder.py:302-318).
VOCODER_DEFAULTS = {
    "in_channels": 128, "hidden_channels": 1024, "out_channels": 2, "upsample_kernel_sizes": [16, 15, 8, 4, 4],
    "upsample_factors": [6, 5, 2, 2, 2], "resnet_kernel_sizes": [3, 7, 11],
    "resnet_dilations": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "act_fn": "leaky_relu", "leaky_relu_negative_slope": 0.1,
    "antialias": False, "antialias_ratio": 2, "antialias_kernel_size": 12, "final_act_fn": "tanh", "final_bias": True,
    "output_sampling_rate": 24000,
}

declare_keys("LTX2Vocoder", {
    "in_channels": SIZE, "hidden_channels": SIZE, "out_channels": SIZE, "upsample_kernel_sizes": SIZES,
    "upsample_factors": SIZES, "resnet_kernel_sizes": SIZES, "resnet_dilations": ListOf(SIZES),
    "act_fn": Choice("leaky_relu", "snake", "snakebeta"), "antialias": FLAG, "final_bias": FLAG,
    "final_act_fn": Choice("tanh", "clamp", None), "output_sampling_rate": SIZE,
    "leaky_relu_negative_slope": Real(0.0, 1.0, closed=True), "antialias_ratio": Int(1, 64),
    "antialias_kernel_size": SIZE,
})


@register("LTX2Vocoder", role="vocoder", defaults=VOCODER_DEFAULTS, nominal=RunShape(seq_len=8),
          source=VOCODER_SOURCE)
def ltx2_vocoder(config: Config, shape: RunShape) -> Node:
    """``LTX2Vocoder.forward`` on ``seq_len`` mel frames (one waveform)."""
    if config["act_fn"] != "leaky_relu" or config["antialias"]:
        raise ConfigError(f"{config.component}/config.json: flopcalc models LTX2Vocoder with act_fn 'leaky_relu' "
                          f"and no antialias (the LTX-2.0 vocoder), got act_fn {config['act_fn']!r}, antialias "
                          f"{config['antialias']!r}")
    kernels, factors = list(config["upsample_kernel_sizes"]), list(config["upsample_factors"])
    rk, dilations = list(config["resnet_kernel_sizes"]), [tuple(d) for d in config["resnet_dilations"]]
    if len(kernels) != len(factors) or len(rk) != len(dilations):
        raise ConfigError(f"{config.component}/config.json: upsample_kernel_sizes / upsample_factors and "
                          "resnet_kernel_sizes / resnet_dilations must pair up (LTX2Vocoder raises otherwise)")
    hidden = positive_int(config, "hidden_channels")
    if hidden % 2 ** len(kernels):
        raise ConfigError(f"{config.component}/config.json: hidden_channels {hidden} must halve "
                          f"{len(kernels)} times")
    return vocoder(in_channels=positive_int(config, "in_channels"), hidden_channels=hidden,
                   out_channels=positive_int(config, "out_channels"), upsample_kernel_sizes=kernels,
                   upsample_factors=factors, resnet_kernel_sizes=rk, resnet_dilations=dilations,
                   final_bias=boolean(config, "final_bias"), frames=shape.seq_len)


# --------------------------------------------------------------------------- latent upsampler

#: ``LTX2LatentUpsamplerModel.__init__`` keyword defaults (latent_upsampler.py:166-176).
UPSAMPLER_DEFAULTS = {"in_channels": 128, "mid_channels": 1024, "num_blocks_per_stage": 4, "dims": 3,
                      "spatial_upsample": True, "temporal_upsample": False, "rational_spatial_scale": 2.0,
                      "use_rational_resampler": True}

declare_keys("LTX2LatentUpsamplerModel", {
    "in_channels": SIZE, "mid_channels": SIZE, "num_blocks_per_stage": LAYERS, "dims": Choice(2, 3),
    "spatial_upsample": FLAG, "temporal_upsample": FLAG, "rational_spatial_scale": Choice(*RATIONAL_SCALES),
    "use_rational_resampler": FLAG,
})


def upsampler_kind(config: Config) -> tuple[bool, bool, bool]:
    """``(spatial, temporal, rational)``: which upsampler ``__init__`` builds (:198-218)."""
    spatial, temporal = boolean(config, "spatial_upsample"), boolean(config, "temporal_upsample")
    if not spatial and not temporal:
        raise ConfigError(f"{config.component}/config.json: LTX2LatentUpsamplerModel needs spatial_upsample or "
                          "temporal_upsample")
    return spatial, temporal, spatial and not temporal and boolean(config, "use_rational_resampler")


def upsampled_grid(config: Config, frames: int, height: int, width: int) -> tuple[int, int, int]:
    """The latent grid after the upsampler: ×2 in time (the first frame dropped) and / or ×2 in space, or the
    rational resampler's ``scale``."""
    spatial, temporal, rational = upsampler_kind(config)
    if rational:
        num, den = RATIONAL_SCALES[config["rational_spatial_scale"]]
        side = (lambda x: (num * x - 1) // den + 1) if den > 1 else (lambda x: num * x)
        return frames, side(height), side(width)
    return (2 * frames - 1 if temporal else frames, 2 * height if spatial else height, 2 * width if spatial else width)


@register("LTX2LatentUpsamplerModel", role="upsampler", defaults=UPSAMPLER_DEFAULTS,
          nominal=RunShape(latent_height=4, latent_width=4, latent_frames=2), source=UPSAMPLER_SOURCE)
def ltx2_latent_upsampler_model(config: Config, shape: RunShape) -> Node:
    spatial, temporal, rational = upsampler_kind(config)
    dims = config["dims"]
    if dims == 2 and temporal:
        raise ConfigError(f"{config.component}/config.json: dims 2 with temporal_upsample feeds a Conv3d per-frame "
                          "maps, which LTX2LatentUpsamplerModel.forward cannot run")
    mid = positive_int(config, "mid_channels")
    if mid % GROUPS:
        raise ConfigError(f"{config.component}/config.json: mid_channels {mid} must divide into GroupNorm's "
                          f"{GROUPS} groups")
    frames = 1 if shape.latent_frames is None else shape.latent_frames
    return ltx2_latent_upsampler(
        in_channels=positive_int(config, "in_channels"), mid_channels=mid,
        blocks=count_int(config, "num_blocks_per_stage"), dims=dims, spatial=spatial, temporal=temporal,
        rational=rational, scale=config["rational_spatial_scale"], frames=frames, height=shape.latent_height,
        width=shape.latent_width)


# latent_upsampler.py:103: the blur's persistent binomial kernel (1, 1, 5, 5), built with every rational resampler
loading_rules("LTX2LatentUpsamplerModel",
              buffers=lambda c: (Buffer("upsampler.blur_down.kernel", 25, "loaded"),) if upsampler_kind(c)[2] else (),
              source="diffusers/pipelines/ltx2/latent_upsampler.py:103")
