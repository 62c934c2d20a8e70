"""Regenerate flopcalc/data/hunyuan_dit_standard_shapes.json from the installed diffusers.

HunyuanDiTPipeline (use_resolution_binning=True by default) maps a size that is not one of its
SUPPORTED_SHAPE to the nearest standard shape (``map_to_standard_shapes``: the closest aspect
ratio in STANDARD_RATIO, then the closest area among that ratio's STANDARD_SHAPE entries) and
generates there. flopcalc needs the same tables without importing diffusers, so this script
copies them.

    python validation/extract_hunyuan_sizes.py
"""

from __future__ import annotations

import json
from pathlib import Path

import diffusers
from diffusers.pipelines.hunyuandit import pipeline_hunyuandit as hunyuan

OUT = Path(__file__).resolve().parent.parent / "flopcalc" / "data" / "hunyuan_dit_standard_shapes.json"


def main() -> None:
    out = {
        "_source": f"diffusers {diffusers.__version__} pipelines/hunyuandit/pipeline_hunyuandit.py: STANDARD_RATIO, "
                   "STANDARD_SHAPE ((width, height) per ratio), SUPPORTED_SHAPE (checked as (height, width))",
        "_generated_by": "validation/extract_hunyuan_sizes.py",
        "standard_ratio": [float(r) for r in hunyuan.STANDARD_RATIO],
        "standard_shape": [[[int(w), int(h)] for w, h in shapes] for shapes in hunyuan.STANDARD_SHAPE],
        "supported_shape": [[int(a), int(b)] for a, b in hunyuan.SUPPORTED_SHAPE],
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
