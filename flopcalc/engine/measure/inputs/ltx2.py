"""Input builders for LTX-2: ``LTX2VideoTransformer3DModel``, ``LTX2TextConnectors``, ``AutoencoderKLLTX2Video``,
``AutoencoderKLLTX2Audio``, ``LTX2Vocoder`` and the Gemma-3 text encoder ``Gemma3ForConditionalGeneration``
(imported by ``flopcalc.engine.measure.harness``; see validation/README.md).

Settings are pipeline-level, as ``LTX2Pipeline.__call__`` (diffusers ``pipelines/ltx2/pipeline_ltx2.py``) derives
its shapes: ``height`` / ``width`` video pixels and ``num_frames`` frames give the video latent
``((F − 1)//8 + 1, H/32, W/32)`` (the VAE's compression, the pipeline's fallbacks too), packed into
``(F'/p_t)(h/p)(w/p)`` tokens; the audio latent has ``round(F / frame_rate · sample_rate / hop / 4)`` frames
(``audio_num_frames``, :1316; ``frame_rate`` 24, the ``__call__`` default, unless given), packed into that many
tokens of ``C·M/4`` features; ``text_len`` is the connectors' (and the prompt's) length.

Nothing needs help on the meta device: the rotary coordinates are built inside ``forward`` from the python ints
the pipeline passes (``num_frames``, ``height``, ``width``, ``audio_num_frames``, ``fps``: wrapper constants);
the connectors' register gather (``argsort``, ``gather``, ``where``) and masked normalisation run on meta tensors;
the STG pass's ``perturbation_mask`` is a CPU tensor the model makes itself. ``LTX2TextConnectors`` and
``LTX2Vocoder`` are not exported at diffusers' top level: built from ``diffusers.pipelines.ltx2`` by a
``model_builder``. Gemma-3 gets token ids only (``attention_mask`` None: with a padding mask transformers' SDPA
mask preparation calls ``Tensor.item()``; a mask changes no dense FLOP), as the other SDPA encoders.

``step: 1`` (transformer): one denoising step as ``LTX2Pipeline`` runs it at its defaults (guidance 3, STG scale 1
on block 28, modality scale 3): the classifier-free-guidance call on the doubled batch, the STG call
(``spatio_temporal_guidance_blocks=[28]``) and the modality-isolation call (``isolate_modalities=True``), the
last two on one row each; the model's ``forward`` is wrapped to make the three calls, so one fixture is the whole
step (the plan's transformer row of three pieces per step).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from flopcalc.engine.measure.harness import TensorSpec, _cfg, _exact_div as _div, input_builder, model_builder
from flopcalc.engine.measure.inputs.ltx import _ConstantSpec, _ConstInt

#: ``LTX2Pipeline.__call__``'s default ``frame_rate``; its ``spatio_temporal_guidance_blocks`` default.
FRAME_RATE = 24
STG_BLOCKS = (28,)
#: The LTX-2 video VAE's compression (the pipeline's fallbacks without a VAE) and the audio VAE's
#: ``LATENT_DOWNSAMPLE_FACTOR`` (time and mel bins).
SPATIAL, TEMPORAL, AUDIO_DOWNSAMPLE = 32, 8, 4


def audio_frames(num_frames: int, frame_rate: float, sample_rate: int, hop: int) -> int:
    """``audio_num_frames`` as ``LTX2Pipeline.__call__`` computes it (pipeline_ltx2.py:1312-1316)."""
    duration_s = num_frames / frame_rate
    return round(duration_s * (sample_rate / hop / float(AUDIO_DOWNSAMPLE)))


def _const(value: int, what: str) -> _ConstantSpec:
    return _ConstantSpec(_ConstInt(value, f"python int: {what} (a wrapper constant)"))


def _Value(value: Any) -> _ConstantSpec:
    """A python value (a float, a bool, a string) passed as a wrapper constant."""
    return _ConstantSpec(value)


@input_builder("LTX2VideoTransformer3DModel", settings=("height", "width", "num_frames", "text_len"),
               optional=("frame_rate", "per_token_timesteps", "extra_tokens", "step", "stg_block"))
def _ltx2_transformer_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``LTX2Pipeline`` calls it at batch 1: hidden_states (1, N, in_channels), audio_hidden_states
    (1, A, audio_in_channels), encoder_hidden_states / audio_encoder_hidden_states (1, text_len, width) (the
    connectors' outputs: ``caption_channels`` wide when the model projects them, else the cross-attention width),
    timestep and sigma (1,), the binary prompt mask (1, text_len) for both streams, and the latent grid,
    ``audio_num_frames`` and ``fps`` as constants; ``use_cross_timestep`` True (the ``__call__`` default).
    ``per_token_timesteps`` 1: timestep (1, N) and audio_timestep (1,), as ``LTX2ImageToVideoPipeline`` passes
    them. ``extra_tokens`` E: ``LTX2ConditionPipeline``'s keyframe-condition tokens appended to the N latent tokens
    (hidden_states (1, N + E, C), one timestep per token, ``video_coords`` (1, 3, N + E, 2) as that pipeline
    passes them). A is ``audio_num_frames`` from the model's own ``audio_sampling_rate`` / ``audio_hop_length``
    (16000 / 160 for LTX-2, the audio VAE's)."""
    frames, rows, cols = (s["num_frames"] - 1) // TEMPORAL + 1, _div(s["height"], SPATIAL, "height"), \
        _div(s["width"], SPATIAL, "width")
    p, pt = _cfg(model, "patch_size"), _cfg(model, "patch_size_t")
    gt, gh, gw = _div(frames, pt, "latent frames"), _div(rows, p, "latent height"), _div(cols, p, "latent width")
    tokens = gt * gh * gw + s.get("extra_tokens", 0)
    audio = audio_frames(s["num_frames"], s.get("frame_rate", FRAME_RATE), _cfg(model, "audio_sampling_rate"),
                         _cfg(model, "audio_hop_length"))
    projected = _cfg(model, "use_prompt_embeddings")
    video_width = _cfg(model, "caption_channels") if projected else _cfg(model, "cross_attention_dim")
    audio_width = _cfg(model, "caption_channels") if projected else _cfg(model, "audio_cross_attention_dim")
    t = s["text_len"]
    inputs: dict[str, Any] = {
        "hidden_states": TensorSpec((1, tokens, _cfg(model, "in_channels"))),
        "audio_hidden_states": TensorSpec((1, audio, _cfg(model, "audio_in_channels"))),
        "encoder_hidden_states": TensorSpec((1, t, video_width)),
        "audio_encoder_hidden_states": TensorSpec((1, t, audio_width)),
        "timestep": TensorSpec((1, tokens) if s.get("per_token_timesteps") or s.get("extra_tokens") else (1,)),
        "sigma": TensorSpec((1,)),
        "encoder_attention_mask": TensorSpec((1, t)),
        "audio_encoder_attention_mask": TensorSpec((1, t)),
        "num_frames": _const(frames, "latent frames"),  # the latent grid: the rotary coordinates step by the patch
        "height": _const(rows, "latent rows"),
        "width": _const(cols, "latent columns"),
        "audio_num_frames": _const(audio, "audio latent frames"),
        "fps": _Value(float(s.get("frame_rate", FRAME_RATE))),
        "use_cross_timestep": _Value(True),
    }
    if s.get("per_token_timesteps") or s.get("extra_tokens"):
        inputs["audio_timestep"] = TensorSpec((1,))
    if s.get("extra_tokens"):
        inputs["video_coords"] = TensorSpec((1, 3, tokens, 2))
    if s.get("step"):
        _wrap_step(model, (s["stg_block"],) if "stg_block" in s else STG_BLOCKS)
    return inputs


