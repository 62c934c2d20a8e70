"""The plan-size budget: bounds on run settings that keep every estimate finite and fast.

No real generation comes near these bounds (the largest native sizes are 2048 px a side, the longest
videos a few hundred frames); they exist so that a typo (``--height 1000000``, ``--num-frames 10**9``)
is one clear error instead of minutes of tile enumeration. A user who really wants more sets
``FLOPCALC_ALLOW_LARGE=1``, which raises every bound :data:`LARGE_FACTOR`-fold (still finite).
"""

from __future__ import annotations

import math
import os
from typing import Any

from flopcalc.engine.errors import FlopcalcError

#: Setting → (largest value allowed, what it is). Sizes are pixels a side.
LIMITS: dict[str, tuple[int, str]] = {
    "height": (16384, "pixels"),
    "width": (16384, "pixels"),
    "num_frames": (4096, "frames"),
    "steps": (10_000, "steps"),
    "batch_size": (4096, "prompts"),
    "num_images_per_prompt": (4096, "images per prompt"),
    "max_sequence_length": (1 << 20, "tokens"),
    "tiles": (65536, "tiles per VAE call"),
    "num_gpus": (1 << 20, "GPUs"),
}
LARGE_FACTOR = 16
ALLOW_LARGE = "FLOPCALC_ALLOW_LARGE"


def allow_large() -> bool:
    return os.environ.get(ALLOW_LARGE) == "1"


def limit(name: str) -> int:
    """The bound on setting ``name`` now (raised when ``FLOPCALC_ALLOW_LARGE=1``)."""
    bound = LIMITS[name][0]
    return bound * LARGE_FACTOR if allow_large() else bound


def _beyond(name: str, value: int, what: str) -> FlopcalcError:
    hint = f"; set {ALLOW_LARGE}=1 to allow up to {LIMITS[name][0] * LARGE_FACTOR}" if not allow_large() else ""
    return FlopcalcError(f"{what} {value} is beyond flopcalc's budget of {limit(name)} {LIMITS[name][1]}{hint}")


def check_count(name: str, value: int, what: str) -> None:
    """A count option (``--batch-size``, ``--num-gpus``) a positive integer within the budget of ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FlopcalcError(f"{what} must be a positive integer, got {value!r}")
    if value > limit(name):
        raise _beyond(name, value, what)


def bounded(what: str, value: int | float, bound: tuple[int, str], *, large: bool) -> None:
    """``value`` within ``bound`` (largest value, unit), :data:`LARGE_FACTOR`-fold when ``large``: a family
    option's own budget (:mod:`flopcalc.engine.settings`)."""
    top = bound[0] * LARGE_FACTOR if large else bound[0]
    if value > top:
        hint = f"; set {ALLOW_LARGE}=1 to allow up to {bound[0] * LARGE_FACTOR}" if not large else ""
        raise FlopcalcError(f"{what} {value} is beyond flopcalc's budget of {top} {bound[1]}{hint}")


def check_tiles(count: int, what: str) -> None:
    """A tiled call's tile count within the budget (a tiny tile size on a large image)."""
    if count > limit("tiles"):
        raise _beyond("tiles", count, what)


def check_settings(settings: Any) -> None:
    """Every bounded setting within its budget, and the guidance scales finite numbers."""
    for name in LIMITS:
        value = getattr(settings, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit(name):
            raise _beyond(name, value, name)
    for name in ("guidance_scale", "true_cfg_scale", "strength"):
        value = getattr(settings, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise FlopcalcError(f"{name} must be a finite number, got {value!r}")
