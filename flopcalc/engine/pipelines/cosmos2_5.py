"""Cosmos 2.5 pipelines (diffusers ``pipelines/cosmos/``): ``Cosmos2_5_PredictBasePipeline``
(``pipeline_cosmos2_5_predict.py``: Text2World, Image2World, Video2World) and ``Cosmos2_5_TransferPipeline``
(``pipeline_cosmos2_5_transfer.py``: a ControlNet on a control video, generated in auto-regressive chunks).

Both encode the prompt with Qwen2.5-VL (``Qwen2_5_VLForConditionalGeneration``, called with
``output_hidden_states=True``: its ``lm_head`` runs on every token too) on ``max_sequence_length`` tokens (the chat
template padded to that length); the transformer projects the concatenated hidden states of every layer
(``crossattn_proj``). The denoiser gets a per-frame ``(B, 1, T, 1, 1)`` timestep (``cond_indicator``), so its time
embedder runs on each latent frame and its adaLN norms on every token. The ``CosmosSafetyChecker`` guardrail (prompt
and output checks, a separate package's models) is not a listed component and is not counted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.config import class_name_of
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.cosmos import GUARDRAIL_NOTE
from flopcalc.engine.pipelines.skyreels_v2 import vae_factors
from flopcalc.engine.pipelines.wan import _encode_runs, _vae_runs
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, NAMES, pipeline_option

PREDICT, TRANSFER = "Cosmos2_5_PredictBasePipeline", "Cosmos2_5_TransferPipeline"
#: ``Cosmos2_5_PredictBasePipeline.__call__`` defaults (pipeline_cosmos2_5_predict.py:546-568).
HEIGHT, WIDTH, NUM_FRAMES, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 704, 1280, 93, 36, 7.0, 512
#: ``Cosmos2_5_TransferPipeline.__call__`` defaults (pipeline_cosmos2_5_transfer.py:571-597): guidance 3.0, chunks of
#: 93 frames overlapping by ``num_ar_conditional_frames`` = 1. Its ``width`` defaults to the control video's aspect
#: (``int((height + 16) · w / h)`` of the first frame): 1280 for a 720×1280 control video.
TRANSFER_GUIDANCE, CHUNK_FRAMES, AR_CONDITIONAL_FRAMES = 3.0, 93, 1
SIZE_MULTIPLE = 16
#: Video2World's conditioning frames: ``4 · (num_latent_conditional_frames − 1) + 1`` with its default 2 (:733).
VIDEO_CONDITION_FRAMES = 5
WORLD_INPUTS = ("text", "image", "video")

pipeline_option("world_input", kind=NAMES,
                help="Cosmos 2.5 Predict and Helios: what the video is generated from: text (Text2World, the default), "
                     "image (Image2World) or video (Video2World, Cosmos 2.5 only); an image or video is VAE-encoded",
                refusal="it is not Cosmos 2.5 Predict or Helios (text / image / video world inputs)",
                examples=("image", "video", "text"))
pipeline_option("chunk_frames", kind=COUNT, bound=(4096, "frames"),
                help="Cosmos 2.5 Transfer: frames per auto-regressive chunk (num_frames_per_chunk, default 93)",
                refusal="it generates no auto-regressive chunks (Cosmos 2.5 Transfer's)", examples=("61", "93"))


def _world_input(s: Settings) -> str:
    value = s.world_input
    if value is None:
        return "text"
    if len(value) != 1 or value[0] not in WORLD_INPUTS:
        raise OptionError(f"--world-input is one of {', '.join(WORLD_INPUTS)}, got {', '.join(value)}")
    return value[0]


def _check_common(components: Mapping[str, Mapping[str, Any]], s: Settings, pipeline: str) -> None:
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {pipeline}: it generates from noise, conditioned on its "
                          "inputs, and every step runs")
    transformer = components.get("transformer")
    if transformer is not None:
        if int(transformer["patch_size"][0]) != 1:
            raise ConfigError(f"transformer/config.json: patch_size {list(transformer['patch_size'])}: {pipeline}'s "
                              "per-frame timestep assumes one latent frame per token (p_t 1; the real call fails)")
        if not transformer["use_crossattn_projection"]:
            raise ConfigError(f"transformer/config.json: use_crossattn_projection is off: {pipeline} hands the "
                              "transformer Qwen2.5-VL's concatenated hidden states, which a Cosmos 2.5 transformer "
                              "projects (crossattn_proj); a Predict2 transformer runs under Cosmos2VideoToWorldPipeline")
        encoder = components.get("text_encoder")
        if encoder is not None:
            width = _text_states_width(encoder)
            if width is not None and width != transformer["crossattn_proj_in_channels"]:
                raise ConfigError(f"text_encoder and transformer disagree: the pipeline concatenates the text "
                                  f"encoder's {width} hidden-state channels (every layer's), the transformer's "
                                  f"crossattn_proj reads {transformer['crossattn_proj_in_channels']} (the real call "
                                  "fails)")
    if s.batch_size > 1 and s.num_images_per_prompt > 1:
        raise OptionError(f"{pipeline} builds its timestep for the prompt batch (sigma_t.view(batch_size, ...)), "
                          "which does not broadcast over num_videos_per_prompt > 1 with several prompts (the real "
                          "call fails); use one of --batch-size or --num-images-per-prompt")


def _text_states_width(encoder: Mapping[str, Any]) -> int | None:
    """``num_hidden_layers × hidden_size`` of the Qwen2.5-VL text model: ``_get_prompt_embeds`` concatenates the
    normalised ``hidden_states[1:]`` (one per layer, :312-318). None for another encoder class (not checked)."""
    from flopcalc.engine.architectures.llm_encoders import _qwen2_5_vl_kaplan_layers  # (layers, hidden)

    if class_name_of(encoder) != "Qwen2_5_VLForConditionalGeneration":
        return None
    layers, hidden = _qwen2_5_vl_kaplan_layers(encoder)
    return layers * hidden


def _settings(components, s: Settings, pipeline: str, guidance: float, frames: int) -> tuple[Settings, list[str], int]:
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or frames,
                steps=s.steps or STEPS, guidance_scale=guidance if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    expected = ["text_encoder", "transformer", "vae"] + (["controlnet"] if pipeline == TRANSFER else [])
    notes = list(missing_notes(components, expected)) + [GUARDRAIL_NOTE]
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{pipeline} height and width")
    passes = cfg_passes(s, s.guidance_scale > 1)
    return s, notes, passes


def _text(components, s: Settings, passes: int) -> list[ComponentRun]:
    return text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))


def _denoiser(components, name: str, s: Settings, f: int, latent_frames: Any, runs: Any, why: str,
              image_tokens: Any = None) -> list[ComponentRun]:
    if name not in components:
        return []
    shape = RunShape(latent_height=s.height // f, latent_width=s.width // f, text_len=s.max_sequence_length,
                     latent_frames=latent_frames, timestep_tokens=latent_frames, image_tokens=image_tokens)
    return [ComponentRun(name, component_class(components, name) or "?", "forward", "denoiser", shape, runs, why)]


@register_pipeline(PREDICT, guidance="separate", denoisers=("CosmosTransformer3DModel",),
                   when=lambda cfg: bool(cfg.get("use_crossattn_projection")) and not cfg.get("img_context_dim_in"),
                   options=("max_sequence_length", "num_frames", "vae_tiling", "world_input"))
def cosmos2_5_predict_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                               index: Mapping[str, Any] | None = None) -> Plan:
    """``Cosmos2_5_PredictBasePipeline.__call__`` (pipeline_cosmos2_5_predict.py:546-870): 704×1280, 93 frames
    (``(93 − 1) // 4 + 1 = 24`` latent frames, not rounded), 36 steps, ``guidance_scale`` 7.0, 512 Qwen2.5-VL tokens.

    * ``world_input`` text (no image or video, the default): no VAE encode (the zero video is never encoded,
      ``num_frames_in`` 0, :437-449). image: the image followed by ``num_frames − 1`` zero frames, VAE-encoded once
      (:710-716, 466-470). video (one prompt only, :720): its last 5 frames (``num_latent_conditional_frames`` 2) padded to
      ``num_frames`` (at least 5) with the last one, VAE-encoded once (:733-747).
    * Each step: the conditional forward and, under guidance, the unconditional one (:798, :810), each with the
      condition mask channel, the padding mask and a per-frame timestep.
    * ``vae.decode`` once per video (:847)."""
    _check_common(components, s, PREDICT)
    mode = _world_input(s)
    f, t = vae_factors(components)
    s, notes, passes = _settings(components, s, PREDICT, GUIDANCE, NUM_FRAMES)
    if mode == "video" and s.batch_size != 1:
        raise OptionError(f"{PREDICT} Video2World takes one prompt (batch_size must be 1 for video input, as "
                          "diffusers raises)")
    if mode == "video" and s.num_frames < VIDEO_CONDITION_FRAMES:
        raise OptionError(f"{PREDICT} Video2World keeps the input's last {VIDEO_CONDITION_FRAMES} frames "
                          "(num_latent_conditional_frames 2) and pads them up to num_frames, never down: with "
                          f"num_frames {s.num_frames} its latent does not match the noise's (the real call fails)")
    latent_frames = (s.num_frames - 1) // t + 1
    runs = _text(components, s, passes)
    if mode != "text" and "vae" in components:
        encode = _encode_runs(component_class(components, "vae") or "?", components["vae"],
                              replace(s, batch_size=1), bool(s.vae_tiling))
        runs += [replace(r, why=f"the conditioning {mode} padded to {s.num_frames} frames, once") for r in encode]
        notes.append(f"{mode.capitalize()}2World: the {mode} padded to {s.num_frames} frames is VAE-encoded once")
    else:
        notes.append("Text2World: no conditioning input, nothing is VAE-encoded")
    videos = s.batch_size * s.num_images_per_prompt
    runs += _denoiser(components, "transformer", s, f, latent_frames, s.steps * passes * videos,
                      f"{s.steps} steps × {passes} pass(es) × {videos} video(s)")
    notes.append(f"one timestep per latent frame ({latent_frames}): the time embedder runs on each and the adaLN "
                 "norms on every token")
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan(PREDICT, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


def transfer_chunks(num_frames: int, chunk_frames: int, overlap: int = AR_CONDITIONAL_FRAMES) -> int:
    """``chunk_idxs`` of ``Cosmos2_5_TransferPipeline.__call__`` (:816-821): one chunk per start in
    ``range(0, num_frames − overlap, chunk_frames − overlap)``."""
    return len(range(0, num_frames - overlap, chunk_frames - overlap))


def _chunk_frames(components: Mapping[str, Mapping[str, Any]], s: Settings, notes: list[str]) -> int:
    """``check_inputs`` (:518-541): at least ``t + 1`` frames per chunk (fewer are raised to that, with a warning),
    at most the RoPE table's ``max(max_size // patch_size)``, more than the overlap."""
    frames = s.chunk_frames or CHUNK_FRAMES
    _, t = vae_factors(components)
    if frames < t + 1:
        notes.append(f"chunk_frames {frames} is raised to {t + 1} (num_frames_per_chunk must exceed the VAE's temporal "
                     f"factor), as {TRANSFER} does with a warning")
        frames = t + 1
    transformer = components.get("transformer")
    if transformer is not None:
        most = max(int(m) // int(p) for m, p in zip(transformer["max_size"], transformer["patch_size"]))
        if frames > most:
            raise OptionError(f"chunk_frames {frames} is too large for the transformer's RoPE (max_size / patch_size: "
                              f"{most}), as {TRANSFER} raises")
    return frames


@register_pipeline(TRANSFER, guidance="separate", denoisers=("CosmosControlNetModel",), component="controlnet",
                   options=("max_sequence_length", "num_frames", "vae_tiling", "chunk_frames"))
def cosmos2_5_transfer_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                index: Mapping[str, Any] | None = None) -> Plan:
    """``Cosmos2_5_TransferPipeline.__call__`` (pipeline_cosmos2_5_transfer.py:571-1024): height 704, width 1280 (a
    720×1280 control video's), ``num_frames`` the control video's frames (93 here by default: one chunk), 36 steps,
    ``guidance_scale`` 3.0, 512 Qwen2.5-VL tokens; one ``num_videos_per_prompt``.

    * Chunks: ``range(0, F − 1, K − 1)`` with ``K`` = ``num_frames_per_chunk`` (93) and one frame of overlap
      (``num_ar_conditional_frames``). Each chunk VAE-encodes its conditioning video (zeros, then the last frame of
      the previous chunk), ``K`` frames, once per prompt (:882-898, 406-421), and the control video's ``K``-frame
      slice once per prompt (:904-916); then every step runs the ControlNet and the transformer once per guidance
      pass (:934-979), and the chunk's latent (``(K − 1) // 4 + 1`` frames) is decoded once (:994).
    * Both the ControlNet and the transformer get a per-frame timestep and the (text, image context) pair: the
      image context is ``img_context_num_tokens`` zero tokens of ``img_context_dim_in`` (:790-806), which both
      project and attend to.

    The chunk count steps with ``num_frames``: no closed-form law (a symbolic law is refused)."""
    _check_common(components, s, TRANSFER)
    if s.num_images_per_prompt != 1:
        raise OptionError(f"{TRANSFER} encodes its conditioning and control videos for the prompt batch only, which "
                          "flopcalc does not plan with num_videos_per_prompt > 1; use --batch-size")
    if s.symbolic:
        raise FlopcalcError(f"{TRANSFER} generates ⌈(F − 1) / (K − 1)⌉ auto-regressive chunks: a step function of "
                            "num_frames with no closed-form law; use the numeric estimate")
    f, t = vae_factors(components)
    s, notes, passes = _settings(components, s, TRANSFER, TRANSFER_GUIDANCE, CHUNK_FRAMES)
    chunk = _chunk_frames(components, s, notes)
    chunks = transfer_chunks(s.num_frames, chunk)
    if chunks == 0:
        raise OptionError(f"{TRANSFER} with {s.num_frames} control frame(s) makes no chunk (it needs more frames than "
                          f"the {AR_CONDITIONAL_FRAMES} of overlap; the real call fails)")
    latent_frames = (chunk - 1) // t + 1
    notes.append(f"{chunks} chunk(s) of {chunk} frames ({latent_frames} latent frames) for {s.num_frames} control "
                 f"frame(s), one frame of overlap")
    runs = _text(components, s, passes)
    if "vae" in components:
        cls = component_class(components, "vae") or "?"
        encode = _encode_runs(cls, components["vae"],
                              replace(s, batch_size=2 * s.batch_size * chunks, num_frames=chunk), bool(s.vae_tiling))
        runs += [replace(r, why=f"{chunks} chunk(s) × {s.batch_size} prompt(s) × 2: the conditioning video and the "
                                "control video") for r in encode]
    transformer = components.get("transformer")
    images = None
    if transformer is not None and transformer["img_context_dim_in"]:
        images = transformer["img_context_num_tokens"]
        notes.append(f"image context: {images} zero tokens, projected and attended to by the transformer and the "
                     "ControlNet")
    forwards = chunks * s.steps * passes * s.batch_size
    why = f"{chunks} chunk(s) × {s.steps} steps × {passes} pass(es) × {s.batch_size} video(s)"
    controlnet = components.get("controlnet")
    if controlnet is not None and transformer is None and controlnet["img_context_dim_in"]:
        raise FlopcalcError(f"{TRANSFER} takes the image-context length from transformer.config.img_context_num_tokens: "
                            "give the transformer's config with the ControlNet's")
    if controlnet is not None and transformer is not None and \
            bool(controlnet["img_context_dim_in"]) != bool(transformer["img_context_dim_in"]):
        raise ConfigError("controlnet and transformer disagree on img_context_dim_in: the pipeline hands both the "
                          "context the transformer's config asks for (the real call fails)")
    runs += _denoiser(components, "controlnet", s, f, latent_frames, forwards, why, images)
    runs += _denoiser(components, "transformer", s, f, latent_frames, forwards, why, images)
    notes.append(f"one timestep per latent frame ({latent_frames}): the time embedders run on each and the adaLN "
                 "norms on every token")
    vae_runs, vae_notes = _vae_runs(components, s, f, s.batch_size * chunks, latent_frames, bool(s.vae_tiling))
    return Plan(TRANSFER, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))
