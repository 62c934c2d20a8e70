"""EasyAnimate pipelines (diffusers ``pipelines/easyanimate/``): ``EasyAnimatePipeline`` (text-to-video),
``EasyAnimateControlPipeline`` (a control video) and ``EasyAnimateInpaintPipeline`` (an input video and its mask:
image-to-video keeps the first frame), over the Qwen2-VL text encoder, the EasyAnimate transformer and the Magvit VAE
(:mod:`flopcalc.engine.architectures.easyanimate`).

Shared by the three ``__call__`` s: 49 frames (``(49 − 1) // 4 + 1 = 13`` latent frames), 512×512 (height and width
divisible by 16), 50 steps, ``guidance_scale`` 5.0 (classifier-free guidance on a doubled batch), the Qwen2-VL prompt
(chat template) padded to ``encode_prompt``'s ``max_sequence_length`` 256 tokens (``__call__`` takes none), the
negative prompt too under guidance; ``vae.decode`` once per video (decoder called on each latent frame with its causal
cache).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.architectures import easyanimate as magvit
from flopcalc.engine.architectures.easyanimate import vae_factors
from flopcalc.engine.config import Config
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    check_divisible,
    component_class,
    denoiser_run,
    denoising_steps_floored,
    missing_notes,
    register_pipeline,
    require_numeric_tiling,
    text_runs,
    tile_runs,
    video_decode_runs,
)
from flopcalc.engine.registry import RunShape

T2V, CONTROL, INPAINT = "EasyAnimatePipeline", "EasyAnimateControlPipeline", "EasyAnimateInpaintPipeline"
HEIGHT, WIDTH, FRAMES, STEPS, GUIDANCE, TEXT_LEN, SIZE_MULTIPLE = 512, 512, 49, 50, 5.0, 256, 16
#: The VAE's latent channels: what the pipelines feed the transformer before their conditioning channels.
LATENT_CHANNELS = 16


def _vae_values(components: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
    """The VAE's config values (empty without a VAE: the class defaults)."""
    vae = components.get("vae", {})
    return vae.values if isinstance(vae, Config) else vae


def _factors(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    return vae_factors(_vae_values(components)) if "vae" in components else (8, 4)


def _common(components, s: Settings, pipeline: str) -> tuple[Settings, int, int, int, int, list[str]]:
    f, t = _factors(components)
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale)
    check_divisible(s.height, s.width, SIZE_MULTIPLE, f"{pipeline} height and width")
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    passes = cfg_passes(s, s.guidance_scale > 1)
    return s, f, t, (s.num_frames - 1) // t + 1, passes, notes


def _text(components, s: Settings, passes: int) -> list[ComponentRun]:
    return text_runs(components, [("text_encoder", TEXT_LEN)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))


def _encode(components, s: Settings, frames: int, runs: int, why: str) -> list[ComponentRun]:
    """``vae.encode`` of ``runs`` input videos of ``frames`` frames: one call each, or with ``vae_tiling`` in the pixel
    tiles :func:`~flopcalc.engine.architectures.easyanimate.encode_split` gives (every tile over all frames)."""
    if "vae" not in components:
        return []
    split = magvit.encode_split(_vae_values(components), s.height, s.width, bool(s.vae_tiling))
    return tile_runs("vae", component_class(components, "vae") or "?", "encode", "vae_encoder", split, runs,
                     lambda h, w: RunShape(height=h, width=w, frames=frames),
                     lambda k, h, w: why if split.is_whole else f"{k} tile(s) of {h}×{w} px × {why}")


