"""``memory --vae-tiling --gpu``: the largest tile a tiled VAE decode (image or video) can use and still fit the GPU.

The tiled decode's peak at the class's default tile ``T0`` is measured and fitted in the whole latent's positions n
(:mod:`flopcalc.gpu_memory.activations`, key ``decode:tiled``). At another tile side ``T`` (``enable_tiling(
tile_sample_min_height=T, tile_sample_min_width=T, tile_sample_stride_height=s·T, tile_sample_stride_width=s·T)``,
``s`` the default stride over the default tile, so the overlap keeps its proportion) the decoded tiles held until
they are blended cover the image in the same proportion, and what changes is the one tile being decoded:

    peak(n, T) = tiled(n, T0) − untiled(n_T0) + untiled(n_T),    n_T = (T / f)² [× t]

with ``untiled`` the class's measured untiled decode law (the decode of one tile is an untiled decode of the tile)
and f the spatial compression; a video VAE's tile runs over all t latent frames (LTX-Video's, each tile in one call;
Wan's and EasyAnimate's, one latent frame per decoder call: n_T as their untiled fit counts positions,
``activations.positions``). The classes: those whose architecture module declares ``IMAGE_TILING`` or
``VIDEO_TILING`` (:func:`flopcalc.engine.image_tiling.tile_sizes`). ``validation/tile_size_error.py`` compares this
with decodes measured at a second tile size (``decode:tiled@<T>px`` fits) and writes its largest relative error per
class to ``flopcalc/data/vae_tile_error.json``; the advice carries it.

The largest tile that fits is searched in multiples of the class's step (:meth:`TileSizes.step`: tile and
stride whole latent pixels), below the image's longer side (a tile that large decodes the image whole) and no larger
than the largest tile whose one-tile decode the untiled fit measured (:attr:`TileLaw.largest_measured`), by the
tool's own ``fits`` (``peak_bytes`` against the GPU's memory) with the derived peak in place of the default
tile's. A class whose ``enable_tiling()`` takes no sizes (``AutoencoderKL``, ``AutoencoderKLFlux2``) gets no
size: the advice says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

_ERRORS = Path(__file__).resolve().parents[1] / "data" / "vae_tile_error.json"
#: The largest error of a class's tile-size law (``validation/tile_size_error.py``) at which a tile size is proposed:
#: the activation fits' bound (``tests/test_memory_activation_fit_errors.py``). Wan's and LTX-Video's laws over-state
#: the peak at a second tile by up to 40% (their untiled decode, which the law scales, holds the decoded video too):
#: no size is proposed for them.
TILE_LAW_BOUND = 0.15


@lru_cache(maxsize=1)
def _errors() -> dict[str, Any]:
    if not _ERRORS.exists():
        return {}
    with _ERRORS.open(encoding="utf-8") as fh:
        return json.load(fh)


@dataclass(frozen=True)
class TileLaw:
    """A tiled VAE decode's peak as a function of the tile side (GPU-independent): the class's untiled decode fits
    (``untiled``, per attention path), the tiling's geometry, and a video's latent frames (``latent_frames``; None
    for an image) with how its untiled fit counts positions (``per_frame``)."""

    component: str
    class_name: str
    takes_sizes: bool
    default_tile: int
    stride: Fraction
    step: int
    compression: int
    longest_side: int
    source: str
    untiled: Mapping[str, Any] = field(hash=False, compare=False)
    latent_frames: int | None = None
    per_frame: bool = False

    def _untiled(self, tile_px: int, attention: str) -> int:
        from flopcalc.gpu_memory.activations import latent_frames, peak_elements, positions

        shape = tile_shape(tile_px, self.compression, self.latent_frames)
        return peak_elements(self.untiled[attention], positions(shape, per_frame=self.per_frame),
                             latent_frames(shape))

    def elements(self, at_default: int, tile_px: int, attention: str) -> int:
        """The batch-1 peak at tile side ``tile_px``, from the one at the default tile (module docstring)."""
        return max(0, at_default - self._untiled(self.default_tile, attention) + self._untiled(tile_px, attention))

    @property
    def largest_measured(self) -> int:
        """The largest tile side (a multiple of :attr:`step`) whose one-tile decode lies within the untiled fit's
        measured positions: larger tiles would extrapolate it, so they are not proposed."""
        n_max = min(e["n_range"][1] for a, e in self.untiled.items() if a in ("fused", "math"))
        per_tile_pixel = 1 if self.per_frame or self.latent_frames is None else self.latent_frames
        side = int((n_max / per_tile_pixel) ** 0.5) * self.compression
        return side // self.step * self.step

    @property
    def error(self) -> float | None:
        """The measured largest relative error of the tile-size law for this class (None: not checked)."""
        entry = _errors().get(self.class_name)
        return None if entry is None else entry["max_rel_error"]


@dataclass(frozen=True)
class TileAdvice:
    """The largest tile side (px) whose estimated peak fits the GPU (None: none does, or the class takes no size),
    its stride, the estimate's ``peak_bytes`` there, and the reason when there is no size."""

    class_name: str
    takes_sizes: bool
    default_tile: int
    tile: int | None
    stride: int | None
    peak_bytes: int | None
    tile_law_error: float | None
    reason: str

    @property
    def text(self) -> str:
        if self.tile is None:
            return f"vae tiles: {self.reason}"
        err = "" if self.tile_law_error is None else f", tile-size law error {100 * self.tile_law_error:.1f}%"
        if "not estimated" in self.reason:
            err += "; larger tiles not estimated"
        return (f"vae tiles: the largest that fits is {self.tile} px every {self.stride} px "
                f"(vae.enable_tiling(tile_sample_min_height={self.tile}, tile_sample_min_width={self.tile}, "
                f"tile_sample_stride_height={self.stride}, tile_sample_stride_width={self.stride}); default "
                f"{self.default_tile} px; peak_bytes then {self.peak_bytes / 2**30:,.2f} GiB{err})")

    def to_dict(self) -> dict[str, Any]:
        return {"class_name": self.class_name, "enable_tiling_takes_sizes": self.takes_sizes,
                "default_tile_px": self.default_tile, "largest_fitting_tile_px": self.tile,
                "stride_px": self.stride, "peak_bytes": self.peak_bytes, "tile_law_max_rel_error": self.tile_law_error,
                "reason": self.reason}


