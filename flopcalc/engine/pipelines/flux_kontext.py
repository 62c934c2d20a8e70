"""FLUX.1 Kontext (diffusers ``pipelines/flux/pipeline_flux_kontext.py``): image editing by
reference-image tokens concatenated to the image tokens."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines.base import (
    ComponentRun,
    Plan,
    Settings,
    component_class,
    pipeline_options,
    register_pipeline,
    vae_scale_factor,
)
from flopcalc.engine.pipelines.flux import flux_pipeline
from flopcalc.engine.pipelines.flux_conditioned import encode_run, with_encodes
from flopcalc.engine.registry import RunShape

#: ``max_area`` default of ``FluxKontextPipeline.__call__``: the output is resized to this many pixels.
MAX_AREA = 1024**2
#: ``PREFERRED_KONTEXT_RESOLUTIONS`` (pipeline_flux_kontext.py, lines 82–100), as (width, height).
PREFERRED_KONTEXT_RESOLUTIONS = (
    (672, 1568), (688, 1504), (720, 1456), (752, 1392), (800, 1328), (832, 1248), (880, 1184), (944, 1104),
    (1024, 1024),
    (1104, 944), (1184, 880), (1248, 832), (1328, 800), (1392, 752), (1456, 720), (1504, 688), (1568, 672),
)


def max_area_size(height: int, width: int, multiple_of: int, max_area: int = MAX_AREA) -> tuple[int, int]:
    """The generated size: ``(height, width)``'s aspect ratio at ``max_area`` pixels, each side
    floored to ``multiple_of`` (``__call__``: ``width = round((max_area * aspect_ratio) ** 0.5)``,
    ``height = round((max_area / aspect_ratio) ** 0.5)``, then ``// multiple_of * multiple_of``)."""
    aspect_ratio = width / height
    w = round((max_area * aspect_ratio) ** 0.5)
    h = round((max_area / aspect_ratio) ** 0.5)
    return h // multiple_of * multiple_of, w // multiple_of * multiple_of


def preferred_resolution(height: int, width: int, multiple_of: int) -> tuple[int, int]:
    """The input image's size after ``_auto_resize``: the preferred Kontext resolution whose
    aspect ratio is nearest ``width / height`` (ties to the narrower, as ``min`` over
    ``(abs(aspect_ratio - w / h), w, h)`` picks), each side floored to ``multiple_of``."""
    aspect_ratio = width / height
    _, w, h = min((abs(aspect_ratio - w / h), w, h) for w, h in PREFERRED_KONTEXT_RESOLUTIONS)
    return h // multiple_of * multiple_of, w // multiple_of * multiple_of


@register_pipeline("FluxKontextPipeline", guidance="separate", options=tuple(pipeline_options("FluxPipeline") - {"vae_tiling"}))
def flux_kontext_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                          index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxKontextPipeline.__call__``: FluxPipeline's defaults (1024², 28 steps, guidance 3.5
    embedded, true CFG only with ``true_cfg_scale > 1`` and a negative prompt, T5 on 512 tokens),
    with an input image:

    * the generated size is ``height × width``'s aspect ratio at ``max_area`` = 1024² pixels
      (floored to 16), whatever size is asked for;
    * the input image (flopcalc assumes it has the asked ``height × width``) is resized to the
      preferred Kontext resolution nearest its aspect ratio (``_auto_resize``) and VAE-encoded once
      per prompt (``_encode_vae_image``, ``sample_mode="argmax"``), then repeated per image;
    * every transformer pass runs on the generated latent's tokens followed by the input latent's
      (``torch.cat([latents, image_latents], dim=1)``, ids alike); the pipeline keeps the first part.

    With resolution binning off (``--no-resolution-binning``, and in a symbolic law) the sizes are
    used as given: ``max_area = height · width`` and ``_auto_resize=False``, so output and input
    image are both ``height × width`` (each side a multiple of 16; with binning any size is
    resized). ``strength`` does not apply (every step runs): only 1 is taken."""
    if s.strength is not None and s.strength < 1:
        raise OptionError("--strength does not apply to FluxKontextPipeline: its __call__ takes no strength "
                          "(every step runs; the input image is encoded as the reference), only 1 means that")
    f = vae_scale_factor(components)
    height, width = s.height or 128 * f, s.width or 128 * f
    notes = []
    if s.resolution_binning:
        out_h, out_w = max_area_size(height, width, f * 2)
        ref_h, ref_w = preferred_resolution(height, width, f * 2)
        notes.append(f"output resized to max_area {MAX_AREA} pixels: {out_h}×{out_w}; the input image (assumed "
                     f"{height}×{width}) resized to the nearest preferred Kontext resolution {ref_h}×{ref_w} "
                     "(--no-resolution-binning: both as given)")
    else:
        out_h, out_w, ref_h, ref_w = height, width, height, width
    base = flux_pipeline(components, replace(s, height=out_h, width=out_w, strength=None), index=index)
    base = _with_reference_tokens(replace(base, settings=replace(base.settings, strength=s.strength)),
                                  (ref_h // (f * 2)) * (ref_w // (f * 2)))
    encodes = [ComponentRun("vae", component_class(components, "vae") or "?", "encode", "vae_encoder",
                            RunShape(height=ref_h, width=ref_w), s.batch_size,
                            f"{s.batch_size} input image(s) at {ref_h}×{ref_w}")] if "vae" in components else []
    return with_encodes(base, "FluxKontextPipeline", encodes, notes)


def _with_reference_tokens(plan: Plan, tokens: Any) -> Plan:
    """``plan`` with ``tokens`` reference-image tokens appended to every denoiser run's sequence."""
    return replace(plan, runs=tuple(replace(r, shape=replace(r.shape, reference_tokens=tokens))
                                    if r.role == "denoiser" else r for r in plan.runs))


