"""Cosmos 1.0 (diffusers ``pipelines/cosmos/pipeline_cosmos_text2world.py``, ``CosmosTextToWorldPipeline``, and
``pipeline_cosmos_video2world.py``, ``CosmosVideoToWorldPipeline``): T5 (``T5EncoderModel``),
``CosmosTransformer3DModel`` with a learnable position embedding, and the Cosmos tokenizer ``AutoencoderKLCosmos``
(8× in space and time, :mod:`flopcalc.engine.architectures.autoencoder_kl_cosmos`), sampled with
``EDMEulerScheduler``. The ``CosmosSafetyChecker`` guardrail the pipelines require (text and output checks, a separate
package's models) is not a listed component and is not counted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    missing_notes,
    register_pipeline,
    text_runs,
)
from flopcalc.engine.pipelines.cosmos import GUARDRAIL_NOTE, refuse_cosmos2_5
from flopcalc.engine.registry import RunShape

#: ``CosmosTextToWorldPipeline.__call__`` / ``CosmosVideoToWorldPipeline.__call__`` defaults
#: (pipeline_cosmos_text2world.py:404-421, pipeline_cosmos_video2world.py:515-538): 704×1280, 121 frames, 36 steps,
#: ``guidance_scale`` 7.0, 512 T5 tokens.
HEIGHT, WIDTH, NUM_FRAMES, STEPS, GUIDANCE, MAX_SEQUENCE_LENGTH = 704, 1280, 121, 36, 7.0, 512
#: ``check_inputs``: height and width divisible by 16.
SIZE_MULTIPLE = 16
T2W, V2W = "CosmosTextToWorldPipeline", "CosmosVideoToWorldPipeline"


def _settings(components: Mapping[str, Mapping[str, Any]], s: Settings, name: str) -> tuple[Settings, int, int, int,
                                                                                             int, list[str]]:
    """The defaults and checks both pipelines share; returns the settings, the VAE factors, the latent frames, the
    guidance passes and the notes."""
    refuse_cosmos2_5(components, name)
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {name}: every step of the schedule runs")
    vae = components.get("vae")
    f, t = (8, 8) if vae is None else (vae["spatial_compression_ratio"], vae["temporal_compression_ratio"])
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or NUM_FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or MAX_SEQUENCE_LENGTH)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"])) + [GUARDRAIL_NOTE]
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{name} height and width")
    latent_frames = (s.num_frames - 1) // t + 1
    if vae is not None:
        _check_stats(vae, int(latent_frames), t)
        _check_channels(components, name)
    passes = cfg_passes(s, s.guidance_scale > 1)
    if s.negative_prompt and passes == 1:
        notes.append("the negative prompt is ignored without classifier-free guidance (guidance_scale <= 1)")
    return s, f, t, latent_frames, passes, notes


def _check_channels(components: Mapping[str, Mapping[str, Any]], name: str) -> None:
    """``num_channels_latents`` is the transformer's ``in_channels`` (text-to-world) or one less (video-to-world: the
    condition mask); the VAE's latent must have as many channels, else the real call fails (the decode, or the sum
    with the conditioning latent)."""
    transformer, vae = components.get("transformer"), components.get("vae")
    if transformer is None:
        return
    extra = 1 if name == V2W else 0
    if transformer["in_channels"] - extra != vae["latent_channels"]:
        raise ConfigError(f"transformer/config.json: in_channels {transformer['in_channels']} under {name} means "
                          f"{transformer['in_channels'] - extra} latent channels"
                          + (" (one more is the condition mask)" if extra else "")
                          + f", but the VAE's latent has {vae['latent_channels']}: the real call fails"
                          + ("; a text-to-world transformer runs under CosmosTextToWorldPipeline" if extra else
                             "; a video-to-world transformer runs under CosmosVideoToWorldPipeline"))


def _check_stats(vae: Mapping[str, Any], latent_frames: int, temporal: int) -> None:
    """The pipelines (de)normalize the latent with ``latents_mean/std.view(1, C, -1, 1, 1)[:, :, :T]``: the statistics
    must split into the latent channels and cover ``T`` latent frames (or be one frame), else the real call fails."""
    from flopcalc.engine.architectures.autoencoder_kl_cosmos import DEFAULT_STATS

    mean = vae.get("latents_mean", DEFAULT_STATS)
    if mean is None:
        return
    count, channels = (mean if isinstance(mean, int) else len(mean)), vae["latent_channels"]
    if count % channels:
        raise ConfigError(f"vae/config.json: latents_mean has {count} values, which do not split into its "
                          f"{channels} latent channels (the pipeline's view fails)")
    frames = count // channels
    if latent_frames > frames and frames != 1:
        raise ResolutionError(f"the VAE's latents_mean / latents_std cover {frames} latent frames and the video has "
                              f"{latent_frames} ((num_frames − 1) // temporal_compression_ratio + 1): the Cosmos "
                              f"pipelines' normalization fails; use at most {(frames - 1) * temporal + 1} frames")


def _decode(components: Mapping[str, Mapping[str, Any]], s: Settings, f: int, latent_frames: Any) -> list[ComponentRun]:
    """``vae.decode`` once on the batch of latents (text2world :652, video2world :807): one run per video."""
    if "vae" not in components:
        return []
    videos = s.batch_size * s.num_images_per_prompt
    return [ComponentRun("vae", component_class(components, "vae") or "?", "decode", "vae_decoder",
                         RunShape(latent_height=s.height // f, latent_width=s.width // f, latent_frames=latent_frames),
                         videos, f"{videos} video(s)")]


#: Why ``--vae-tiling`` is refused: it would change nothing.
_TILING = {"vae_tiling": "AutoencoderKLCosmos.enable_tiling() sets flags its encode and decode never read "
                         "(autoencoder_kl_cosmos.py:1001-1071): the VAE runs whole either way, as flopcalc counts it"}


@register_pipeline(T2W, guidance="separate", options=("max_sequence_length", "num_frames"), refuses=_TILING)
def cosmos_text_to_world_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``CosmosTextToWorldPipeline.__call__`` (pipeline_cosmos_text2world.py:404-677): 704×1280, 121 frames
    (``(121 − 1) // 8 + 1 = 16`` latent frames; ``num_frames`` is not rounded), 36 steps (``EDMEulerScheduler``: 36
    timesteps), ``guidance_scale`` 7.0, 512 T5 tokens per prompt (padded to ``max_length``, counted in full).

    * Under guidance (``guidance_scale > 1``) the negative prompt ("" by default) is encoded too and the transformer
      runs twice per step (:582, :593: cond and uncond as separate forwards), each with one timestep per sample and
      the padding mask as an extra channel (``concat_padding_mask``).
    * ``vae.decode`` once on the latents (:652), the whole video at once (no tiling, no frame batches)."""
    s, f, _, latent_frames, passes, notes = _settings(components, s, T2W)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes, latent_frames=latent_frames)
    return Plan(T2W, s, passes, tuple(runs + _decode(components, s, f, latent_frames)), tuple(notes))


