"""The VAE's runs in a pipeline: one decode per image or clip, one encode per input image (image-to-image), and
``vae.enable_tiling()`` on the image VAEs whose architecture module declares its tiling (``IMAGE_TILING``,
:mod:`flopcalc.engine.image_tiling`: ``AutoencoderKL``, ``AutoencoderKLFlux2``, ``AutoencoderDC``,
``AutoencoderKLQwenImage``) in the pipelines that offer ``--vae-tiling``.

The pipelines call ``vae.decode(latents)`` (and ``vae.encode(image)`` for image-to-image); with
``use_tiling`` set, ``_decode`` / ``_encode`` split the call into overlapping tiles when a side
exceeds the tile size (``AutoencoderKL.tiled_decode`` / ``_tiled_encode``). Each tile is a whole
decode (encode) of its own extent, so the plan holds one run per distinct tile shape, ``count ×
images`` times; the tile grid is :func:`flopcalc.engine.architectures.autoencoder_kl.decode_split` /
:func:`~flopcalc.engine.architectures.autoencoder_kl.encode_split` (a ``CallSplit``, made runs by
``tile_runs``). When the latent fits one tile the VAE decodes it whole, and so does the plan.
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.engine.errors import FlopcalcError
from flopcalc.engine.pipelines.base import ComponentRun, component_class, tile_runs
from flopcalc.engine.registry import RunShape
from flopcalc.engine.settings import Settings
from flopcalc.formulas.tiling import CallSplit

def tiled_image_vae_runs(vae: Mapping[str, Any], cls: str, images: int, inputs: int, latent_h: Any, latent_w: Any,
                         height: Any, width: Any, encode: bool, symbolic: bool) -> list | None:
    """The decode runs (and, with ``encode``, the encode runs first) of a tiled image VAE at its
    ``enable_tiling()`` defaults, as its architecture module declares them (``IMAGE_TILING``,
    :func:`flopcalc.engine.image_tiling.image_tiling`), or None for a class without tiling."""
    from flopcalc.engine.image_tiling import image_tiling

    tiling = image_tiling(cls)
    if tiling is None:
        return None
    if symbolic:
        raise FlopcalcError("a tiled VAE has no closed-form law in H and W (its tile count steps with the size): "
                            "use the numeric estimate, or leave --vae-tiling off")
    if encode and tiling.encode_split is None:
        raise FlopcalcError(f"--vae-tiling with an input image: the tiled encode of {cls} is not planned by flopcalc "
                            "(only its tiled decode); leave --vae-tiling off")

    def runs(call: str, role: str, split: CallSplit, count: int, what: str, unit: str) -> list:
        if split.is_whole:
            (shape, _), = split.pieces()
            return [ComponentRun("vae", cls, call, role, _shape(call, shape[1], shape[2]), count,
                                 f"{count} {what} (tiling on, but it fits one tile: {call}d whole, as the VAE does)")]
        return tile_runs("vae", cls, call, role, split, count, lambda h, w: _shape(call, h, w),
                         lambda n, h, w: f"{n} tile(s) of {h}×{w} {unit} × {count} {what}")

    out = runs("decode", "vae_decoder", tiling.decode_split(vae, latent_h, latent_w, None), images, "image(s)",
               "latent")
    if encode:
        out[:0] = runs("encode", "vae_encoder", tiling.encode_split(vae, height, width), inputs,
                       "input image(s)", "px")
    return out


def _shape(call: str, h: int, w: int) -> RunShape:
    return RunShape(latent_height=h, latent_width=w) if call == "decode" else RunShape(height=h, width=w)


def vae_runs(components, s: Settings, images: int, latent_h: int, latent_w: int,
             latent_frames: int | None = None) -> list[ComponentRun]:
    """The VAE decoding each image (video: each clip of ``latent_frames`` latent frames) once,
    and, for image-to-image, encoding each input image (clip of ``num_frames``) once; an image VAE
    with ``vae_tiling`` in tiles, as ``vae.enable_tiling()`` makes it (:func:`tiled_image_vae_runs`)."""
    if "vae" not in components:
        return []
    cls = component_class(components, "vae") or "?"
    if s.vae_tiling and latent_frames is None:
        tiled = tiled_image_vae_runs(components["vae"], cls, images, s.batch_size, latent_h, latent_w, s.height,
                                     s.width, encode=s.strength is not None, symbolic=s.symbolic)
        if tiled is not None:
            return tiled
    what = "video(s)" if latent_frames is not None else "image(s)"
    runs = [ComponentRun("vae", cls, "decode", "vae_decoder",
                         RunShape(latent_height=latent_h, latent_width=latent_w, latent_frames=latent_frames),
                         images, f"{images} {what}")]
    if s.strength is not None:
        frames = s.num_frames if latent_frames is not None else None
        runs.insert(0, ComponentRun("vae", cls, "encode", "vae_encoder",
                                    RunShape(height=s.height, width=s.width, frames=frames),
                                    s.batch_size, f"{s.batch_size} input {what}"))
    return runs


def image_runs(components, s: Settings, f: int, latent_frames: int | None = None) -> list[ComponentRun]:
    return vae_runs(components, s, s.batch_size * s.num_images_per_prompt, s.height // f, s.width // f,
                    latent_frames)