@register_pipeline("FluxKontextInpaintPipeline", guidance="separate", options=tuple(pipeline_options("FluxPipeline") - {"vae_tiling"}))
def flux_kontext_inpaint_pipeline(components: Mapping[str, Mapping[str, Any]], s: Settings,
                                  index: Mapping[str, Any] | None = None) -> Plan:
    """``FluxKontextInpaintPipeline.__call__`` (``pipeline_flux_kontext_inpaint.py``): FluxPipeline's
    defaults (28 steps, guidance 3.5 embedded, true CFG with ``true_cfg_scale > 1`` and a negative
    prompt) with ``strength`` 1.0 (``get_timesteps``: the last ``strength`` of the schedule runs) and
    an image to inpaint (flopcalc assumes it has the asked ``height × width``):

    * the image is resized to the preferred Kontext resolution nearest its aspect ratio and the
      output takes that size ("Choose the resolution of the image to be the same as the image":
      the ``max_area`` size is overwritten);
    * the VAE encoder runs twice per input image at that size: the image (``prepare_latents``) and
      the masked image (``prepare_mask_latents``);
    * without ``image_reference`` (the default) the image's own packed latent follows the generated
      tokens in every transformer pass (``torch.cat([latents, image_latents], dim=1)``).

    Resolution binning off: the size as given (``_auto_resize=False``)."""
    f = vae_scale_factor(components)
    height, width = s.height or 128 * f, s.width or 128 * f
    notes = ["image_reference not given (its own latent would replace the image's in the sequence, encoded once "
             "more at its preferred resolution)"]
    if s.resolution_binning:
        out_h, out_w = preferred_resolution(height, width, f * 2)
        notes.append(f"the image (assumed {height}×{width}) and so the output resized to the nearest preferred "
                     f"Kontext resolution {out_h}×{out_w} (--no-resolution-binning: as given)")
    else:
        out_h, out_w = height, width
    s = replace(s, height=out_h, width=out_w, strength=1.0 if s.strength is None else s.strength)
    base = flux_pipeline(components, s, index=index)
    base = _with_reference_tokens(base, (out_h // (f * 2)) * (out_w // (f * 2)))
    encodes = encode_run(components, base.settings, 2 * s.batch_size,
                         f"{s.batch_size} input image(s) × 2 (the image and the masked image)")
    return with_encodes(base, "FluxKontextInpaintPipeline", encodes, notes)
