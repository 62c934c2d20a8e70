"""Live re-measurement of NucleusMoE-Image's transformer: ``NucleusMoEImageTransformer2DModel`` with randomized
heads, key/value heads, head width (rotary axes), text width, layer count, dense/MoE strategy, experts, expert width,
capacity factors (one or per block), MLP ratio and out_channels, built on the meta device (the experts' row split
answered from the shapes: ``flopcalc/engine/measure/inputs/nucleusmoe_image.py``) and counted now, against the plan
under ``NucleusMoEImagePipeline``; and the stock module (no stand-in) run on CPU with real tensors against flopcalc,
which proves the stand-in counts what the real routing runs. The Qwen3-VL text encoders are covered by
``test_live_krea2.py``.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from conftest import SEED
from live_support import check_plan, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "NucleusMoEImagePipeline", "transformer": ["diffusers", "NucleusMoEImageTransformer2DModel"]}
STRATEGIES = ["leave_first_three_and_last_block_dense", "leave_first_three_blocks_dense", "leave_first_block_dense",
              "all_moe", "all_dense"]


def _random_config(rng) -> dict:
    kv = rng.randint(1, 2)
    quarter = rng.choice([2, 4])
    layers = rng.randint(1, 5)
    return {
        "_class_name": "NucleusMoEImageTransformer2DModel",
        "in_channels": 16,
        "out_channels": 4,
        "num_layers": layers,
        "attention_head_dim": 4 * quarter + 16,
        "num_attention_heads": kv * rng.randint(1, 2),
        "num_key_value_heads": kv,
        "joint_attention_dim": rng.choice([16, 40]),
        "axes_dims_rope": [2 * quarter, quarter + 8, quarter + 8],
        "mlp_ratio": rng.choice([4.0, 6.0]),
        "moe_enabled": rng.random() < 0.8,
        "dense_moe_strategy": rng.choice(STRATEGIES),
        "num_experts": rng.choice([2, 4, 8]),
        "moe_intermediate_dim": rng.choice([8, 24]),
        "capacity_factors": rng.choice([1.0, 1.5, [rng.choice([0.5, 1.0, 2.0]) for _ in range(layers)]]),
        "use_sigmoid": rng.random() < 0.5,
    }


def _dense_width_ok(cfg: dict) -> bool:
    dim = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    return int(dim * cfg["mlp_ratio"] * 2 / 3) // 128 * 128 > 0


def test_random_transformer_configs(rng, tmp_path):
    done = 0
    while done < 3:
        cfg = _random_config(rng)
        if not _dense_width_ok(cfg):
            continue
        h, w = random_size(rng, 16, 32, 160), random_size(rng, 16, 32, 160)
        t = 8 * rng.randint(1, 8)  # the pipeline pads the text to a multiple of 8 (test_pipeline_nucleusmoe_image.py)
        check_plan(write_config(tmp_path, f"nucleus_{done}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t),
                   {"height": h, "width": w, "text_len": t}, index=INDEX)
        done += 1


def test_stock_module_on_cpu_counts_as_flopcalc(rng):
    """The real expert-choice routing (``num_tokens_per_expert.tolist()`` on real data) on CPU, no stand-in."""
    import torch
    from diffusers import NucleusMoEImageTransformer2DModel

    from flopcalc.engine.measure.harness import count_torch
    from flopcalc.flops.estimate import estimate_configs

    cfg = _random_config(rng)
    while not _dense_width_ok(cfg):
        cfg = _random_config(rng)
    cfg.update(moe_enabled=True, dense_moe_strategy="leave_first_block_dense", num_layers=max(2, cfg["num_layers"]))
    if isinstance(cfg["capacity_factors"], list):
        cfg["capacity_factors"] = cfg["capacity_factors"] + [1.0] * (cfg["num_layers"] - len(cfg["capacity_factors"]))
    torch.manual_seed(SEED)
    model = NucleusMoEImageTransformer2DModel(**{k: v for k, v in cfg.items() if k != "_class_name"}).eval()
    h, w = random_size(rng, 16, 32, 128), random_size(rng, 16, 32, 128)
    t = 8 * rng.randint(1, 5)
    rows, cols = h // 16, w // 16
    inputs = {"hidden_states": torch.randn(1, rows * cols, 16), "img_shapes": [(1, rows, cols)],
              "encoder_hidden_states": torch.randn(1, t, cfg["joint_attention_dim"]), "timestep": torch.rand(1)}
    measured = count_torch(model, inputs)
    report = estimate_configs(INDEX, {"transformer": cfg}, Settings(height=h, width=w, max_sequence_length=t))
    (comp,) = [c for c in report.components if c.component == "transformer"]
    where = f"seed {SEED}: {h}×{w}, {t} tokens: {cfg}"
    assert 2 * comp.macs_per_run == measured["flops"], where
    for path, flops in measured["by_module"].items():
        node = comp.tree if path == "Global" else comp.tree.find(path)
        assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, (path, where)
