#!/usr/bin/env python
"""Check the tile-size law of ``flopcalc.gpu_memory.vae_tiles`` against decodes measured at a second tile size, and
write its largest relative error per class to ``flopcalc/data/vae_tile_error.json``.

For every fit ``<Class>.decode:tiled@<T>px:<config>`` in ``flopcalc/data/activation_fit.json`` (cases with
``vae_tile`` in ``validation/activation_manifest.yaml``; a video VAE's at one frame count), each measured point
(n, peak) is predicted from the fit at the class's default tile and its untiled decode fit
(:meth:`flopcalc.gpu_memory.vae_tiles.TileLaw.elements`), both attention paths; the error is
|predicted − measured| / measured, the largest over the points.

    python validation/tile_size_error.py           # write flopcalc/data/vae_tile_error.json
    python validation/tile_size_error.py --check   # recompute, compare, write nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))
FITS = REPO_ROOT / "flopcalc" / "data" / "activation_fit.json"
OUT = REPO_ROOT / "flopcalc" / "data" / "vae_tile_error.json"


def _latent_frames(card: str, component: str, num_frames: int | None) -> int | None:
    """The latent frames a video VAE's decode was measured on (flopcalc's plan of the card at those frames; the
    frame count is held fixed within a case); None for an image VAE."""
    if num_frames is None:
        return None
    from flopcalc.flops.estimate import estimate

    return estimate(card, num_frames=num_frames).component(component, "decode").shape.get("latent_frames")


def build() -> dict:
    from flopcalc.gpu_memory.activations import peak_elements
    from flopcalc.gpu_memory.vae_tiles import tile_law

    fits = json.loads(FITS.read_text(encoding="utf-8"))
    out: dict = {}
    for key, entry in sorted(fits.items()):
        head, _, digest = key.rpartition(":")
        if ":tiled@" not in head:
            continue
        class_name, tiled = head.split(".decode:")
        tile = int(tiled.removeprefix("tiled@").removesuffix("px"))
        default = fits[f"{class_name}.decode:tiled:{digest}"]
        card, component = entry["measured_on"].split("/")
        config = json.loads((REPO_ROOT / "model_cards" / card / component / "config.json").read_text(encoding="utf-8"))
        frames = _latent_frames(card, component, entry["settings"].get("num_frames"))
        law = tile_law(component, class_name, config, 1, 1, frames)
        rows = []
        for attention in ("fused", "math"):
            for n, peak in entry[attention]["points"]:
                predicted = law.elements(peak_elements(default[attention], n, frames), tile, attention)
                rows.append({"attention": attention, "n": n, "measured": peak, "predicted": predicted,
                             "rel_error": abs(predicted - peak) / peak})
        worst = max(r["rel_error"] for r in rows)
        out[class_name] = {"tile_px": tile, "default_tile_px": law.default_tile, "measured_on": entry["measured_on"],
                           "max_rel_error": worst, "points": rows}
        print(f"{class_name:28s} tiles of {tile} px (default {law.default_tile}): largest error {100 * worst:.1f}%")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = json.dumps(build(), indent=2, sort_keys=True) + "\n"
    if args.check:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
