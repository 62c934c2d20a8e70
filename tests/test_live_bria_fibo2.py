"""Live re-measurement of BRIA FIBO 2's transformer: ``BriaFibo2Transformer2DModel`` with randomized width, heads,
patch, channels, layer counts (refiner, main, Perceiver), injection blocks (some past the last layer: not built),
gist bounds, step and text span, and text length (below, inside and above the span, so the gist count is clamped or
rounded), built on the meta device and counted now, against the plan under ``BriaFibo2Pipeline``. The Qwen3-VL text
encoders are covered by ``test_live_krea2.py``.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "BriaFibo2Pipeline", "transformer": ["diffusers", "BriaFibo2Transformer2DModel"]}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(3):
        heads, head_quarter = rng.randint(1, 3), rng.choice([2, 4])
        head_dim = 4 * head_quarter
        layers = rng.randint(0, 4)
        lo_gist = 4 * rng.randint(1, 3)
        lo_text = rng.randint(0, 20)
        cfg = {
            "_class_name": "BriaFibo2Transformer2DModel",
            "in_channels": rng.choice([4, 8]),
            "patch_size": rng.choice([1, 2]),
            "dim": heads * head_dim,
            "n_layers": layers,
            "n_refiner_layers": rng.randint(0, 2),
            "n_heads": heads,
            "cap_feat_dim": rng.choice([12, 24]),
            "injection_layer_ids": sorted(rng.sample(range(6), rng.randint(0, 3))),
            "perceiver_num_layers": rng.randint(0, 2),
            "min_num_gist_tokens": lo_gist,
            "max_num_gist_tokens": lo_gist + 4 * rng.randint(0, 3),
            "gist_step": rng.choice([1, 4]),
            "gist_min_text_len": lo_text,
            "gist_max_text_len": lo_text + rng.randint(1, 40),
            "axes_dims": [head_quarter, head_quarter, 2 * head_quarter],
            "axes_lens": [64, 64, 64],
        }
        h, w = random_size(rng, 16, 16, 160), random_size(rng, 16, 16, 160)
        t = rng.randint(1, 80)
        check_plan(write_config(tmp_path, f"fibo2_{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)
