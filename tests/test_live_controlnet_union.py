"""Live re-measurement of the SDXL ControlNet-Union: randomized ``ControlNetUnionModel`` configs (encoder, conditioning
embedding, control types, fusion transformer width / heads / depth) planned under
``StableDiffusionXLControlNetUnionPipeline``, against the real module on meta. Same seed and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_controlnet_union_configs(tmp_path):
    rng = random.Random(SEED)
    for i in range(3):
        nb = rng.randint(2, 3)
        c0 = 32 * rng.randint(1, 2)
        heads = rng.choice([1, 2, 4])
        cfg = {
            "_class_name": "ControlNetUnionModel",
            "block_out_channels": [c0] + [32 * rng.randint(1, 3) for _ in range(nb - 1)],
            "down_block_types": [rng.choice(["CrossAttnDownBlock2D", "DownBlock2D"]) for _ in range(nb)],
            "transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
            "attention_head_dim": [rng.choice([1, 2, 4]) for _ in range(nb)],
            "cross_attention_dim": rng.choice([24, 40]),
            "use_linear_projection": rng.random() < 0.5,
            "layers_per_block": rng.randint(1, 2),
            "addition_embed_type": "text_time", "addition_time_embed_dim": 8,
            "projection_class_embeddings_input_dim": 16 + 6 * 8,
            "conditioning_channels": rng.choice([1, 3]),
            "conditioning_embedding_out_channels": [8 * rng.randint(1, 4) for _ in range(4)],
            "global_pool_conditions": rng.random() < 0.3,
            "num_control_type": rng.randint(1, 8),
            # the condition's spatial mean (c0 wide) meets the task embedding and the projection's output
            "num_trans_channel": c0, "num_trans_head": heads,
            "num_trans_layer": rng.randint(1, 2), "num_proj_channel": c0,
        }
        h, w = random_size(rng, 8, 64, 200), random_size(rng, 8, 64, 200)
        check_plan(write_config(tmp_path, f"controlnet{i}", cfg), "controlnet", Settings(height=h, width=w),
                   {"height": h, "width": w, "text_len": 77},
                   index={"_class_name": "StableDiffusionXLControlNetUnionPipeline"}, module_depth=5)


def test_defaults_are_the_class_signature():
    import inspect

    import diffusers

    from flopcalc.engine.registry import lookup

    signature = inspect.signature(diffusers.ControlNetUnionModel.__init__)
    for key, value in lookup("ControlNetUnionModel").defaults.items():
        default = signature.parameters[key].default
        assert (list(default) if isinstance(default, tuple) else default) == value, key