def _decode(components, s: Settings, f: int, latent_frames: int) -> tuple[list[ComponentRun], list[str]]:
    """``vae.decode`` once per video: the whole latent, or with ``vae_tiling`` (``pipe.vae.enable_tiling()``, which
    no EasyAnimate pipeline calls) in the latent tiles of
    :func:`~flopcalc.engine.architectures.easyanimate.decode_split`; with the plan's note."""
    if "vae" not in components:
        return [], []
    videos = s.batch_size * s.num_images_per_prompt
    split = magvit.decode_split(_vae_values(components), s.height // f, s.width // f, bool(s.vae_tiling))
    how = (f"{latent_frames} latent frames decoded one decoder call each (the first, then one at a time, causal "
           "convolution cache)")
    if not s.vae_tiling:
        note = f"VAE: {how}, untiled (the pipelines never call vae.enable_tiling())"
    elif split.is_whole:
        note = (f"VAE: tiling asked for (vae.enable_tiling()) but the {s.height // f}×{s.width // f} latent fits one "
                f"tile: decoded untiled, as the VAE does; {how}")
    else:
        require_numeric_tiling(s)
        note = (f"VAE: tiled decode (vae.enable_tiling(): {magvit.TILE_SAMPLE}-pixel tiles every {magvit.TILE_STRIDE}, "
                f"overlaps counted in full): {split.calls} tile(s) per video, each tile's {how}")
    return video_decode_runs(components, split, videos, latent_frames), [note]


def _latent_channels(components) -> int:
    """``vae.config.latent_channels`` (the noise latent's channels), 16 without a VAE."""
    vae = components.get("vae")
    return LATENT_CHANNELS if vae is None else vae["latent_channels"]


def _in_channels(components, expected: str, check) -> None:
    transformer = components.get("transformer")
    z = _latent_channels(components)
    if transformer is not None and transformer["in_channels"] is not None and not check(transformer["in_channels"], z):
        raise ConfigError(f"transformer/config.json: in_channels {transformer['in_channels']} is not what this pipeline "
                          f"feeds it ({expected}; the real call fails)")


def _one_video(s: Settings, pipeline: str, what: str) -> None:
    if s.symbolic:
        raise FlopcalcError(f"{pipeline} VAE-encodes its {what} in chunks of 4 frames after the first (the causal "
                            "Magvit encoder): a step function of num_frames with no closed-form law; use the numeric "
                            "estimate")
    if s.batch_size * s.num_images_per_prompt != 1:
        raise OptionError(f"{pipeline} concatenates the {what}'s latents (one video) to the noise of every prompt and "
                          "video, which only lines up for one video (the real call fails otherwise); estimate one")


@register_pipeline(T2V, denoisers=("EasyAnimateTransformer3DModel",),
                   when=lambda cfg: cfg.get("in_channels") == LATENT_CHANNELS, options=("num_frames", "vae_tiling"))
def easyanimate_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                         index: Mapping[str, Any] | None = None) -> Plan:
    """``EasyAnimatePipeline.__call__`` (pipeline_easyanimate.py:526-775; defaults in the module doc): the transformer
    on the 16-channel latent alone."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {T2V}: it generates from noise")
    _in_channels(components, "the VAE's latent channels", lambda c, z: c == z)
    s, f, t, latent, passes, notes = _common(components, s, T2V)
    runs = _text(components, s, passes)
    runs += denoiser_run(components, "transformer", s, f, TEXT_LEN, passes, latent_frames=latent)
    decode, decode_notes = _decode(components, s, f, latent)
    return Plan(T2V, s, passes, tuple(runs + decode), tuple(notes + decode_notes))


@register_pipeline(CONTROL, denoisers=("EasyAnimateTransformer3DModel",),
                   when=lambda cfg: cfg.get("in_channels") in (2 * LATENT_CHANNELS, 3 * LATENT_CHANNELS),
                   options=("num_frames", "vae_tiling"))
def easyanimate_control_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``EasyAnimateControlPipeline.__call__`` (pipeline_easyanimate_control.py:672-1009) with a control video (what the
    pipeline is for): the control video (``num_frames`` frames, at the output size) VAE-encoded once (:853-887); the
    transformer on the noise latent with ``control_latents`` (the control latent and the reference image's latent,
    zeros without a reference image: 48 channels in all) concatenated (:958-964). One video (its control latent is not
    repeated over a batch). diffusers 0.42.1's ``__call__`` fails before any model runs (it passes ``encode_prompt`` a
    ``text_encoder_index`` it does not take, :807-819) and again at the end (``self.decode_latents``, :998, is not
    defined): the plan counts the call as it runs once both are fixed (``vae.decode`` once per video)."""
    if s.strength is not None:
        raise OptionError(f"--strength does not apply to {CONTROL}: it generates from noise under the control video")
    _one_video(s, CONTROL, "control video")
    _in_channels(components, "the latent, control (and reference) latents' channels: 2 or 3 × the VAE's",
                 lambda c, z: c in (2 * z, 3 * z))
    s, f, t, latent, passes, notes = _common(components, s, CONTROL)
    notes.append("a control video is given (num_frames frames at the output size) and VAE-encoded once; no reference "
                 "image (its latent channels are zeros)")
    notes.append("diffusers 0.42.1's EasyAnimateControlPipeline.__call__ passes encode_prompt a text_encoder_index it "
                 "does not take (a TypeError before any model runs) and calls a decode_latents it lacks; counted as the "
                 "call runs once both are fixed (vae.decode once per video, as the other EasyAnimate pipelines)")
    runs = _text(components, s, passes) + _encode(components, s, s.num_frames, 1, "the control video, once")
    runs += denoiser_run(components, "transformer", s, f, TEXT_LEN, passes, latent_frames=latent)
    decode, decode_notes = _decode(components, s, f, latent)
    return Plan(CONTROL, s, passes, tuple(runs + decode), tuple(notes + decode_notes))