_BATCHED = ("hidden_states", "audio_hidden_states", "encoder_hidden_states", "audio_encoder_hidden_states",
            "timestep", "audio_timestep", "sigma", "encoder_attention_mask", "audio_encoder_attention_mask",
            "video_coords")


def _wrap_step(model: nn.Module, stg_blocks: tuple[int, ...]) -> None:
    """Make ``model.forward`` one denoising step of ``LTX2Pipeline.__call__`` at its defaults (pipeline_ltx2.py:
    1410-1530): the CFG call on the doubled batch (``torch.cat`` of the rows), the STG call on one row with
    ``spatio_temporal_guidance_blocks`` (``[28]``; the setting ``stg_block`` names another), the
    modality-isolation call on one row with ``isolate_modalities``."""
    forward = model.forward

    def step(**kwargs: Any) -> Any:
        doubled = {k: (torch.cat([v, v]) if k in _BATCHED and isinstance(v, torch.Tensor) else v)
                   for k, v in kwargs.items()}
        forward(**doubled)
        forward(**kwargs, spatio_temporal_guidance_blocks=list(stg_blocks))
        return forward(**kwargs, isolate_modalities=True)

    model.forward = step
    model._measure_notes = [(
        "step 1: model.forward wrapped to make one LTX2Pipeline denoising step at its defaults: the CFG call on the "
        f"doubled batch (inputs concatenated with themselves), the STG call (spatio_temporal_guidance_blocks="
        f"{list(stg_blocks)}) "
        "and the modality-isolation call (isolate_modalities=True), one row each; counts are their sum.")]


