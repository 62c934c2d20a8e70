"""Cosmos Predict2 text-to-image (diffusers ``pipelines/cosmos/pipeline_cosmos2_text2image.py``,
``Cosmos2TextToImagePipeline``): T5 (``T5EncoderModel``), ``CosmosTransformer3DModel`` and the Wan 2.1 VAE
(``AutoencoderKLWan``, decoded as :mod:`flopcalc.engine.pipelines.wan` counts it) on a one-frame latent. The
``CosmosSafetyChecker`` guardrail the pipeline runs (text and output checks, a separate package's models) is not
a listed component and is not counted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.pipelines.base import (
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.skyreels_v2 import encode_once, vae_factors
from flopcalc.engine.pipelines.wan import _vae_runs

#: ``Cosmos2TextToImagePipeline.__call__`` defaults (pipeline_cosmos2_text2image.py:455-472).
HEIGHT, WIDTH, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 768, 1360, 35, 7.0, 512
#: ``check_inputs`` (line 375): height and width must divide by 16.
SIZE_MULTIPLE = 16
GUARDRAIL_NOTE = ("the CosmosSafetyChecker guardrail (prompt and output checks) is not a listed component and is not "
                  "counted")


def refuse_cosmos2_5(components: Mapping[str, Mapping[str, Any]], pipeline: str) -> None:
    """A Cosmos 2.5 transformer (``use_crossattn_projection``: it reads Qwen2.5-VL's concatenated hidden states,
    not T5's; ``img_context_dim_in``: a (text, image) context) cannot run under the Predict2 pipelines."""
    transformer = components.get("transformer")
    if transformer is not None and (transformer["use_crossattn_projection"] or transformer["img_context_dim_in"]):
        raise ConfigError(f"transformer/config.json: a Cosmos 2.5 transformer (use_crossattn_projection / "
                          f"img_context_dim_in) cannot run under {pipeline}, whose T5 states it would project from "
                          "the wrong width (the real call fails); it runs under Cosmos2_5_PredictBasePipeline / "
                          "Cosmos2_5_TransferPipeline")


@register_pipeline("Cosmos2TextToImagePipeline", guidance="separate", denoisers=("CosmosTransformer3DModel",),
                   when=lambda cfg: not cfg.get("use_crossattn_projection") and not cfg.get("img_context_dim_in"),
                   options=("max_sequence_length",))
def cosmos2_text_to_image_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``Cosmos2TextToImagePipeline.__call__`` (pipeline_cosmos2_text2image.py:455-686): 768×1360, 35 steps
    (``sigmas = linspace(0, 1, 35)``: 35 timesteps), ``guidance_scale`` 7.0, 512 T5 tokens per prompt (padded to
    ``max_length``; padding counted in full), ``num_frames`` 1: a one-frame latent ``H/8 × W/8``.

    * Under guidance (``guidance_scale > 1``) the negative prompt ("" by default) is encoded too and the
      transformer runs twice per step (lines 579 and 589), each with a 1-D timestep (one per sample) and the
      padding mask as an extra channel.
    * ``vae.decode`` once per image on the one-frame latent (line 630).
    * The VAE factors are ``2 ** len(temperal_downsample)`` and ``2 ** sum(...)`` (line 194)."""
    name = "Cosmos2TextToImagePipeline"
    refuse_cosmos2_5(components, name)
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: it generates from noise")
    f, _ = vae_factors(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, steps=s.steps or STEPS,
                guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"])) + [GUARDRAIL_NOTE]
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{name} height and width")
    passes = cfg_passes(s, s.guidance_scale > 1)
    if s.negative_prompt and s.guidance_scale <= 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes)  # one latent frame
    images = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, images, 1, False)
    return Plan(name, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


#: ``Cosmos2VideoToWorldPipeline.__call__`` defaults (pipeline_cosmos2_video2world.py:515-538).
V2W_HEIGHT, V2W_WIDTH, V2W_NUM_FRAMES = 704, 1280, 93


@register_pipeline("Cosmos2VideoToWorldPipeline", guidance="separate", options=("max_sequence_length", "num_frames", "vae_tiling"))
def cosmos2_video_to_world_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                    index: Mapping[str, Any] | None = None) -> Plan:
    """``Cosmos2VideoToWorldPipeline.__call__`` (pipeline_cosmos2_video2world.py:515-802): 704×1280, 93 frames
    (``(93 − 1) // 4 + 1 = 24`` latent frames; ``num_frames`` is not rounded), 35 steps, ``guidance_scale`` 7.0,
    512 T5 tokens.

    * ``prepare_latents`` (line 380): the conditioning image (or video) at the output size, padded to
      ``num_frames`` with its last frame, is VAE-encoded once (one input), all ``num_frames`` frames.
    * Each step: the conditional forward and, under guidance, the unconditional one (lines 616 and 635), each with
      a per-frame ``(B, 1, T, 1, 1)`` timestep and the ``condition_mask`` channel: the transformer's time embedder
      runs on ``T`` rows and every adaLN norm on every token.
    * ``vae.decode`` once per video, frame by frame (line 662)."""
    name = "Cosmos2VideoToWorldPipeline"
    refuse_cosmos2_5(components, name)
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: the conditioning frames are VAE-encoded and every "
                          "step runs")
    f, t = vae_factors(components)
    s = replace(s, height=s.height or V2W_HEIGHT, width=s.width or V2W_WIDTH, num_frames=s.num_frames or V2W_NUM_FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"])) + [GUARDRAIL_NOTE]
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{name} height and width")
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent_frames = (s.num_frames - 1) // t + 1
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    encode, encode_notes = encode_once(
        components, s, s.num_frames, f"the conditioning input padded to {s.num_frames} frames, once",
        f"the conditioning image (video) is padded to {s.num_frames} frames with its last frame and VAE-encoded once")
    runs += encode
    notes += encode_notes
    runs += [replace(r, shape=replace(r.shape, timestep_tokens=latent_frames))
             for r in denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes,
                                   latent_frames=latent_frames)]
    notes.append(f"one timestep per latent frame ({latent_frames}): the time embedder runs on each and the adaLN "
                 "norms on every token")
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan(name, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))
