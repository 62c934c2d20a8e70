"""Live re-measurement of HunyuanDiT (``HunyuanDiT2DModel``) against flopcalc, and of the
pipeline's resolution binning against diffusers' own function.

The bundled v1.2 transformer at a random size, and randomized configs varying every key the
assembler reads (heads, head width, layers incl. the long skips, patch size, channels, sigma
output, FFN ratio and activation, both text widths and lengths, pooled width, style/size
conditioning), are built on meta and counted now: ``torch`` convention exact in total and for
every module path measured, parameters exact in total and per top-level child, ``thop`` exact.
The seed is printed; ``FLOPCALC_SEED=N`` replays it (the pattern of tests/test_live.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from live_support import REPO, SEED, assert_matches_measurement, measure  # noqa: E402  (skips without torch)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live



def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(lo // multiple, hi // multiple)


def _check(config_dir: Path, height: int, width: int, *, with_thop: bool = True) -> None:
    """flopcalc (denoiser-only plan, no binning) against the harness on the same forward."""
    cfg = json.loads((config_dir / "config.json").read_text())
    report = estimate_configs(None, {"transformer": cfg}, Settings(height=height, width=width,
                                                                   resolution_binning=False))
    comp = report.component("transformer")
    text_len = cfg.get("text_len", 77) + cfg.get("text_len_t5", 256)
    assert comp.shape["text_len"] == text_len
    fx = measure.measure_component(config_dir, settings={"height": height, "width": width, "text_len": text_len},
                                   with_thop=with_thop)
    where = f"seed {SEED}, {config_dir.name} {height}x{width}"
    assert_matches_measurement(comp, fx, where, thop=with_thop)


def test_hunyuandit_v12_transformer_at_random_size(rng):
    h, w = _size(rng, 16, 256, 768), _size(rng, 16, 256, 768)
    _check(REPO / "model_cards/hunyuandit-v1.2/transformer", h, w, with_thop=False)


def test_random_hunyuan_dit_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
        patch = rng.choice([1, 2, 4])
        cfg = {
            "_class_name": "HunyuanDiT2DModel",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "hidden_size": heads * head_dim,  # the model only runs when they agree
            "num_layers": rng.choice([0, 1, 2, 4, 6]),
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "learn_sigma": rng.random() < 0.5,
            "mlp_ratio": rng.choice([4.0, 4.3637, 2.5, 1.7]),
            "activation_fn": rng.choice(["gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu",
                                         "linear-silu"]),
            "cross_attention_dim": rng.choice([24, 40]),
            "cross_attention_dim_t5": 8 * rng.randint(1, 5),
            "pooled_projection_dim": rng.choice([8, 24]),
            "text_len": rng.randint(1, 20),
            "text_len_t5": rng.randint(1, 30),
            "use_style_cond_and_image_meta_size": rng.random() < 0.5,
            "sample_size": 32,
            "norm_type": "layer_norm",
        }
        folder = tmp_path / f"hunyuan{i}"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(cfg))
        multiple = max(16, 8 * patch)  # the pipeline floors sides to multiples of 16
        h, w = _size(rng, multiple, 32, 256), _size(rng, multiple, 32, 256)
        _check(folder, h, w)


def test_resolution_binning_is_diffusers_own():
    """flopcalc's copy of the tables and of ``map_to_standard_shapes`` against diffusers, on a grid
    of sizes (both orientations, supported and unsupported, every standard ratio's neighbourhood)."""
    from diffusers.pipelines.hunyuandit import pipeline_hunyuandit as pipe

    from flopcalc.engine.pipelines.hunyuan_dit import _shapes, hunyuan_binned_size

    tables = _shapes()
    assert tables["standard_ratio"] == [float(r) for r in pipe.STANDARD_RATIO]
    assert tables["standard_shape"] == [[list(s) for s in shapes] for shapes in pipe.STANDARD_SHAPE]
    assert tables["supported_shape"] == [list(s) for s in pipe.SUPPORTED_SHAPE]
    for height in range(256, 2049, 80):
        for width in range(256, 2049, 48):
            if (height, width) in pipe.SUPPORTED_SHAPE:
                expected = (height, width)
            else:
                w, h = pipe.map_to_standard_shapes(width, height)
                expected = (int(h), int(w))
            assert hunyuan_binned_size(height, width) == expected, (height, width)


def test_pipeline_rotary_grid_matches_the_token_grid():
    """The rotary table the pipeline builds has one row per image token the assembler counts."""
    import torch
    from flopcalc.engine.measure.inputs.hunyuan_dit import hunyuan_rotary_emb

    from flopcalc.engine.registry import RunShape, assemble

    folder = REPO / "model_cards/hunyuandit-v1.2/transformer"
    model = measure.build_model(folder)
    rope = hunyuan_rotary_emb(model, 768, 1344)
    assert rope.device == torch.device("meta") and tuple(rope.shape) == (2, 48 * 84, 88)
    cfg = json.loads((folder / "config.json").read_text())
    tree = assemble(cfg, RunShape(latent_height=96, latent_width=168, text_len=333), component="transformer")
    assert tree.find("proj_out").cost.linear == 48 * 84 * 1408 * 2 * 2 * 8