@model_builder("LTX2TextConnectors")
def _build_connectors(config_dir: Path) -> nn.Module:
    """Not exported at diffusers' top level: ``diffusers.pipelines.ltx2.connectors``' class, on meta."""
    from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors

    with torch.device("meta"):
        return LTX2TextConnectors.from_config(LTX2TextConnectors.load_config(str(config_dir)))


@model_builder("LTX2Vocoder")
def _build_vocoder(config_dir: Path) -> nn.Module:
    """Not exported at diffusers' top level: ``diffusers.pipelines.ltx2.vocoder``' class, on meta."""
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder

    with torch.device("meta"):
        return LTX2Vocoder.from_config(LTX2Vocoder.load_config(str(config_dir)))


@input_builder("LTX2TextConnectors", settings=("seq_len",))
def _ltx2_connector_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``LTX2Pipeline`` calls it on one prompt row: the stacked Gemma hidden states (1, seq_len,
    caption_channels · text_proj_in_factor), the tokenizer's mask (1, seq_len) and ``padding_side`` "left"."""
    width = _cfg(model, "caption_channels") * _cfg(model, "text_proj_in_factor")
    return {"text_encoder_hidden_states": TensorSpec((1, s["seq_len"], width)),
            "attention_mask": TensorSpec((1, s["seq_len"]), torch.int64),
            "padding_side": _Value("left")}


@input_builder("AutoencoderKLLTX2Video", settings=("height", "width", "num_frames"), calls=("decode", "encode"),
               optional=("vae_tiling",))
def _ltx2_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """decode: z (1, latent_channels, T, h, w) on the grid the VAE's compression gives, temb (1,)
    (``decode_timestep``) when ``timestep_conditioning``, else None (the pipelines pass ``timestep = None``);
    encode: x (1, in_channels, num_frames, height, width). Untiled, one call over all frames, unless ``vae_tiling``
    1 (optional) calls ``enable_tiling()`` first (its defaults: spatial tiles of 512 px every 448 px,
    autoencoder_kl_ltx2.py:1183-1189, 1192-1224): ``_decode`` (:1281) then runs ``tiled_decode`` (:1405-1465) when a
    latent side exceeds the tile, each tile over all latent frames (``use_framewise_decoding`` stays off: enable_tiling
    does not set it, :1174, 1218)."""
    if s.get("vae_tiling"):
        model.enable_tiling()
        model._measure_notes = [("vae.enable_tiling() was called before measuring (default tile sizes and strides): "
                                 "tiled_decode / tiled_encode ran, every tile over all frames.")]
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["num_frames"], s["height"], s["width"]))}
    spatial, temporal = model.spatial_compression_ratio, model.temporal_compression_ratio
    z = (1, _cfg(model, "latent_channels"), (s["num_frames"] - 1) // temporal + 1, _div(s["height"], spatial, "height"),
         _div(s["width"], spatial, "width"))
    return {"z": TensorSpec(z), "temb": TensorSpec((1,)) if _cfg(model, "timestep_conditioning") else None}


