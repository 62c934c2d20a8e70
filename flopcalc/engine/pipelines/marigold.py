"""Marigold dense prediction (diffusers ``pipelines/marigold/``): ``MarigoldDepthPipeline``,
``MarigoldNormalsPipeline``, ``MarigoldIntrinsicsPipeline`` (prs-eth/marigold-*), an SD2 UNet fine-tuned to
denoise the prediction's latent beside the input image's latent. Lines cite ``pipeline_marigold_depth.py``;
the normals and intrinsics pipelines run the same steps (their own lines in parentheses).

* Defaults from the pipeline's own config (``model_index.json``): ``num_inference_steps =
  default_denoising_steps`` and ``processing_resolution = default_processing_resolution`` (:442-444;
  normals :419-421, intrinsics :446-448); without them diffusers stops (:217, :236), and so does flopcalc.
  No guidance, no prompt, no strength.
* The text encoder runs once, on the empty prompt unpadded: 2 tokens (BOS, EOS; :474 ``[1,2,1024]``).
* Each input image (``height × width``; ``batch_size`` of them) is resized so its longer side is
  ``processing_resolution`` (``MarigoldImageProcessor.resize_to_max_edge``: ``h · PR // max(h, w)``; 0 keeps it)
  and padded up to a multiple of ``vae_scale_factor`` (``pad_image``), then VAE-encoded once (:639).
* Its latent is repeated ``ensemble_size`` times (:645); each of the ``N × E`` members runs every step
  through the UNet on ``[image latent, prediction latent]`` (``in_channels`` 8, or 4 + 4·T for intrinsics) with
  the 2 text tokens (:525), then is decoded (:664); intrinsics decode each of its ``T = unet.out_channels //
  vae.latent_channels`` targets (``n_targets``, intrinsics :207-208, :556-560).
* ``batch_size`` of ``__call__`` only chunks these calls (no FLOPs change); flopcalc's ``--batch-size`` is the
  number of input images ``N``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    cfg_passes,
    component_class,
    missing_notes,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import COUNT, INDEX, pipeline_option

pipeline_option("ensemble_size", kind=COUNT, bound=(4096, "ensemble members"),
                help="Marigold: predictions per input image (default 1)",
                refusal="it makes no ensemble of predictions (Marigold's)")
pipeline_option("processing_resolution", kind=INDEX, bound=(16384, "pixels"),
                help="Marigold: the input's longest side is resized to this (0: as given; default: the model's)",
                refusal="it does not resize its input to a processing resolution (Marigold's)", examples=("512", "0"))

#: Tokens of the empty prompt, unpadded (``padding="do_not_pad"``): BOS and EOS.
EMPTY_TEXT_TOKENS = 2
OPTIONS = ("ensemble_size", "processing_resolution")


def processed_size(height: int, width: int, resolution: int, align: int) -> tuple[int, int]:
    """``MarigoldImageProcessor.preprocess``: ``resize_to_max_edge`` (longer side to ``resolution``, floor
    division; 0 keeps the size) then ``pad_image`` to a multiple of ``align`` (``vae_scale_factor``)."""
    if resolution > 0:
        longest = max(height, width)
        height, width = height * resolution // longest, width * resolution // longest
    return height + (-height % align), width + (-width % align)


def _refuse_unused(name: str, s: Settings) -> None:
    unused = {"strength": s.strength is not None, "guidance_scale": s.guidance_scale is not None,
              "negative_prompt": s.negative_prompt, "num_images_per_prompt": s.num_images_per_prompt != 1}
    for option, given in unused.items():
        if given:
            flag = "--" + option.replace("_", "-")
            raise OptionError(f"{flag} does not apply to {name}: it predicts from the image with no prompt, "
                              "guidance or strength (use --ensemble-size for several predictions per image)")


def _marigold(name: str, components: Mapping[str, Mapping[str, Any]], s: Settings,
              index: Mapping[str, Any] | None, targets_of: Any) -> Plan:
    _refuse_unused(name, s)
    if s.symbolic:
        raise FlopcalcError(f"{name} resizes its input to the processing resolution (h · PR // max(h, w)) and pads "
                            "it: no closed-form law; use the numeric estimate")
    index = index or {}
    steps = s.steps or index.get("default_denoising_steps")
    resolution = s.processing_resolution if s.processing_resolution is not None else (
        index.get("default_processing_resolution"))
    if steps is None:
        raise OptionError(f"{name}: num_inference_steps is not specified and model_index.json has no "
                          "default_denoising_steps; give --steps")
    if resolution is None:
        raise OptionError(f"{name}: processing_resolution is not specified and model_index.json has no "
                          "default_processing_resolution; give --processing-resolution")
    for key, value in (("default_denoising_steps", steps), ("default_processing_resolution", resolution)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key.endswith("steps") else 0):
            raise ConfigError(f"model_index.json: {key!r} is {value!r}; expected an integer "
                              f"{'>= 1' if key.endswith('steps') else '>= 0'}")
    f = vae_scale_factor(components)
    if resolution % f:
        raise OptionError(f"{name}: processing_resolution must be a multiple of {f} (the VAE's factor), got "
                          f"{resolution}")
    if s.height is None or s.width is None:  # the input image: square at the processing resolution
        if resolution == 0:
            raise OptionError(f"{name} at processing_resolution 0 processes the input at its own size: give --height "
                              "and --width")
        s = replace(s, height=s.height or resolution, width=s.width or resolution)
    s = replace(s, steps=steps).with_options(processing_resolution=resolution, ensemble_size=s.ensemble_size or 1)
    h, w = processed_size(s.height, s.width, resolution, f)
    if h == 0 or w == 0:
        raise OptionError(f"{name}: a {s.height}×{s.width} image resized to a longest side of {resolution} has a "
                          "zero side (resize_to_max_edge)")
    n, e = s.batch_size, s.ensemble_size
    targets = targets_of(components)
    runs = []
    if "text_encoder" in components:
        runs.append(ComponentRun("text_encoder", component_class(components, "text_encoder") or "?", "forward",
                                 "text_encoder", RunShape(seq_len=EMPTY_TEXT_TOKENS), 1,
                                 "the empty prompt, once (empty_text_embedding)"))
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                                 RunShape(height=h, width=w), n, f"{n} input image(s) at {h}×{w}"))
    if "unet" in components:
        runs.append(ComponentRun("unet", component_class(components, "unet") or "?", "forward", "denoiser",
                                 RunShape(latent_height=h // f, latent_width=w // f, text_len=EMPTY_TEXT_TOKENS),
                                 steps * n * e, f"{steps} steps × {n} image(s) × {e} ensemble member(s)"))
    if "vae" in components:
        runs.append(ComponentRun("vae", component_class(components, "vae") or "?", "decode", "vae_decoder",
                                 RunShape(latent_height=h // f, latent_width=w // f), n * e * targets,
                                 f"{n} image(s) × {e} ensemble member(s)" + (f" × {targets} targets"
                                                                              if targets != 1 else "")))
    notes = list(missing_notes(components, ["text_encoder", "unet", "vae"]))
    if (h, w) != (s.height, s.width):
        notes.append(f"the {s.height}×{s.width} input is processed at {h}×{w} (longest side {resolution}, padded "
                     f"to a multiple of {f})")
    return Plan(name, s, cfg_passes(s, False), tuple(runs), tuple(notes))


def _one_target(components: Mapping[str, Mapping[str, Any]]) -> int:
    return 1


def _intrinsics_targets(components: Mapping[str, Mapping[str, Any]]) -> int:
    """``n_targets``: ``unet.config.out_channels // vae.config.latent_channels`` (intrinsics :207-208)."""
    if "unet" not in components or "vae" not in components:
        return 1
    return max(1, components["unet"]["out_channels"] // components["vae"]["latent_channels"])


@register_pipeline("MarigoldDepthPipeline", options=OPTIONS)
def marigold_depth_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                            index: Mapping[str, Any] | None = None) -> Plan:
    """``MarigoldDepthPipeline.__call__`` (see the module doc): one prediction latent per member."""
    return _marigold("MarigoldDepthPipeline", components, s, index, _one_target)


@register_pipeline("MarigoldNormalsPipeline", options=OPTIONS)
def marigold_normals_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                              index: Mapping[str, Any] | None = None) -> Plan:
    """``MarigoldNormalsPipeline.__call__`` (see the module doc): as depth, the 3-channel normals decoded once."""
    return _marigold("MarigoldNormalsPipeline", components, s, index, _one_target)


@register_pipeline("MarigoldIntrinsicsPipeline", options=OPTIONS)
def marigold_intrinsics_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                 index: Mapping[str, Any] | None = None) -> Plan:
    """``MarigoldIntrinsicsPipeline.__call__`` (see the module doc): ``T`` target latents per member, each
    decoded."""
    return _marigold("MarigoldIntrinsicsPipeline", components, s, index, _intrinsics_targets)
