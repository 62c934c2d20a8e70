"""Live re-measurement of ModelScope's ``UNet3DConditionModel`` and I2VGen-XL's ``I2VGenXLUNet``: randomized
configs (block types and widths, head widths, depths, padding, text width) at random sizes and frame counts,
planned under ``TextToVideoSDPipeline`` / ``I2VGenXLPipeline`` and compared with the real module on meta (total,
every module path to depth 5, parameters, thop). Same seed and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


def _config(rng: random.Random, cls: str) -> dict:
    """A random small config of ``cls``: block widths multiples of the head width ``attention_head_dim``."""
    nb = rng.randint(2, 3)
    head = rng.choice([8, 16])
    cfg = {
        "_class_name": cls,
        "block_out_channels": [head * rng.randint(1, 4) for _ in range(nb)],
        "attention_head_dim": head,
        "norm_num_groups": 8,
        "down_block_types": [rng.choice(["CrossAttnDownBlock3D", "DownBlock3D"]) for _ in range(nb)],
        "up_block_types": [rng.choice(["CrossAttnUpBlock3D", "UpBlock3D"]) for _ in range(nb)],
        "layers_per_block": rng.choice([1, 2]),
        "cross_attention_dim": rng.choice([24, 40]),
        "in_channels": 4,
        "out_channels": 4,
        "sample_size": 16,
    }
    if cls == "UNet3DConditionModel":
        cfg["downsample_padding"] = rng.choice([0, 1])
    return cfg


@pytest.mark.parametrize("cls, pipeline, cases", [("UNet3DConditionModel", "TextToVideoSDPipeline", 4),
                                                  ("I2VGenXLUNet", "I2VGenXLPipeline", 3)])
def test_random_configs(rng, tmp_path, cls, pipeline, cases):
    for i in range(cases):
        cfg = _config(rng, cls)
        h, w = random_size(rng, 8, 64, 160), random_size(rng, 8, 64, 160)
        frames = rng.randint(1, 10)
        check_plan(write_config(tmp_path, f"unet{i}", cfg), "unet", Settings(height=h, width=w, num_frames=frames),
                   {"height": h, "width": w, "num_frames": frames, "text_len": 77}, index={"_class_name": pipeline},
                   module_depth=5)
