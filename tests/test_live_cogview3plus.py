"""Live re-measurement of the CogView3-Plus transformer (``CogView3PlusTransformer2DModel``) against flopcalc:
randomized configs (heads, head width, depth, patch size, channels in and out, text, time and condition widths; the
card's transformer is measured in its fixtures), planned under ``CogView3PlusPipeline`` and built on meta:
``torch`` convention exact in total and for every module path measured, parameters exact, ``thop`` exact. The seed
is printed; ``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "CogView3PlusPipeline", "transformer": ["diffusers", "CogView3PlusTransformer2DModel"]}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim, patch = rng.randint(1, 3), rng.choice([8, 16]), rng.choice([1, 2])
        cfg = {
            "_class_name": "CogView3PlusTransformer2DModel", "patch_size": patch, "in_channels": rng.choice([4, 16]),
            "num_layers": rng.randint(0, 2), "attention_head_dim": head_dim, "num_attention_heads": heads,
            "out_channels": rng.choice([4, 16]), "text_embed_dim": rng.choice([24, 40]),
            "time_embed_dim": rng.choice([8, 32]), "condition_dim": rng.choice([4, 8]), "pos_embed_max_size": 64,
            "sample_size": 32,
        }
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        check_plan(write_config(tmp_path, f"cv3p{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)
