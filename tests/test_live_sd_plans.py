"""Live re-measurement of the UNet features the SD-family plans of issue 12 need: randomized
``UNet2DConditionModel`` configs with ``only_cross_attention`` (per block or one flag; and
``mid_block_only_cross_attention``, which the cross-attention mid block ignores), noise-level class tables
(``num_class_embeds``: the x4 upscaler), LCM's guidance embedding (``time_cond_proj_dim``) and 7/8 input
channels, planned under ``StableDiffusionUpscalePipeline``,
``StableDiffusionInstructPix2PixPipeline`` and ``LatentConsistencyModelPipeline``, against the real modules on
meta. Same seed and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from test_live_sd_addons import _encoder_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

PIPELINES = {7: "StableDiffusionUpscalePipeline", 8: "StableDiffusionInstructPix2PixPipeline",
             4: "LatentConsistencyModelPipeline"}


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


def test_random_unets_of_the_sd_plans(rng, tmp_path):
    for i, channels in enumerate([7, 8, 4, rng.choice([7, 8, 4])]):
        nb = rng.randint(2, 3)
        only = rng.choice([rng.random() < 0.5, [rng.random() < 0.5 for _ in range(nb)]])
        cfg = {
            "_class_name": "UNet2DConditionModel",
            **_encoder_config(rng, nb, False),
            "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb)],
            "layers_per_block": rng.choice([1, 2]),
            "only_cross_attention": only,
            "mid_block_only_cross_attention": rng.choice([None, True, False]),
            "num_class_embeds": rng.choice([None, 1000]) if channels != 4 else None,
            "time_cond_proj_dim": rng.choice([16, 32]) if channels == 4 else None,
            "in_channels": channels,
            "out_channels": 4,
            "sample_size": 16,
        }
        h, w = random_size(rng, 8, 64, 200), random_size(rng, 8, 64, 200)
        check_plan(write_config(tmp_path, f"unet{i}", cfg), "unet", Settings(height=h, width=w),
                   {"height": h, "width": w, "text_len": 77}, index={"_class_name": PIPELINES[channels]},
                   module_depth=5)
