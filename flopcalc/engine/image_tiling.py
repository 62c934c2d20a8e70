"""How an image VAE's ``enable_tiling()`` splits a decode, declared by the VAE's architecture module.

An architecture module whose class has ``enable_tiling`` in diffusers sets a module attribute
``IMAGE_TILING = ImageTiling(...)``; the pipelines (:mod:`flopcalc.engine.pipelines.vae`) and ``memory`` find it
through the class's registered module (:func:`image_tiling`), so no list of tiled classes is kept anywhere else.

Two kinds of ``enable_tiling`` exist in diffusers 0.42.1:

* with tile sizes (``AutoencoderDC``, ``AutoencoderKLQwenImage``, ...): ``enable_tiling(tile_sample_min_height=,
  tile_sample_min_width=, tile_sample_stride_height=, tile_sample_stride_width=)``, defaults set in the class's
  ``__init__``; ``tiled_decode`` slices the latent ``z[i : i + tile // f]`` for ``i`` in ``range(0, side, stride //
  f)`` (f: the spatial compression) when a side exceeds ``tile // f``;
* without (``AutoencoderMixin.enable_tiling``, diffusers/models/autoencoders/vae.py:899, used by ``AutoencoderKL``
  and ``AutoencoderKLFlux2``): tiles of the config's ``sample_size``, overlapping by a quarter.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Mapping

from flopcalc.formulas.tiling import CallSplit, spatial_split


@dataclass(frozen=True)
class TileSizes:
    """One class's ``enable_tiling()`` as a tile size: ``default_tile(config)`` the tile side in pixels it uses by
    default, ``stride`` the default stride over the default tile (tiles overlap by 1 − stride), ``takes_sizes``
    whether ``enable_tiling`` accepts tile sizes, ``compression(config)`` pixels per latent pixel, ``source`` the lines
    of diffusers it mirrors. A video VAE's architecture module declares it as ``VIDEO_TILING`` (its plans split the
    decode themselves); an image VAE's as part of its :class:`ImageTiling`."""

    default_tile: Callable[[Mapping[str, Any]], int]
    stride: Fraction
    takes_sizes: bool
    compression: Callable[[Mapping[str, Any]], int]
    source: str

    def stride_px(self, tile_px: int) -> int:
        """The stride ``enable_tiling`` is given with a tile of ``tile_px`` (the default proportion)."""
        return int(tile_px * self.stride)

    def step(self, config: Mapping[str, Any]) -> int:
        """The smallest tile side (px) whose tile and stride are whole latent pixels: tile sizes are proposed in
        its multiples."""
        f = self.compression(config)
        k = 1
        while (k * f * self.stride).denominator != 1 or int(k * f * self.stride) % f:
            k += 1
        return k * f


@dataclass(frozen=True)
class ImageTiling(TileSizes):
    """An image VAE's ``enable_tiling()`` (:class:`TileSizes`) and how it splits the calls the image pipelines plan:
    ``decode_split(config, latent_h, latent_w, tile_px)`` the tiles ``tiled_decode`` runs at a tile side (None: the
    default), ``encode_split`` the tiled encode where planned."""

    decode_split: Callable[[Mapping[str, Any], int, int, int | None], CallSplit]
    #: ``encode_split(config, height, width)``: the tiles a tiled encode runs, where flopcalc plans it (None: a
    #: pipeline that encodes with this VAE tiled is refused)
    encode_split: Callable[[Mapping[str, Any], int, int], CallSplit] | None = None


def sized_split(config: Mapping[str, Any], latent_h: int, latent_w: int, tile_px: int, stride_px: int,
                compression: int) -> CallSplit:
    """``tiled_decode`` of a class whose tiles are ``tile_sample_min_*`` / ``tile_sample_stride_*`` pixels
    (autoencoder_dc.py:575, 667-699; autoencoder_kl_qwenimage.py:846, 973-1027): tiled when a latent side exceeds
    ``tile // f``, tiles ``z[i : i + tile // f]`` every ``stride // f`` latent pixels; else the whole latent."""
    tile, stride = tile_px // compression, stride_px // compression
    if stride < 1:  # range(0, side, 0) raises in diffusers
        from flopcalc.engine.errors import ConfigError

        raise ConfigError(f"VAE tiles of {tile_px} px every {stride_px} px are under one latent pixel at a spatial "
                          f"compression of {compression}: diffusers' tiled_decode cannot step; leave --vae-tiling off")
    if latent_w > tile or latent_h > tile:
        from flopcalc.engine.limits import check_tiles

        check_tiles(-(-latent_h // stride) * -(-latent_w // stride), "VAE tiles")
    return spatial_split(latent_h, latent_w, tile, stride)


def _declared(class_name: str, attribute: str) -> Any:
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.registry import lookup

    try:
        module = lookup(class_name, "decode").module
    except FlopcalcError:
        return None
    return getattr(importlib.import_module(module), attribute, None)


def image_tiling(class_name: str) -> ImageTiling | None:
    """The ``IMAGE_TILING`` the architecture module of ``class_name``'s decode declares, or None (no
    ``enable_tiling`` in diffusers, or not registered)."""
    return _declared(class_name, "IMAGE_TILING")


def tile_sizes(class_name: str) -> TileSizes | None:
    """The tile sizes of ``class_name``'s ``enable_tiling()``: an image VAE's ``IMAGE_TILING`` or a video VAE's
    ``VIDEO_TILING``, as its architecture module declares them (None: neither)."""
    return image_tiling(class_name) or _declared(class_name, "VIDEO_TILING")