@register_pipeline(V2W, guidance="separate", options=("max_sequence_length", "num_frames"), refuses=_TILING)
def cosmos_video_to_world_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                   index: Mapping[str, Any] | None = None) -> Plan:
    """``CosmosVideoToWorldPipeline.__call__`` (pipeline_cosmos_video2world.py:515-847): the text-to-world defaults
    and one conditioning input (an image, or a video):

    * ``prepare_latents`` (:396-478): the input at the output size, zero-padded to ``num_frames`` (a longer video: its
      last ``num_frames`` frames), is VAE-encoded once per input video (one input: once, whatever the batch) on all
      ``num_frames`` frames; its latent must have the noise latent's frames (the real call adds them).
    * Each step: the conditional forward (:718) and, under guidance, the unconditional one (:738) on the latent with
      its condition-mask channel (``in_channels`` = latent channels + 1) and the padding mask, one timestep per sample.
    * ``vae.decode`` once on the latents (:807)."""
    s, f, t, latent_frames, passes, notes = _settings(components, s, V2W)
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    vae = components.get("vae")
    if vae is not None:
        from flopcalc.engine.architectures.autoencoder_kl_cosmos import encoded_sizes

        encoded, eh, ew = encoded_sizes(vae, int(s.num_frames), int(s.height), int(s.width))
        if (eh, ew) != (s.height // f, s.width // f):
            raise ResolutionError(f"{V2W}: the VAE encodes {s.height}×{s.width} into a latent of "
                                  f"{encoded}×{eh}×{ew}, not the {s.height // f}×{s.width // f} its "
                                  f"spatial_compression_ratio {f} gives the noise latent (its blocks hold fewer "
                                  "down-samplers): the real call fails")
        if encoded not in (int(latent_frames), 1):
            raise ResolutionError(f"{V2W}: the VAE encodes {s.num_frames} frames into {encoded} latent frames, the "
                                  f"noise latent has {latent_frames} ((num_frames − 1) // {t} + 1): the real call "
                                  f"fails to add them; use num_frames = {t}k + 1")
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=s.height, width=s.width, frames=s.num_frames), 1,
                                 f"the conditioning input padded to {s.num_frames} frames, once"))
        notes.append(f"the conditioning image (video) is zero-padded to {s.num_frames} frames and VAE-encoded once")
    runs += denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes, latent_frames=latent_frames)
    return Plan(V2W, s, passes, tuple(runs + _decode(components, s, f, latent_frames)), tuple(notes))
