"""Live re-measurement of the Qwen-Image ControlNet (``QwenImageControlNetModel``) against flopcalc: the Union
geometry (``validation/configs/qwen-image-controlnet-union``) at a random size and text length, and randomized
configs (heads, head width, block count, channels, the inpainting condition's extra channels, text width), planned
under ``QwenImageControlNetPipeline`` / ``QwenImageControlNetInpaintPipeline`` and built on meta: ``torch``
convention exact in total and for every module path measured, parameters exact, ``thop`` exact. The seed is
printed; ``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import json

import pytest

from live_support import REPO, SEED, assert_matches_measurement, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.flops.estimate import estimate_configs  # noqa: E402

pytestmark = pytest.mark.live


def _check(folder, h: int, w: int, text: int, *, thop: bool = True) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    pipeline = "QwenImageControlNetInpaintPipeline" if cfg.get("extra_condition_channels") else \
        "QwenImageControlNetPipeline"
    index = {"_class_name": pipeline, "controlnet": ["diffusers", "QwenImageControlNetModel"]}
    report = estimate_configs(index, {"controlnet": cfg}, Settings(height=h, width=w, max_sequence_length=text))
    comp = report.component("controlnet")
    fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": text}, with_thop=thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {folder.name} {h}x{w}, {text} tokens: {cfg}", thop=thop)


def test_union_controlnet_at_random_size(rng):
    h, w, text = random_size(rng, 16, 128, 512), random_size(rng, 16, 128, 512), rng.randint(1, 512)
    _check(REPO / "validation/configs/qwen-image-controlnet-union/controlnet", h, w, text, thop=False)


def test_random_controlnet_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        cfg = {
            "_class_name": "QwenImageControlNetModel", "patch_size": 2, "in_channels": rng.choice([16, 64]),
            "out_channels": 4, "num_layers": rng.randint(0, 2), "attention_head_dim": head_dim,
            "num_attention_heads": heads, "joint_attention_dim": rng.choice([24, 40]),
            "axes_dims_rope": [4, 4, 8] if head_dim == 16 else [2, 2, 4],
            "extra_condition_channels": rng.choice([0, 4]),
        }
        h, w, text = random_size(rng, 16, 32, 160), random_size(rng, 16, 32, 160), rng.randint(1, 30)
        _check(write_config(tmp_path, f"qwen_cn{i}", cfg), h, w, text)
