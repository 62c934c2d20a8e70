"""Live re-measurement of ``LongCatImageTransformer2DModel``: randomized configs (width, heads, rotary axes, layer
counts, channels, patch size, text width) built on the meta device and counted now, against the plan at a random
size, and with an edit pipeline's reference tokens after the latent's.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import SEED, assert_matches_measurement, check_plan, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "LongCatImagePipeline", "transformer": ["diffusers", "LongCatImageTransformer2DModel"]}


def _config(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
    return {
        "_class_name": "LongCatImageTransformer2DModel",
        "patch_size": rng.choice([1, 2]),
        "in_channels": rng.choice([16, 64]),
        "num_layers": rng.randint(0, 2),
        "num_single_layers": rng.randint(0, 2),
        "attention_head_dim": head_dim,
        "num_attention_heads": heads,
        "joint_attention_dim": rng.choice([12, 40]),
        "pooled_projection_dim": rng.choice([8, 40]),
        "axes_dims_rope": [head_dim // 4, head_dim // 4, head_dim // 2],
    }


def test_random_configs(rng, tmp_path):
    cfg = _config(rng)
    h, w = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256)
    check_plan(write_config(tmp_path, "longcat", cfg), "transformer", Settings(height=h, width=w),
               {"height": h, "width": w, "text_len": 512}, index=INDEX)


def test_random_config_with_reference_tokens(rng, tmp_path):
    cfg = _config(rng)
    h, w, rh, rw = (random_size(rng, 16, 32, 160) for _ in range(4))
    t = rng.randint(1, 40)
    folder = write_config(tmp_path, "longcat_edit", cfg)
    tree = assemble(cfg, RunShape(latent_height=h // 8, latent_width=w // 8, text_len=t,
                                  reference_tokens=(rh // 16) * (rw // 16)), component="transformer")
    fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": t, "reference_height": rh,
                                                     "reference_width": rw})

    class Comp:
        macs_per_run = tree.total.macs("torch")
        params = tree.total.params

    Comp.tree = tree
    assert_matches_measurement(Comp, fx, f"seed {SEED}, {h}×{w} + {rh}×{rw}, {t} tokens: {cfg}")
