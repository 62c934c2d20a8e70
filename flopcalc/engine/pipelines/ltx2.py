"""LTX-2 text-to-video-and-audio (diffusers ``pipelines/ltx2/pipeline_ltx2.py``), and the pieces its sibling
pipelines share: the guidance passes of one denoising step, the audio length, the decode of video and audio.

``LTX2Pipeline.__call__`` (pipeline_ltx2.py:1025) at its defaults: 512×768, 121 frames (no ``duration_head``), 24
fps, 30 steps; Gemma-3 encodes the prompt (and, under classifier-free guidance, the negative prompt, "" unless
given) on ``max_sequence_length`` 1024 left-padded tokens; the connectors turn the stacked hidden states into the
video and audio prompt streams (one run per guidance row); per step the transformer runs

* the classifier-free-guidance call on the doubled batch, when ``guidance_scale > 1`` or ``audio_guidance_scale >
  1`` (``do_classifier_free_guidance``: the audio scale, 7.0 by default, keeps it on at ``guidance_scale`` 1);
* the spatio-temporal-guidance (STG) call on the positive rows, when ``stg_scale > 0`` or ``audio_stg_scale > 0``
  (defaults 1.0, blocks ``[28]``): with the config's ``perturbed_attn`` those blocks' self-attentions take the
  value path, without it (the LTX-2 card) the call is a plain forward;
* the modality-isolation call on the positive rows, when ``modality_scale > 1`` or ``audio_modality_scale > 1``
  (defaults 3.0): no audio-video cross-attention (``isolate_modalities``);

then the video VAE decodes the latent (untiled, one call; with ``vae_tiling``, ``pipe.vae.enable_tiling()``, in
overlapping 512-px spatial tiles every 448, each over all latent frames, as LTX-Video's VAE), the audio VAE decodes
the audio latent and the vocoder turns the mel spectrogram into the waveform. Each audio scale defaults to the video
one when set to 0 / None (``audio_x = audio_x or x``, :1159-1162).

The audio latent has ``round(num_frames / frame_rate · sample_rate / hop / 4)`` frames (:1312-1316), one token
each; the decoded spectrogram ``4L − 3`` mel frames. Nothing here has a closed-form law: the audio length is a
rounding of ``F / frame_rate`` and the prompt length must be a multiple of the connectors' registers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from flopcalc.engine.architectures.autoencoder_kl_ltx2 import spatial_compression, temporal_compression
from flopcalc.engine.architectures.autoencoder_kl_ltx2_audio import LATENT_DOWNSAMPLE_FACTOR
from flopcalc.engine.architectures.ltx2 import LTX2Pass, register_multiple
from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import ltx
from flopcalc.engine.pipelines.base import (
    ComponentRun, Plan, Settings, check_divisible, component_class, config_value, missing_notes, register_pipeline,
)
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import NAMES, SCALE, pipeline_option

NAME = "LTX2Pipeline"
NO_LAW = ("LTX-2 has no closed-form law: the audio stream's length is round(num_frames / frame_rate · 25) latent "
          "frames and the prompt length must be a multiple of the connectors' registers; use the numeric estimate")

_WHY = "it has no LTX-2 audio-video guidance"
pipeline_option("audio_guidance_scale", kind=SCALE, refusal=_WHY,
                help="LTX-2: classifier-free guidance scale of the audio stream (default 7.0; 0: the video scale)")
pipeline_option("stg_scale", kind=SCALE, refusal=_WHY,
                help="LTX-2: spatio-temporal guidance scale of the video stream (default 1.0; 0: off)")
pipeline_option("audio_stg_scale", kind=SCALE, refusal=_WHY,
                help="LTX-2: spatio-temporal guidance scale of the audio stream (default 1.0; 0: the video scale)")
pipeline_option("modality_scale", kind=SCALE, refusal=_WHY,
                help="LTX-2: modality-isolation guidance scale of the video stream (default 3.0; 1: off)")
pipeline_option("audio_modality_scale", kind=SCALE, refusal=_WHY,
                help="LTX-2: modality-isolation guidance scale of the audio stream (default 3.0; 0: the video scale)")
pipeline_option("stg_blocks", kind=NAMES, refusal=_WHY,
                help="LTX-2: transformer block indices spatio-temporal guidance perturbs (default 28)",
                examples=("10", "20"))
pipeline_option("frame_rate", kind=SCALE, refusal="its __call__ takes no frame_rate that changes the count",
                help="LTX-2: frames per second (default 24): sets the audio stream's length")

#: ``LTX2Pipeline.__call__`` keyword defaults (pipeline_ltx2.py:1025-1066).
DEFAULT_HEIGHT, DEFAULT_WIDTH, DEFAULT_FRAMES, DEFAULT_FRAME_RATE = 512, 768, 121, 24.0
DEFAULT_STEPS, DEFAULT_TEXT_LEN = 30, 1024
DEFAULT_GUIDANCE, DEFAULT_AUDIO_GUIDANCE = 3.0, 7.0
DEFAULT_STG, DEFAULT_AUDIO_STG, DEFAULT_STG_BLOCKS = 1.0, 1.0, (28,)
DEFAULT_MODALITY, DEFAULT_AUDIO_MODALITY = 3.0, 3.0
#: The video VAE every LTX-2 pipeline's ``__init__`` takes (pipeline_ltx2.py, ``vae: AutoencoderKLLTX2Video``).
VIDEO_VAE = "AutoencoderKLLTX2Video"
#: ``check_inputs``: height and width divisible by 32 (:420).
SIZE_MULTIPLE = 32
#: ``LTX2Pipeline.__init__``'s fallbacks without a VAE / an audio VAE (:286-313).
FALLBACK_SPATIAL, FALLBACK_TEMPORAL = 32, 8
FALLBACK_SAMPLE_RATE, FALLBACK_HOP, FALLBACK_MEL_BINS = 16000, 160, 64


@dataclass(frozen=True)
class Guidance:
    """The guidance one LTX-2 denoising step runs, resolved as ``__call__`` resolves it."""

    cfg: bool
    stg: bool
    modality: bool
    stg_blocks: tuple[int, ...]

    @property
    def passes(self) -> int:
        """Transformer rows per step and video: 2 (or 1) for the CFG call, 1 for STG, 1 for isolation."""
        return (2 if self.cfg else 1) + self.stg + self.modality


def guidance(s: Settings, defaults: Mapping[str, Any] | None = None, *, audio: bool = True) -> tuple[Settings, Guidance]:
    """The scales ``__call__`` runs with (``defaults`` overrides the LTX2Pipeline ones, for pipelines with other
    defaults), the settings with them resolved, and which passes run. ``audio`` False: a pipeline with one scale per
    guidance for both streams (``LTX2HDRPipeline``): the audio scales are the video ones and are not options."""
    d = {"guidance_scale": DEFAULT_GUIDANCE, "audio_guidance_scale": DEFAULT_AUDIO_GUIDANCE, "stg_scale": DEFAULT_STG,
         "audio_stg_scale": DEFAULT_AUDIO_STG, "modality_scale": DEFAULT_MODALITY,
         "audio_modality_scale": DEFAULT_AUDIO_MODALITY, "stg_blocks": DEFAULT_STG_BLOCKS, **(defaults or {})}
    scale = d["guidance_scale"] if s.guidance_scale is None else s.guidance_scale
    stg = d["stg_scale"] if s.stg_scale is None else s.stg_scale
    modality = d["modality_scale"] if s.modality_scale is None else s.modality_scale
    # ``audio_x = audio_x or x`` (:1159-1162): an unset or zero audio scale takes the video one
    audio_scale = (d["audio_guidance_scale"] if s.audio_guidance_scale is None else s.audio_guidance_scale) or scale
    audio_stg = (d["audio_stg_scale"] if s.audio_stg_scale is None else s.audio_stg_scale) or stg
    audio_modality = (d["audio_modality_scale"] if s.audio_modality_scale is None else s.audio_modality_scale) \
        or modality
    if s.stg_blocks is not None:
        if not all(b.isdigit() for b in s.stg_blocks):
            raise OptionError(f"--stg-blocks takes transformer block indices (0, 1, ...), got {list(s.stg_blocks)}")
        blocks = tuple(int(b) for b in s.stg_blocks)
    else:
        blocks = tuple(d["stg_blocks"] or ())
    g = Guidance(cfg=scale > 1 or audio_scale > 1, stg=stg > 0 or audio_stg > 0, modality=modality > 1 or audio_modality > 1,
                 stg_blocks=blocks)
    if g.stg and not blocks:  # check_inputs (:476-480)
        raise OptionError("spatio-temporal guidance is on (stg_scale or audio_stg_scale > 0) but no STG blocks are "
                          "given: pass --stg-blocks, or --stg-scale 0")
    resolved = {"stg_scale": stg, "modality_scale": modality, "stg_blocks": tuple(str(b) for b in blocks) or None}
    if audio:
        resolved.update(audio_guidance_scale=audio_scale, audio_stg_scale=audio_stg, audio_modality_scale=audio_modality)
    return replace(s, guidance_scale=scale).with_options(**resolved), g


def compression(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """``(vae_spatial_compression_ratio, vae_temporal_compression_ratio)`` from the video VAE (32, 8 without)."""
    vae = components.get("vae")
    if vae is None:
        return FALLBACK_SPATIAL, FALLBACK_TEMPORAL
    found = component_class(components, "vae")
    if found != VIDEO_VAE:
        raise FlopcalcError(f"an LTX-2 pipeline needs vae {VIDEO_VAE}, this folder's is {found}: check "
                            "model_index.json's _class_name")
    return spatial_compression(vae), temporal_compression(vae)


def check_frames(num_frames: int, temporal: int, patch_t: int = 1, what: str = "LTX-2") -> None:
    """``num_frames − 1`` must divide by the temporal compression (and the latent frames by ``patch_size_t``): the
    pipeline floors other counts and returns ``8(T − 1) + 1`` frames; the error names the nearest valid counts."""
    step = temporal * patch_t
    first = 1 + temporal * (patch_t - 1)
    if num_frames >= first and (num_frames - first) % step == 0:
        return
    lo = first + (num_frames - first) // step * step
    options = [o for o in (lo, lo + step) if o >= first]
    raise ResolutionError(f"{what} num_frames must be {temporal}k + 1 (the VAE compresses time {temporal}×"
                          + (f", the transformer patches {patch_t} latent frames" if patch_t > 1 else "")
                          + f"): num_frames {num_frames} → nearest valid: {' or '.join(map(str, options))}.")


def check_text_len(components: Mapping[str, Mapping[str, Any]], text_len: int) -> None:
    """The connectors replace the padding with their learnable registers and need the prompt length to divide by
    their count (connectors.py:269)."""
    if "connectors" not in components:
        return
    multiple = register_multiple(components["connectors"])
    if text_len % multiple:
        lo = text_len // multiple * multiple
        options = [o for o in (lo, lo + multiple) if o > 0]
        raise ResolutionError(f"LTX-2's connectors need max_sequence_length to be a multiple of their {multiple} "
                              f"learnable registers: {text_len} → nearest valid: {' or '.join(map(str, options))}.")


def audio_settings(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int, int]:
    """``(sample_rate, mel_hop_length, mel_bins)`` of the audio VAE (the pipeline's fallbacks without one)."""
    audio = components.get("audio_vae")
    if audio is None:
        return FALLBACK_SAMPLE_RATE, FALLBACK_HOP, FALLBACK_MEL_BINS
    if audio["mel_bins"] is None:
        raise FlopcalcError("audio_vae: LTX2Pipeline reads audio_vae.config.mel_bins; a config with mel_bins null "
                            "cannot run")
    return audio["sample_rate"], audio["mel_hop_length"], audio["mel_bins"]


def audio_frames(components: Mapping[str, Mapping[str, Any]], num_frames: int, frame_rate: float) -> int:
    """``audio_num_frames = round(num_frames / frame_rate · sample_rate / hop / 4)`` (pipeline_ltx2.py:1312-1316)."""
    rate, hop, _ = audio_settings(components)
    return round(num_frames / frame_rate * (rate / hop / float(LATENT_DOWNSAMPLE_FACTOR)))


def mel_frames(latent_frames: int) -> int:
    """``LTX2AudioDecoder``'s ``target_frames``: ``max(4L − 3, 1)`` mel frames (autoencoder_kl_ltx2_audio.py:
    558-561; any ``causality_axis`` string, ``"none"`` too, is not None)."""
    return max(latent_frames * LATENT_DOWNSAMPLE_FACTOR - (LATENT_DOWNSAMPLE_FACTOR - 1), 1)


def frame_rate(s: Settings) -> float:
    rate = DEFAULT_FRAME_RATE if s.frame_rate is None else float(s.frame_rate)
    if rate <= 0:
        raise OptionError(f"--frame-rate must be > 0, got {s.frame_rate}")
    return rate


def resolve(components: Mapping[str, Mapping[str, Any]], s: Settings, *, pipeline: str = NAME,
            height: int = DEFAULT_HEIGHT, width: int = DEFAULT_WIDTH, frames: int = DEFAULT_FRAMES,
            steps: int = DEFAULT_STEPS, text_len: int = DEFAULT_TEXT_LEN) -> Settings:
    """The settings with ``__call__``'s defaults, checked as the pipeline checks them (sizes by 32, frames
    8k + 1, the prompt length by the registers); ``num_frames`` None with a ``duration_head`` is refused."""
    if s.symbolic:
        raise FlopcalcError(NO_LAW)
    if s.num_frames is None and "duration_head" in components:
        raise OptionError(f"{pipeline}: this folder has a duration_head, which predicts num_frames from the prompt "
                          "when none is given: pass --num-frames")
    s = replace(s, height=s.height or height, width=s.width or width, num_frames=s.num_frames or frames,
                steps=s.steps or steps, max_sequence_length=s.max_sequence_length or text_len)
    spatial, temporal = compression(components)
    patch = config_value(components, "transformer", "patch_size", 1) or 1
    patch_t = config_value(components, "transformer", "patch_size_t", 1) or 1
    check_divisible(s.height, s.width, math.lcm(SIZE_MULTIPLE, spatial * patch),
                    "LTX-2 height and width (check_inputs: 32; the VAE's spatial compression × patch size)")
    check_frames(s.num_frames, temporal, patch_t)
    check_text_len(components, s.max_sequence_length)
    return s.with_options(frame_rate=frame_rate(s))


def text_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, rows: int) -> list[ComponentRun]:
    """Gemma-3 on each prompt (``rows``: 2 under CFG, prompt and negative prompt) and the connectors on each
    guidance row of every video (``prompt_embeds`` repeated per video before them)."""
    runs = []
    prompts = s.batch_size * rows
    if "text_encoder" in components:
        runs.append(ComponentRun("text_encoder", component_class(components, "text_encoder") or "?", "forward",
                                 "text_encoder", RunShape(seq_len=s.max_sequence_length), prompts,
                                 f"{s.batch_size} prompt(s)" + (" + negative" if rows == 2 else "")))
    if "connectors" in components:
        videos = s.batch_size * s.num_images_per_prompt
        runs.append(ComponentRun("connectors", component_class(components, "connectors") or "?", "forward",
                                 "text_encoder", RunShape(seq_len=s.max_sequence_length), videos * rows,
                                 f"{videos} video(s) × {rows} guidance row(s)"))
    return runs


