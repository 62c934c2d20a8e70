"""SANA-Video pipelines (diffusers ``pipelines/sana_video/``): ``SanaVideoPipeline`` (text-to-video,
``pipeline_sana_video.py``) and ``SanaImageToVideoPipeline`` (``pipeline_sana_video_i2v.py``).

What one generation runs, at the ``__call__`` defaults (pipeline_sana_video.py:714-742):

* size 480×832, ``frames`` 81, 50 steps, ``guidance_scale`` 6.0 (classifier-free guidance on a doubled batch:
  2 passes), ``max_sequence_length`` 300;
* ``use_resolution_binning`` (default True): the size is snapped to the nearest aspect-ratio bin of
  ``ASPECT_RATIO_480_BIN`` (transformer ``sample_size`` 30) or ``ASPECT_RATIO_720_BIN`` (22); any other sample
  size raises "Invalid sample size" there (:850-858); ``check_inputs`` then wants height and width divisible by 32
  (:463);
* text: Gemma-2 on ``max_sequence_length`` tokens for the negative prompt and, under CFG, the prompt (with the
  complex human instruction prepended by default: see :func:`flopcalc.engine.pipelines.sana.chi_note`); the
  transformer sees ``max_sequence_length`` tokens (``select_index``: the first and the last
  ``max_sequence_length − 1``, :376-390);
* latent: ``(frames − 1) // t + 1`` frames of ``H/s × W/s`` (``prepare_latents`` :672-678; ``s``, ``t`` the Wan
  VAE's ``scale_factor_spatial`` / ``scale_factor_temporal``, 8 and 4 without a VAE, :225-238);
* the transformer once per step on ``[uncond, cond]``; ``vae.decode`` once on the whole latent (Wan VAE: frame by
  frame with its causal cache, untiled unless ``vae_tiling``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.config import class_name_of
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines.base import (
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
from flopcalc.engine.pipelines.sana import chi_note
from flopcalc.engine.pipelines.wan import _encode_runs, _vae_runs

#: ``SanaVideoPipeline.__call__`` / ``SanaImageToVideoPipeline.__call__`` defaults.
HEIGHT, WIDTH, FRAMES, STEPS, GUIDANCE, TEXT_LEN = 480, 832, 81, 50, 6.0, 300
#: ``check_inputs``: "`height` and `width` have to be divisible by 32".
SIZE_MULTIPLE = 32
#: pipeline_sana_video.py:46-73, ``ASPECT_RATIO_480_BIN`` / ``ASPECT_RATIO_720_BIN``, keyed by the transformer's
#: ``sample_size`` as ``__call__`` picks them (30 → 480, 22 → 720). Checked against diffusers' tables by
#: tests/test_pipeline_sana_video.py.
ASPECT_RATIO_BINS = {
    30: {"0.5": (448, 896), "0.57": (480, 832), "0.68": (528, 768), "0.78": (560, 720), "1.0": (624, 624),
         "1.13": (672, 592), "1.29": (720, 560), "1.46": (768, 528), "1.67": (816, 496), "1.75": (832, 480),
         "2.0": (896, 448)},
    22: {"0.5": (672, 1344), "0.57": (704, 1280), "0.68": (800, 1152), "0.78": (832, 1088), "1.0": (960, 960),
         "1.13": (1024, 896), "1.29": (1088, 832), "1.46": (1152, 800), "1.67": (1248, 736), "1.75": (1280, 704),
         "2.0": (1344, 672)},
}
T2V, I2V = "SanaVideoPipeline", "SanaImageToVideoPipeline"


def binned_size(height: int, width: int, sample_size: int, pipeline: str) -> tuple[int, int]:
    """``VideoProcessor.classify_height_width_bin`` on the table of ``sample_size``: the bin whose ratio is
    nearest ``height / width`` (the first such, as ``min`` keeps)."""
    if sample_size not in ASPECT_RATIO_BINS:
        raise FlopcalcError(f"{pipeline} resolution binning has no table for transformer sample_size {sample_size} "
                            "(only 30 → 480p, 22 → 720p: diffusers raises 'Invalid sample size'); turn binning off "
                            "(--no-resolution-binning) to estimate the size as given")
    ratios = ASPECT_RATIO_BINS[sample_size]
    ar = float(height / width)
    return ratios[min(ratios, key=lambda r: abs(float(r) - ar))]


def _vae_factors(components: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """``(vae_scale_factor_spatial, vae_scale_factor_temporal)`` (:225-238): the Wan VAE's config values, or 8 and
    4 without a VAE. The other VAE classes the pipeline names (``AutoencoderDC``, ``AutoencoderKLLTX2Video``) are
    not planned here."""
    vae = components.get("vae")
    if vae is None:
        return 8, 4
    cls = class_name_of(vae)
    if cls != "AutoencoderKLWan":
        raise ConfigError(f"vae: {cls} under a SANA-Video pipeline: flopcalc plans the Wan VAE (AutoencoderKLWan) "
                          "these pipelines ship with")
    return vae["scale_factor_spatial"], vae["scale_factor_temporal"]


def _settings(components: Mapping[str, Mapping[str, Any]], s: Settings, pipeline: str) -> tuple[Settings, list[str]]:
    if s.strength is not None:
        what = "the image conditions the first latent frame (VAE-encoded once)" if pipeline == I2V else \
            "it generates from noise"
        raise OptionError(f"--strength does not apply to {pipeline}: {what}, and every step runs")
    s = replace(s, height=s.height or HEIGHT, width=s.width or WIDTH, num_frames=s.num_frames or FRAMES,
                steps=s.steps or STEPS, guidance_scale=GUIDANCE if s.guidance_scale is None else s.guidance_scale,
                max_sequence_length=s.max_sequence_length or TEXT_LEN)
    notes = list(missing_notes(components, ["text_encoder", "transformer", "vae"]))
    asked = (s.height, s.width)
    if s.resolution_binning:
        transformer = components.get("transformer")
        sample = 30 if transformer is None else transformer["sample_size"]
        binned = binned_size(s.height, s.width, sample, pipeline)
        if binned != (s.height, s.width):
            notes.append(f"resolution binning: {s.height}×{s.width} is generated at {binned[0]}×{binned[1]} and "
                         f"resized, as {pipeline} does (turn off with --no-resolution-binning)")
            s = replace(s, height=binned[0], width=binned[1])
    try:
        check_divisible(s.height, s.width, SIZE_MULTIPLE, "SANA-Video height and width")
    except ResolutionError as exc:
        if asked == (s.height, s.width):
            raise
        raise ResolutionError(f"{asked[0]}×{asked[1]} falls in the resolution bin {s.height}×{s.width}, which "
                              f"{pipeline}'s check_inputs then refuses (not a multiple of {SIZE_MULTIPLE}; the real "
                              "call fails the same way): ask for another aspect ratio, or turn binning off "
                              f"(--no-resolution-binning). {exc}") from None
    return s, notes


def _plan(components: Mapping[str, Mapping[str, Any]], s: Settings, pipeline: str) -> Plan:
    f, t = _vae_factors(components)
    s, notes = _settings(components, s, pipeline)
    passes = cfg_passes(s, s.guidance_scale > 1)
    latent_frames = (s.num_frames - 1) // t + 1
    runs = text_runs(components, [("text_encoder", s.max_sequence_length)], s.batch_size * passes,
                     f"{s.batch_size} prompt(s)" + (" + negative" if passes == 2 else ""))
    if runs:
        notes.append(chi_note(pipeline, "the prompt and the negative prompt" if passes == 2 else "the prompt"))
    denoise = denoiser_run(components, "transformer", s, f, s.max_sequence_length, passes,
                           latent_frames=latent_frames)
    if pipeline == I2V:
        runs += _image_runs(components, s)
        if denoise:
            tokens = _timestep_tokens(components["transformer"], latent_frames, s.height // f, s.width // f)
            denoise = [replace(r, shape=replace(r.shape, timestep_tokens=tokens)) for r in denoise]
            notes.append(f"one timestep per latent token ({tokens}: t · (1 − mask), the image's first latent frame "
                         "at 0), so time_embed runs on every token")
    runs += denoise
    videos = s.batch_size * s.num_images_per_prompt
    vae_runs, vae_notes = _vae_runs(components, s, f, videos, latent_frames, bool(s.vae_tiling))
    return Plan(pipeline, s, passes, tuple(runs + vae_runs), tuple(notes + vae_notes))


def _timestep_tokens(transformer: Mapping[str, Any], frames: int, h: int, w: int) -> Any:
    """pipeline_sana_video_i2v.py:966-976: the conditioning mask is ``T // p_t × h // p_s × w // p_s`` with
    ``p_s = patch_size[1]`` for both sides, and the timestep ``t · (1 − mask)`` of that shape; the transformer
    flattens it (:655). It has as many entries as tokens only when the patch is square."""
    pt, ph, pw = transformer["patch_size"]
    if ph != pw:
        raise ConfigError(f"transformer/config.json: patch_size {list(transformer['patch_size'])} is not square: "
                          f"{I2V} builds its per-token timestep with patch_size[1] on both sides, which then does not "
                          "match the tokens (the real call fails)")
    return frames // pt * (h // ph) * (w // pw)


def _image_runs(components: Mapping[str, Mapping[str, Any]], s: Settings) -> list:
    """``prepare_latents`` (:690-716): the preprocessed image (``H × W``, one frame) VAE-encoded once
    (``retrieve_latents(vae.encode(image), sample_mode="argmax")``, repeated over the batch)."""
    if "vae" not in components:
        return []
    runs = _encode_runs(component_class(components, "vae") or "?", components["vae"],
                        replace(s, batch_size=1, num_frames=1), bool(s.vae_tiling))
    return [replace(r, why="1 input image (one frame), its latent repeated over the batch") for r in runs]


@register_pipeline(T2V, denoisers=("SanaVideoTransformer3DModel",),
                   options=("max_sequence_length", "num_frames", "vae_tiling"))
def sana_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                        index: Mapping[str, Any] | None = None) -> Plan:
    """``SanaVideoPipeline.__call__`` (see the module doc for every default)."""
    return _plan(components, s, T2V)


@register_pipeline(I2V, options=("max_sequence_length", "num_frames", "vae_tiling"))
def sana_image_to_video_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``SanaImageToVideoPipeline.__call__``: the text-to-video defaults (480×832, 81 frames, 50 steps, guidance
    6.0, 300 tokens, the same binning), and the image:

    * ``prepare_latents``: the image, resized to the (binned) size, is VAE-encoded once as a one-frame video and
      written into the first latent frame;
    * the timestep is one per latent token (``t · (1 − conditioning_mask)``, :993-994), so the transformer's
      ``time_embed`` (adaLN-single) runs on every token and every block is modulated per token;
    * ``num_videos_per_prompt`` must be 1: the conditioning mask has the prompt batch (:966-972), which does not
      match the latent batch otherwise (the real call fails).
    """
    if s.num_images_per_prompt != 1:
        raise OptionError(f"{I2V} builds its per-token timestep for the prompt batch only (conditioning_mask has "
                          "batch_size rows, pipeline_sana_video_i2v.py:966), so num_videos_per_prompt > 1 fails in "
                          "diffusers; use --batch-size")
    return _plan(components, s, I2V)