def _check_length(model: nn.Module, s: Mapping[str, int], expected: int, what: str) -> None:
    if "num_frames" in s and s["seq_len"] != expected:
        raise ValueError(f"seq_len {s['seq_len']} is not the {what} of {s['num_frames']} frames ({expected})")


@input_builder("AutoencoderKLLTX2Audio", settings=("seq_len",), calls=("decode", "encode"), optional=("num_frames",))
def _ltx2_audio_vae_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """decode: z (1, latent_channels, seq_len, mel_bins / 4), the audio latent the pipeline unpacks
    (``seq_len`` = ``audio_num_frames``); encode: x (1, in_channels, seq_len, mel_bins), a spectrogram of
    ``seq_len`` frames. ``num_frames`` (optional) checks ``seq_len`` against the pipeline's audio length for that
    many video frames at 24 fps."""
    mel = _cfg(model, "mel_bins")
    if call == "encode":
        return {"x": TensorSpec((1, _cfg(model, "in_channels"), s["seq_len"], mel))}
    _check_length(model, s, audio_frames(s.get("num_frames", 0), FRAME_RATE, _cfg(model, "sample_rate"),
                                         _cfg(model, "mel_hop_length")), "audio latent length")
    return {"z": TensorSpec((1, _cfg(model, "latent_channels"), s["seq_len"], mel // AUDIO_DOWNSAMPLE))}


@input_builder("LTX2Vocoder", settings=("seq_len",), optional=("num_frames",))
def _ltx2_vocoder_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """The decoded mel spectrogram (1, 2, seq_len, 64) as ``LTX2Pipeline`` passes it (``time_last`` False): the
    stereo channels × 64 mel bins fold into ``in_channels``. ``num_frames`` (optional) checks ``seq_len`` against
    the pipeline's ``4·audio_num_frames − 3`` mel frames for that many video frames at 24 fps (the card's audio
    VAE: 16 kHz, hop 160)."""
    channels = _cfg(model, "in_channels")
    _check_length(model, s, max(AUDIO_DOWNSAMPLE * audio_frames(s.get("num_frames", 0), FRAME_RATE, 16000, 160)
                                - (AUDIO_DOWNSAMPLE - 1), 1), "mel length")
    return {"hidden_states": TensorSpec((1, 2, s["seq_len"], _div(channels, 2, "in_channels")))}


@input_builder("Gemma3ForConditionalGeneration", settings=("seq_len",))
def _gemma3_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """Token ids (1, seq_len) int64; ``attention_mask`` the constant None (see the module doc);
    ``output_hidden_states`` True, as ``_get_gemma_prompt_embeds`` asks (it only collects the layer outputs)."""
    return {"input_ids": TensorSpec((1, int(s["seq_len"])), torch.int64), "attention_mask": None,
            "output_hidden_states": _Value(True)}


@model_builder("LTX2LatentUpsamplerModel")
def _build_latent_upsampler(config_dir: Path) -> nn.Module:
    """Not exported at diffusers' top level: ``diffusers.pipelines.ltx2.latent_upsampler``'s class, on meta."""
    from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel

    with torch.device("meta"):
        return LTX2LatentUpsamplerModel.from_config(LTX2LatentUpsamplerModel.load_config(str(config_dir)))


@input_builder("LTX2LatentUpsamplerModel", settings=("height", "width", "num_frames"))
def _ltx2_latent_upsampler_inputs(model: nn.Module, call: str, s: Mapping[str, int]) -> dict[str, Any]:
    """As ``LTX2LatentUpsamplePipeline`` calls it: hidden_states (1, in_channels, T, h, w), the latent of a
    ``num_frames``-frame ``height × width`` video under the LTX-2 VAE (32× spatial, 8× temporal)."""
    frames, rows, cols = (s["num_frames"] - 1) // TEMPORAL + 1, _div(s["height"], SPATIAL, "height"), \
        _div(s["width"], SPATIAL, "width")
    return {"hidden_states": TensorSpec((1, _cfg(model, "in_channels"), frames, rows, cols))}
