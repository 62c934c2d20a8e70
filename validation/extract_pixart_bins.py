"""Regenerate flopcalc/data/pixart_aspect_ratio_bins.json from the installed diffusers.

PixArtAlphaPipeline and PixArtSigmaPipeline snap the requested size to the nearest aspect-ratio bin of its model's
sample size (use_resolution_binning=True by default) and generates at that size; flopcalc
needs the same bins without importing diffusers, so they are copied here, by this script.

    python validation/extract_pixart_bins.py
"""

from __future__ import annotations

import json
from pathlib import Path

import diffusers
from diffusers.pipelines.pixart_alpha import pipeline_pixart_alpha as pixart
from diffusers.pipelines.pixart_alpha import pipeline_pixart_sigma as sigma

OUT = Path(__file__).resolve().parent.parent / "flopcalc" / "data" / "pixart_aspect_ratio_bins.json"


def main() -> None:
    tables = {"256": sigma.ASPECT_RATIO_2048_BIN, "128": pixart.ASPECT_RATIO_1024_BIN,
              "64": pixart.ASPECT_RATIO_512_BIN, "32": pixart.ASPECT_RATIO_256_BIN}
    out = {
        "_source": f"diffusers {diffusers.__version__} pipelines/pixart_alpha/pipeline_pixart_alpha.py "
                   "(ASPECT_RATIO_1024_BIN / _512_BIN / _256_BIN) and pipeline_pixart_sigma.py (ASPECT_RATIO_2048_BIN), "
                   "keyed by transformer sample_size",
        "_generated_by": "validation/extract_pixart_bins.py",
    }
    for sample_size, table in tables.items():
        out[sample_size] = {ratio: [int(h), int(w)] for ratio, (h, w) in table.items()}
    OUT.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
