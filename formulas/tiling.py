r"""How one component call is made: whole, in temporal chunks, in spatial tiles, or both.

A video VAE decodes a latent (encodes a video) in one call or, as its own switches say
(``use_tiling``, ``use_framewise_decoding`` / ``_encoding``, ``use_framewise_decoding`` for LTX)
and its own tile parameters (``tile_sample_min_*``, ``tile_sample_stride_*``,
``tile_overlap_factor_*``), in overlapping slices, each an independent call of the same modules.
Every such slicing in diffusers is the same loop (``tiled_decode``, ``tiled_encode``,
``_temporal_tiled_decode``, ``_temporal_tiled_encode`` of every ``autoencoder_kl_*.py``)::

    for i in range(0, size, stride):
        piece = x[..., i : i + window, ...]      # min(window, size − i) long

:func:`slices` is that rule, written once. A :class:`CallSplit` is the product of three slicings
(frames × rows × columns): the one description of how a call is made. Each video VAE
architecture computes it from its config and the switches the pipeline set
(``decode_split`` / ``encode_split`` in ``flopcalc/engine/architectures/autoencoder_kl_*.py``, mirroring the
model's own dispatch: "tile when a side exceeds the tile"). The split is then realised in one of
two ways, both summing the pieces as ``FlopCounterMode`` sums a module's calls:

* as runs: the pipeline plan turns each distinct piece shape into a ``ComponentRun`` of the whole
  call (the report folds them into one row whose tree lists the ``pieces``: Wan, LTX, CogVideoX,
  whose pieces are spatial tiles and whose laws refuse tiling);
* in the tree: the plan puts the split on the run shape (``RunShape.split``) and the assembler
  sums the pieces into one tree (HunyuanVideo, whose default temporal chunking has an exact law in
  the frame count: piecewise ``floor`` / ``Min`` terms, which a run count cannot carry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

Slices = tuple[tuple[Any, Any], ...]  # ((extent, count), ...), longest first


def slices(size: Any, window: int, stride: int) -> Slices:
    r"""The extents of ``x[i : i + window]`` for ``i`` in ``range(0, size, stride)`` (each
    ``min(window, size − i)``), as ``((extent, count), …)``, longest first.

    A symbolic ``size`` (a sympy expression, or a tracked int of a symbolic plan: its expression)
    gives the exact law: :math:`n = \lceil S/s \rceil` slices, the last :math:`\ell = S - s(n-1)`
    long, the one before :math:`\min(w, \ell + s)`, the other :math:`n - 2` full; exact whenever
    there are at least two slices (callers take that branch only then)."""
    expr = getattr(size, "expr", None)  # a symbolic plan's tracked int
    if expr is None and isinstance(size, int):
        counts: dict[int, int] = {}
        for i in range(0, size, stride):
            n = min(window, size - i)
            counts[n] = counts.get(n, 0) + 1
        return tuple(sorted(counts.items(), reverse=True))
    import sympy as sp  # symbolic path only

    size = size if expr is None else expr
    n = sp.floor((size + stride - 1) / stride)
    last = size - stride * (n - 1)
    return ((window, n - 2), (sp.Min(window, last + stride), 1), (last, 1))


def whole(size: Any) -> Slices:
    """One slice: the whole extent (a symbolic plan's tracked int: its expression)."""
    return ((getattr(size, "expr", size), 1),)


def extents(size: int, window: int, stride: int) -> list[int]:
    """:func:`slices` written out in order: one extent per slice (``[16, 8]`` for 22, 16, 14)."""
    return [min(window, size - i) for i in range(0, size, stride)]


@dataclass(frozen=True)
class CallSplit:
    """How one call is made: ``frames`` × ``rows`` × ``cols`` slices (each ``((extent, count), …)``;
    ``frames`` None: the frames are not split into separate calls, whatever their count). A video VAE
    architecture's ``decode_split`` / ``encode_split`` make it; ``CallSplit.of(f, h, w)`` is the whole
    call."""

    frames: Slices | None
    rows: Slices
    cols: Slices

    @classmethod
    def of(cls, frames: Any, height: Any, width: Any) -> CallSplit:
        """The whole call on ``frames × height × width`` (``frames`` None: frames not split)."""
        return cls(None if frames is None else whole(frames), whole(height), whole(width))

    def pieces(self) -> Iterator[tuple[tuple[Any, Any, Any], Any]]:
        """``((frames, height, width), calls)`` for every distinct piece shape, largest first."""
        for f, nf in self.frames or ((None, 1),):
            for h, nh in self.rows:
                for w, nw in self.cols:
                    yield (f, h, w), nf * nh * nw

    def tiles(self) -> dict[tuple[Any, Any], Any]:
        """``(height, width) → calls`` of the spatial tiles, frames left whole (largest first)."""
        return {(h, w): nh * nw for h, nh in self.rows for w, nw in self.cols}

    @property
    def is_whole(self) -> bool:
        return all(len(axis) == 1 and axis[0][1] == 1 for axis in (self.frames or ((None, 1),), self.rows, self.cols))

    @property
    def calls(self) -> Any:
        """Calls in all."""
        return sum(n for _, n in self.pieces())


def tiled_or_whole(height: Any, width: Any, tile_h: int, tile_w: int, stride_h: int, stride_w: int,
                   tiling: bool) -> tuple[Slices, Slices]:
    """``(rows, cols)`` of the VAEs' spatial dispatch: ``tiled_decode`` / ``tiled_encode`` run when
    ``use_tiling`` is on and either side exceeds its tile, else the whole frame in one call."""
    if tiling and (height > tile_h or width > tile_w):
        return slices(height, tile_h, stride_h), slices(width, tile_w, stride_w)
    return whole(height), whole(width)


def spatial_split(height: Any, width: Any, tile: int, stride: int, tiling: bool = True) -> CallSplit:
    """The :class:`CallSplit` of a square-tiled ``tiled_decode`` / ``tiled_encode`` (frames never split): tiles of
    ``tile`` every ``stride`` when ``tiling`` and a side exceeds the tile (:func:`tiled_or_whole`), else the whole
    call."""
    return CallSplit(None, *tiled_or_whole(height, width, tile, tile, stride, stride, tiling))