@register_pipeline(INPAINT, denoisers=("EasyAnimateTransformer3DModel",),
                   when=lambda cfg: cfg.get("in_channels") not in (LATENT_CHANNELS, 2 * LATENT_CHANNELS,
                                                                   3 * LATENT_CHANNELS),
                   options=("num_frames", "vae_tiling"))
def easyanimate_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``EasyAnimateInpaintPipeline.__call__`` (pipeline_easyanimate_inpaint.py:787-1245) with an input video and a
    mask that keeps part of it (its image-to-video use: the first frame kept): the masked video VAE-encoded once
    (``prepare_mask_latents``, :640-689) and its latent with the resized mask (1 channel with
    ``resize_inpaint_mask_directly``) concatenated to the noise (``inpaint_latents``, 33 channels for the released
    models); ``strength`` (default 1.0) keeps ``int(steps · strength)`` steps (``get_timesteps`` :629-638), and below 1
    the input video is VAE-encoded once more for the initial latent (``prepare_latents``, :722-743). One video."""
    _one_video(s, INPAINT, "input video")
    transformer = components.get("transformer")
    strength = 1.0 if s.strength is None else s.strength
    if transformer is not None and transformer["in_channels"] == _latent_channels(components):
        raise ConfigError(f"transformer/config.json: in_channels {transformer['in_channels']}: a text-to-video "
                          f"transformer, without the mask and masked-video channels {INPAINT} concatenates; estimate "
                          f"{T2V}")
    s, f, t, latent, passes, notes = _common(components, replace(s, strength=strength), INPAINT)
    steps = denoising_steps_floored(s.steps, strength)
    notes.append("an input video and its mask are given (num_frames frames at the output size); the masked video is "
                 "VAE-encoded once" + ("" if strength == 1 else ", and the video once more for the initial latent "
                                            f"(strength {strength})"))
    runs = _text(components, s, passes)
    runs += _encode(components, s, s.num_frames, 1 if strength == 1 else 2,
                    "the masked video" + ("" if strength == 1 else " and the input video") + ", once each")
    runs += denoiser_run(components, "transformer", replace(s, strength=None, steps=steps), f, TEXT_LEN, passes,
                         latent_frames=latent)
    decode, decode_notes = _decode(components, s, f, latent)
    return Plan(INPAINT, s, passes, tuple(runs + decode), tuple(notes + decode_notes))
