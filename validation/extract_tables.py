"""Regenerate the size tables flopcalc copies from diffusers' pipelines (``flopcalc/data/*.json``).

Some pipelines change the requested size before they generate (``use_resolution_binning=True``
by default): PixArt-α/Σ and SANA snap it to the aspect-ratio bin nearest ``height / width`` in a
table chosen by the transformer's ``sample_size``; HunyuanDiT maps a size outside its
``SUPPORTED_SHAPE`` to the nearest ``STANDARD_SHAPE``. flopcalc needs the same tables without
importing diffusers, so this script copies them from the installed diffusers (never by hand).

    python validation/extract_tables.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import diffusers
from diffusers.pipelines.hunyuandit import pipeline_hunyuandit as hunyuan
from diffusers.pipelines.pixart_alpha import pipeline_pixart_alpha as pixart
from diffusers.pipelines.pixart_alpha import pipeline_pixart_sigma as sigma
from diffusers.pipelines.sana import pipeline_sana as sana

DATA = Path(__file__).resolve().parent.parent / "flopcalc" / "data"
GENERATED_BY = "validation/extract_tables.py"


def _bins(tables: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """``{sample_size: {ratio: [height, width]}}`` as ints."""
    return {size: {ratio: [int(h), int(w)] for ratio, (h, w) in table.items()} for size, table in tables.items()}


def tables() -> dict[str, dict[str, Any]]:
    """File name → content of every table."""
    v = diffusers.__version__
    return {
        "pixart_aspect_ratio_bins.json": {
            "_source": f"diffusers {v} pipelines/pixart_alpha/pipeline_pixart_alpha.py (ASPECT_RATIO_1024_BIN / "
                       "_512_BIN / _256_BIN) and pipeline_pixart_sigma.py (ASPECT_RATIO_2048_BIN), keyed by "
                       "transformer sample_size",
            "_generated_by": GENERATED_BY,
            **_bins({"256": sigma.ASPECT_RATIO_2048_BIN, "128": pixart.ASPECT_RATIO_1024_BIN,
                     "64": pixart.ASPECT_RATIO_512_BIN, "32": pixart.ASPECT_RATIO_256_BIN}),
        },
        "sana_aspect_ratio_bins.json": {
            "_source": f"diffusers {v} pipelines/sana/pipeline_sana.py SanaPipeline.__call__ (ASPECT_RATIO_4096_BIN "
                       "defined there; ASPECT_RATIO_2048_BIN from pipeline_pixart_sigma.py, ASPECT_RATIO_1024_BIN / "
                       "_512_BIN from pipeline_pixart_alpha.py), keyed by transformer sample_size",
            "_generated_by": GENERATED_BY,
            **_bins({"128": sana.ASPECT_RATIO_4096_BIN, "64": sana.ASPECT_RATIO_2048_BIN,
                     "32": sana.ASPECT_RATIO_1024_BIN, "16": sana.ASPECT_RATIO_512_BIN}),
        },
        "hunyuan_dit_standard_shapes.json": {
            "_source": f"diffusers {v} pipelines/hunyuandit/pipeline_hunyuandit.py: STANDARD_RATIO, "
                       "STANDARD_SHAPE ((width, height) per ratio), SUPPORTED_SHAPE (checked as (height, width))",
            "_generated_by": GENERATED_BY,
            "standard_ratio": [float(r) for r in hunyuan.STANDARD_RATIO],
            "standard_shape": [[[int(w), int(h)] for w, h in shapes] for shapes in hunyuan.STANDARD_SHAPE],
            "supported_shape": [[int(a), int(b)] for a, b in hunyuan.SUPPORTED_SHAPE],
        },
    }


def main() -> None:
    for name, content in tables().items():
        (DATA / name).write_text(json.dumps(content, indent=1) + "\n")


if __name__ == "__main__":
    main()
