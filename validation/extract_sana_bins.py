"""Regenerate flopcalc/data/sana_aspect_ratio_bins.json from the installed diffusers.

SanaPipeline snaps the requested size to the nearest aspect-ratio bin of a table chosen by the
transformer's sample_size (use_resolution_binning=True by default: 128 -> ASPECT_RATIO_4096_BIN,
64 -> ASPECT_RATIO_2048_BIN, 32 -> ASPECT_RATIO_1024_BIN, 16 -> ASPECT_RATIO_512_BIN; any other
sample_size raises "Invalid sample size") and generates at that size; flopcalc needs the same bins
without importing diffusers, so they are copied here, by this script.

    python validation/extract_sana_bins.py
"""

from __future__ import annotations

import json
from pathlib import Path

import diffusers
from diffusers.pipelines.sana import pipeline_sana as sana

OUT = Path(__file__).resolve().parent.parent / "flopcalc" / "data" / "sana_aspect_ratio_bins.json"


def main() -> None:
    tables = {"128": sana.ASPECT_RATIO_4096_BIN, "64": sana.ASPECT_RATIO_2048_BIN,
              "32": sana.ASPECT_RATIO_1024_BIN, "16": sana.ASPECT_RATIO_512_BIN}
    out = {
        "_source": f"diffusers {diffusers.__version__} pipelines/sana/pipeline_sana.py SanaPipeline.__call__ "
                   "(ASPECT_RATIO_4096_BIN defined there; ASPECT_RATIO_2048_BIN from pipeline_pixart_sigma.py, "
                   "ASPECT_RATIO_1024_BIN / _512_BIN from pipeline_pixart_alpha.py), keyed by transformer sample_size",
        "_generated_by": "validation/extract_sana_bins.py",
    }
    for sample_size, table in tables.items():
        out[sample_size] = {ratio: [int(h), int(w)] for ratio, (h, w) in table.items()}
    OUT.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
