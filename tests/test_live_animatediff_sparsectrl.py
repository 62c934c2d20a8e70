"""Live re-measurement of SparseCtrl's ``SparseControlNetModel``: randomized configs (block types, depths, heads,
motion depths and heads, linear projections, scale-shift ResNets, the simplified or the full conditioning embedding,
with or without the mask channel, an explicit mid-block depth) at random sizes and frame counts, called as
``AnimateDiffSparseControlNetPipeline`` calls it (one or two rows, one conditioning video) on the real module built
on meta, against flopcalc's plan of that pipeline (the row embedding the conditioning, and the other row): total,
every module path to depth 5, parameters, thop; and the weights memory (parameters and the motion modules'
``pos_embed`` buffers) against the real module's. Same seed and bar as ``test_live.py``."""

from __future__ import annotations

import random

import pytest

from live_support import SEED, assert_runs_match, measure, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


def _config(rng: random.Random) -> dict:
    nb = rng.randint(2, 3)
    return {
        "_class_name": "SparseControlNetModel",
        "block_out_channels": [16 * rng.randint(1, 3) for _ in range(nb)], "norm_num_groups": 8,
        "down_block_types": [rng.choice(["CrossAttnDownBlockMotion", "DownBlockMotion"]) for _ in range(nb)],
        "layers_per_block": rng.choice([1, 2]), "cross_attention_dim": rng.choice([24, 40]),
        "transformer_layers_per_block": rng.choice([1, 2, [rng.randint(1, 2) for _ in range(nb)]]),
        "transformer_layers_per_mid_block": rng.choice([None, 2]),
        "temporal_transformer_layers_per_block": rng.choice([1, [rng.randint(1, 2) for _ in range(nb)]]),
        "attention_head_dim": rng.choice([2, 4]), "motion_num_attention_heads": rng.choice([1, 2]),
        "use_linear_projection": rng.random() < 0.5, "resnet_time_scale_shift": rng.choice(["default", "scale_shift"]),
        "use_simplified_condition_embedding": rng.random() < 0.5, "conditioning_channels": rng.choice([3, 4]),
        "conditioning_embedding_out_channels": [8, 8, 16, 16], "concat_conditioning_mask": rng.random() < 0.8,
        "motion_max_seq_length": 24,
    }


def test_random_sparse_controlnets(rng, tmp_path):
    from measure_weights import loaded_bytes

    from flopcalc.gpu_memory.weights import component_weights

    for i in range(3):
        cfg = _config(rng)
        h, w, frames, rows = random_size(rng, 8, 32, 96), random_size(rng, 8, 32, 96), rng.randint(1, 5), rng.choice([1, 2])
        where = f"seed {SEED}, {h}x{w}, {frames} frames, {rows} row(s): {cfg}"
        model = measure.build_model(write_config(tmp_path, f"controlnet{i}", cfg))
        inputs, _ = measure.build_inputs(model, {"height": h, "width": w, "num_frames": frames, "text_len": 77,
                                                 "rows": rows})
        fx = measure.measure_model(model, inputs, module_depth=5)
        comp = estimate_configs({"_class_name": "AnimateDiffSparseControlNetPipeline"}, {"controlnet": cfg},
                                Settings(height=h, width=w, num_frames=frames, guidance_scale=7.5 if rows == 2 else 1.0,
                                         steps=3)).component("controlnet")
        pieces = comp.tree.children if comp.tree.formula == "pieces" else (comp.tree,)
        assert comp.runs == 3 and sum(p.count for p in pieces) == rows, where
        assert_runs_match([(p.count, p) for p in pieces], comp.params, fx, where)
        real = loaded_bytes(model, "fp16")
        ours = component_weights(cfg, component="controlnet", dtype="fp16")
        assert (ours.params, ours.bytes) == (real["params"], real["bytes"]), where
