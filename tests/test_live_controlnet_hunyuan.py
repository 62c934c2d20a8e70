"""Live re-measurement of the HunyuanDiT ControlNet (``HunyuanDiT2DControlNetModel``) against flopcalc: randomized
configs (the reconstructed v1.2 ControlNet is measured in its fixtures) varying every key the assembler reads
(heads, head width, ``transformer_num_layers`` and so the block count, patch size, channels, FFN ratio and
activation, both text widths and lengths, pooled width, style/size conditioning), planned under
``HunyuanDiTControlNetPipeline`` (resolution binning off) and built on meta:
``torch`` convention exact in total and for every module path measured, parameters exact, ``thop`` exact.
The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import json

import pytest

from live_support import SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "HunyuanDiTControlNetPipeline", "controlnet": ["diffusers", "HunyuanDiT2DControlNetModel"]}


def _check(folder, h: int, w: int, *, thop: bool = True) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    report = estimate_configs(INDEX, {"controlnet": cfg}, Settings(height=h, width=w, resolution_binning=False))
    comp = report.component("controlnet")
    text_len = cfg.get("text_len", 77) + cfg.get("text_len_t5", 256)
    assert comp.shape["text_len"] == text_len
    fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": text_len}, with_thop=thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {folder.name} {h}x{w}: {cfg}", thop=thop)


def test_random_controlnet_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim, patch = rng.randint(1, 3), rng.choice([8, 16]), rng.choice([1, 2])
        cfg = {
            "_class_name": "HunyuanDiT2DControlNetModel",
            "conditioning_channels": 3,
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "hidden_size": heads * head_dim,
            "transformer_num_layers": rng.choice([2, 4, 5, 6]),
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "mlp_ratio": rng.choice([4.0, 4.3637, 1.7]),
            "activation_fn": rng.choice(["gelu", "gelu-approximate", "geglu", "swiglu"]),
            "cross_attention_dim": rng.choice([24, 40]),
            "cross_attention_dim_t5": 8 * rng.randint(1, 3),
            "pooled_projection_dim": rng.choice([8, 24]),
            "text_len": rng.randint(1, 20),
            "text_len_t5": rng.randint(1, 30),
            "use_style_cond_and_image_meta_size": rng.random() < 0.5,
            "sample_size": 32,
        }
        h, w = random_size(rng, 16, 32, 160), random_size(rng, 16, 32, 160)
        _check(write_config(tmp_path, f"hunyuan_cn{i}", cfg), h, w)