def transformer_runs(components: Mapping[str, Mapping[str, Any]], s: Settings, g: Guidance, shape: RunShape,
                     steps: int) -> list[ComponentRun]:
    """The transformer's calls of every step, one run per kind of call: the CFG (or single) call's rows, the STG
    call (a plain forward unless ``perturbed_attn``: then its own run, the STG blocks' self-attentions on the value
    path), the modality-isolation call; consecutive runs of one component, so the report shows one row of pieces."""
    if "transformer" not in components:
        return []
    cfg = components["transformer"]
    cls = component_class(components, "transformer") or "?"
    videos = s.batch_size * s.num_images_per_prompt
    rows = 2 if g.cfg else 1
    perturbed = tuple(b for b in g.stg_blocks if b < cfg["num_layers"]) if cfg["perturbed_attn"] else ()
    plain_rows = rows + (1 if g.stg and not perturbed else 0)
    what = ("CFG" if g.cfg else "conditional") + (" + STG (a plain forward: no perturbed_attn)" if g.stg and not perturbed
                                                  else "")
    runs = [ComponentRun("transformer", cls, "forward", "denoiser", replace(shape, perturbed=LTX2Pass()),
                         steps * plain_rows * videos, f"{steps} steps × {plain_rows} row(s) ({what}) × {videos} video(s)")]
    if g.stg and perturbed:
        runs.append(ComponentRun("transformer", cls, "forward", "denoiser",
                                 replace(shape, perturbed=LTX2Pass(stg_blocks=perturbed)), steps * videos,
                                 f"{steps} STG calls (blocks {', '.join(map(str, perturbed))} on the value path) × "
                                 f"{videos} video(s)"))
    if g.modality:
        runs.append(ComponentRun("transformer", cls, "forward", "denoiser",
                                 replace(shape, perturbed=LTX2Pass(isolate=True)), steps * videos,
                                 f"{steps} modality-isolation calls × {videos} video(s)"))
    return runs


