"""Live re-measurement of AnimateDiff's ``UNetMotionModel``: randomized configs (block types, per-block heads,
transformer and temporal-transformer depths, the motion mid block or the 2-D one, linear projections, SDXL's
``text_time`` embedding) at random sizes and frame counts, planned under ``AnimateDiffPipeline`` and compared with
the real module on meta (total, every module path to depth 5, parameters, thop). Same seed and bar as
``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, check_plan, measure, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


def _motion_unet_config(rng: random.Random) -> dict:
    nb = rng.randint(2, 3)
    cfg = {
        "_class_name": "UNetMotionModel",
        "block_out_channels": [16 * rng.randint(1, 3) for _ in range(nb)],
        "norm_num_groups": 8,
        "down_block_types": [rng.choice(["CrossAttnDownBlockMotion", "DownBlockMotion"]) for _ in range(nb)],
        "up_block_types": [rng.choice(["CrossAttnUpBlockMotion", "UpBlockMotion"]) for _ in range(nb)],
        "layers_per_block": rng.choice([1, 2]),
        "transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
        "temporal_transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
        "num_attention_heads": rng.choice([2, [rng.choice([1, 2, 4]) for _ in range(nb)]]),
        "motion_num_attention_heads": rng.choice([2, [rng.choice([1, 2, 4]) for _ in range(nb)]]),
        "motion_max_seq_length": 24,
        "use_motion_mid_block": rng.random() < 0.5,
        "mid_block_layers": rng.randint(1, 2),
        "cross_attention_dim": rng.choice([24, 40]),
        "use_linear_projection": rng.random() < 0.5,
        "downsample_padding": rng.choice([0, 1]),
        "in_channels": 4,
        "out_channels": 4,
        "sample_size": 16,
    }
    if rng.random() < 0.3:
        cfg.update(addition_embed_type="text_time", addition_time_embed_dim=8,
                   projection_class_embeddings_input_dim=16 + 6 * 8)
    return cfg


def test_random_motion_unets(rng, tmp_path):
    for i in range(4):
        cfg = _motion_unet_config(rng)
        h, w = random_size(rng, 8, 64, 160), random_size(rng, 8, 64, 160)
        frames = rng.randint(1, 12)
        check_plan(write_config(tmp_path, f"unet{i}", cfg), "unet", Settings(height=h, width=w, num_frames=frames),
                   {"height": h, "width": w, "num_frames": frames, "text_len": 77},
                   index={"_class_name": "AnimateDiffPipeline"}, module_depth=5)


def test_random_motion_adapters_weights(rng, tmp_path):
    """A ``MotionAdapter`` runs nothing; its parameters and ``pos_embed`` buffers (what memory counts) against the
    real module built on meta."""
    from measure_weights import loaded_bytes

    from flopcalc.gpu_memory.weights import component_weights

    for i in range(3):
        nb = rng.randint(2, 4)
        cfg = {"_class_name": "MotionAdapter", "block_out_channels": [16 * rng.randint(1, 3) for _ in range(nb)],
               "motion_layers_per_block": rng.choice([1, 2, [rng.randint(1, 2) for _ in range(nb)]]),
               "motion_num_attention_heads": rng.choice([2, [rng.choice([1, 2, 4]) for _ in range(nb)]]),
               "motion_norm_num_groups": 8, "motion_max_seq_length": rng.choice([16, 32]),
               "use_motion_mid_block": rng.random() < 0.5, "motion_mid_block_layers_per_block": rng.randint(1, 2)}
        model = measure.build_model(write_config(tmp_path, f"adapter{i}", cfg))
        real = loaded_bytes(model, "fp16")
        ours = component_weights(cfg, component="motion_adapter", dtype="fp16")
        assert (ours.params, ours.bytes) == (real["params"], real["bytes"]), f"seed {SEED}: {cfg}"