def tile_shape(tile_px: int, compression: int, latent_frames: int | None) -> dict[str, int]:
    """The run shape of one square tile's decode: ``tile_px / compression`` latent pixels a side, over a video's
    ``latent_frames`` (none for an image)."""
    side = tile_px // compression
    return {"latent_height": side, "latent_width": side,
            **({} if latent_frames is None else {"latent_frames": latent_frames})}


def tile_law(component: str, class_name: str, config: Mapping[str, Any], height: int, width: int,
             latent_frames: int | None = None) -> TileLaw | None:
    """The :class:`TileLaw` of a tiled decode of ``class_name`` (of ``latent_frames`` for a video; None: the class
    declares no tile sizes, or its untiled decode was not measured)."""
    from flopcalc.engine.image_tiling import tile_sizes
    from flopcalc.gpu_memory.activations import fit_entry, per_frame

    tiling = tile_sizes(class_name)
    if tiling is None:
        return None
    f = tiling.compression(config)
    tile = tiling.default_tile(config)
    untiled = fit_entry(class_name, "decode", config, tile_shape(tile, f, latent_frames))
    if untiled is None:
        return None
    return TileLaw(component, class_name, tiling.takes_sizes, tile, tiling.stride, tiling.step(config), f,
                   max(height, width), tiling.source, untiled, latent_frames, per_frame(class_name, "decode"))


def _with_tile(est: Any, law: TileLaw, tile_px: int) -> Any:
    """``est`` with the tiled decode's activation peak at tile side ``tile_px``."""
    acts = []
    for a in est.activations:
        if (a.component, a.call) == (law.component, "decode"):
            a = replace(a, **{att: replace(p, elements=law.elements(p.elements, tile_px, att))
                              for att, p in (("fused", a.fused), ("math", a.math)) if p is not None})
        acts.append(a)
    return replace(est, activations=tuple(acts))


def largest_tile(est: Any) -> TileAdvice | None:
    """The largest tile side that fits ``est``'s GPU by its ``fits`` (None without a GPU or a tile law)."""
    law = est.tile_law
    if law is None or est.gpu_memory_bytes is None:
        return None

    def advice(tile: int | None, reason: str, peak: int | None = None) -> TileAdvice:
        return TileAdvice(law.class_name, law.takes_sizes, law.default_tile, tile,
                          None if tile is None else int(tile * law.stride), peak, law.error, reason)

    if not law.takes_sizes:
        return advice(None, f"{law.class_name}'s enable_tiling() takes no tile sizes (tiles of the config's "
                            f"sample_size, {law.default_tile} px): no other tile size to propose")
    if law.error is None or law.error > TILE_LAW_BOUND:
        how = "not checked" if law.error is None else f"off by up to {100 * law.error:.0f}%"
        return advice(None, f"the tile-size law of {law.class_name} is {how} against decodes measured at a second "
                            "tile size (validation/tile_size_error.py): no other tile size proposed")
    whole = (law.longest_side - 1) // law.step * law.step  # a tile of the longer side or more decodes whole
    top = min(whole, law.largest_measured)

    def fits(tile: int) -> bool:
        return _with_tile(est, law, tile).fits is not False

    if top < law.step or not fits(law.step):
        smallest = _with_tile(est, law, law.step)
        if smallest.peak_at != f"{law.component}.decode":
            return advice(None, f"no tile size makes it fit: the peak is at {smallest.peak_at}, not the VAE decode")
        return advice(None, f"no tile size fits: even {law.step}-px tiles leave the estimate above the GPU's memory")
    lo, hi = law.step, top
    while lo < hi:  # the peak grows with the tile: the largest that fits
        mid = (lo + hi + law.step) // (2 * law.step) * law.step
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - law.step)
    why = "the largest tile side whose estimated peak_bytes is within the GPU's memory"
    if lo == top < whole:
        why += (f" up to {top} px, the largest tile whose decode the untiled fit measured (larger tiles are not "
                "estimated)")
    return advice(lo, why, _with_tile(est, law, lo).peak_bytes)
