"""``vae.enable_tiling()`` on the ``AutoencoderKL`` of the image pipelines (``--vae-tiling``).

The pipelines call ``vae.decode(latents)`` (and ``vae.encode(image)`` for image-to-image); with
``use_tiling`` set, ``_decode`` / ``_encode`` split the call into overlapping tiles when a side
exceeds the tile size (``AutoencoderKL.tiled_decode`` / ``_tiled_encode``). Each tile is a whole
decode (encode) of its own extent, so the plan holds one run per distinct tile shape, ``count ×
images`` times; the tile grid is :func:`flopcalc.architectures.autoencoder_kl.decode_split` /
:func:`~flopcalc.architectures.autoencoder_kl.encode_split` (a ``CallSplit``, made runs by
``tile_runs``). When the latent fits one tile the VAE decodes it whole, and so does the plan.
"""

from __future__ import annotations

from typing import Any, Mapping

from flopcalc.errors import FlopcalcError
from flopcalc.formulas.tiling import CallSplit
from flopcalc.registry import RunShape

#: The VAE classes whose tiling this module plans.
TILED_CLASSES = ("AutoencoderKL",)


def tiled_image_vae_runs(vae: Mapping[str, Any], cls: str, images: int, inputs: int, latent_h: Any, latent_w: Any,
                         height: Any, width: Any, encode: bool, symbolic: bool) -> list | None:
    """The decode runs (and, with ``encode``, the encode runs first) of a tiled ``AutoencoderKL``, or
    None for a class this module does not tile."""
    from flopcalc.architectures import autoencoder_kl
    from flopcalc.pipelines.base import ComponentRun, tile_runs

    if cls not in TILED_CLASSES:
        return None
    if symbolic:
        raise FlopcalcError("a tiled VAE has no closed-form law in H and W (its tile count steps with the size): "
                            "use the numeric estimate, or leave --vae-tiling off")

    def runs(call: str, role: str, split: CallSplit, count: int, what: str, unit: str) -> list:
        if split.is_whole:
            (shape, _), = split.pieces()
            return [ComponentRun("vae", cls, call, role, _shape(call, shape[1], shape[2]), count,
                                 f"{count} {what} (tiling on, but it fits one tile: {call}d whole, as the VAE does)")]
        return tile_runs("vae", cls, call, role, split, count, lambda h, w: _shape(call, h, w),
                         lambda n, h, w: f"{n} tile(s) of {h}×{w} {unit} × {count} {what}")

    out = runs("decode", "vae_decoder", autoencoder_kl.decode_split(vae, latent_h, latent_w), images, "image(s)",
               "latent")
    if encode:
        out[:0] = runs("encode", "vae_encoder", autoencoder_kl.encode_split(vae, height, width), inputs,
                       "input image(s)", "px")
    return out


def _shape(call: str, h: int, w: int) -> RunShape:
    return RunShape(latent_height=h, latent_width=w) if call == "decode" else RunShape(height=h, width=w)
