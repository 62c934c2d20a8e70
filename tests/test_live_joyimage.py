"""Live re-measurement of JoyImage-Edit's transformers: ``JoyImageEditTransformer3DModel`` and
``JoyImageEditPlusTransformer3DModel`` with randomized width,
heads, rotary axes (given or split evenly), MLP ratio, layers, text width, channels, spatial patch and rope type,
built on the meta device and counted now, against the plan under ``JoyImageEditPipeline`` /
``JoyImageEditPlusPipeline``. The Qwen3-VL text encoders
are covered by ``test_live_krea2.py``.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.joyimage import BUCKETS  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "JoyImageEditPipeline", "transformer": ["diffusers", "JoyImageEditTransformer3DModel"]}
PLUS_INDEX = {"_class_name": "JoyImageEditPlusPipeline",
              "transformer": ["diffusers", "JoyImageEditPlusTransformer3DModel"]}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(4):
        plus = i % 2 == 1
        heads, sixth = rng.randint(1, 3), rng.choice([1, 2])
        head_dim = 6 * sixth
        patch = rng.choice([1, 2])
        cfg = {
            "_class_name": "JoyImageEditPlusTransformer3DModel" if plus else "JoyImageEditTransformer3DModel",
            "patch_size": [1, patch, patch],
            "in_channels": rng.choice([4, 16]),
            "out_channels": rng.choice([None, 4]),
            "hidden_size": heads * head_dim,
            "num_attention_heads": heads,
            "text_dim": rng.choice([8, 24]),
            "mlp_width_ratio": rng.choice([1.5, 4.0]),
            "num_layers": rng.randint(0, 3),
            "rope_dim_list": rng.choice([None, [2 * sixth, 2 * sixth, 2 * sixth]]),
            "rope_type": rng.choice(["rope", "mrope"]),
            "theta": rng.choice([256, 10000]),
        }
        h, w = (16 * rng.randint(2, 24), 16 * rng.randint(2, 24)) if plus else rng.choice(BUCKETS)
        t = rng.randint(1, 40)
        check_plan(write_config(tmp_path, f"joy_{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=PLUS_INDEX if plus else INDEX)