def decode_runs(components: Mapping[str, Mapping[str, Any]], videos: int, latent: tuple[int, int, int],
                audio_latent: int | None, *, tiled: bool = False) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` of each video latent (pipeline_ltx2.py:1659; untiled: one call over all latent frames;
    ``tiled``, the VAE's ``enable_tiling()``: one decoder call per overlapping spatial tile, each over all latent
    frames, as LTX-Video's VAE tiles: :func:`flopcalc.engine.pipelines.ltx.decode_runs`), then with an audio latent
    ``audio_vae.decode`` and the ``vocoder`` on each; with the VAE's plan note."""
    runs, notes = ltx.decode_runs(components, videos, latent, compression(components)[0], tiled)
    if audio_latent is not None:
        if "audio_vae" in components:
            runs.append(ComponentRun("audio_vae", component_class(components, "audio_vae") or "?", "decode",
                                     "vae_decoder", RunShape(seq_len=audio_latent), videos,
                                     f"1 call × {videos} audio latent(s)"))
        if "vocoder" in components:
            runs.append(ComponentRun("vocoder", component_class(components, "vocoder") or "?", "forward", "vocoder",
                                     RunShape(seq_len=mel_frames(audio_latent)), videos,
                                     f"1 call × {videos} spectrogram(s)"))
    return runs, notes


EXPECTED = ["text_encoder", "connectors", "transformer", "vae", "audio_vae", "vocoder"]


def base_plan(components: Mapping[str, Mapping[str, Any]], s: Settings, *, pipeline: str,
              guidance_defaults: Mapping[str, Any] | None = None, audio_out: bool = True,
              audio_scales: bool = True, **defaults: Any) -> tuple[Plan, Guidance]:
    """``LTX2Pipeline``'s plan under ``pipeline``'s defaults: what the text-to-video call runs (``audio_out`` False:
    a video-only pipeline, which decodes no audio; ``audio_scales``: see :func:`guidance`)."""
    s = resolve(components, s, pipeline=pipeline, **defaults)
    s, g = guidance(s, guidance_defaults, audio=audio_scales)
    spatial, temporal = compression(components)
    latent = ((s.num_frames - 1) // temporal + 1, s.height // spatial, s.width // spatial)
    audio = audio_frames(components, s.num_frames, float(s.frame_rate))
    shape = RunShape(latent_height=latent[1], latent_width=latent[2], latent_frames=latent[0],
                     text_len=s.max_sequence_length, seq_len=audio)
    rows = 2 if g.cfg else 1
    runs = text_runs(components, s, rows) + transformer_runs(components, s, g, shape, s.steps)
    decodes, decode_notes = decode_runs(components, s.batch_size * s.num_images_per_prompt, latent,
                                        audio if audio_out else None, tiled=bool(s.vae_tiling))
    runs += decodes
    expected = EXPECTED if audio_out else [c for c in EXPECTED if c not in ("audio_vae", "vocoder")]
    notes = [*missing_notes(components, expected),
             f"audio: {audio} latent frame(s) (round({s.num_frames} / {s.frame_rate:g} fps · 25)), one token each; "
             + (f"the vocoder turns {mel_frames(audio)} mel frames into the waveform" if audio_out else
                "a video-only pipeline: the audio is neither decoded nor vocoded"),
             f"guidance per step: {'CFG on a doubled batch' if g.cfg else 'no CFG'}"
             + (f", STG (blocks {', '.join(map(str, g.stg_blocks))})" if g.stg else "")
             + (", modality isolation" if g.modality else "") + f": {g.passes} transformer row(s) per video",
             *decode_notes]
    return Plan(pipeline, s, g.passes, tuple(runs), tuple(notes)), g


#: The options every LTX-2 generation pipeline applies.
LTX2_OPTIONS = ("max_sequence_length", "num_frames", "audio_guidance_scale", "stg_scale", "audio_stg_scale",
                "modality_scale", "audio_modality_scale", "stg_blocks", "frame_rate")


@register_pipeline(NAME, denoisers=("LTX2VideoTransformer3DModel",), options=(*LTX2_OPTIONS, "vae_tiling"))
def ltx2_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                  index: Mapping[str, Any] | None = None) -> Plan:
    """``LTX2Pipeline.__call__`` (see the module doc): 512×768, 121 frames at 24 fps, 30 steps, CFG (3.0 video,
    7.0 audio) + STG (1.0, block 28) + modality isolation (3.0) per step, Gemma-3 and the connectors on 1024
    tokens, the video VAE (tiled with ``vae_tiling``), audio VAE and vocoder decodes. It takes no ``strength``."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {NAME}: it generates video and audio from noise (no "
                          "video-to-video)")
    plan, _ = base_plan(components, s, pipeline=NAME)
    return plan
