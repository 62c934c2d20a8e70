"""Live re-measurement of ``SanaVideoTransformer3DModel`` on randomized configs (heads, widths, patch, qk norms,
biases, affine norms, Mix-FFN ratio, layers) under ``SanaVideoPipeline`` and, with its per-token timestep, under
``SanaImageToVideoPipeline``, at random sizes, frame counts and text lengths. The seed is printed;
``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured module path),
parameters exact, ``thop`` exact."""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def _random_config(rng) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([6, 8, 12])
    patch = rng.choice([[1, 2, 2], [1, 1, 1], [2, 2, 2]])
    channels = rng.choice([4, 16])
    return {
        "_class_name": "SanaVideoTransformer3DModel", "in_channels": channels, "out_channels": rng.choice([None, 8]),
        "num_attention_heads": heads, "attention_head_dim": head_dim, "num_layers": rng.randint(0, 2),
        "num_cross_attention_heads": rng.randint(1, 3), "cross_attention_head_dim": rng.choice([4, 8]),
        "cross_attention_dim": heads * head_dim, "caption_channels": rng.choice([12, 20]),
        "mlp_ratio": rng.choice([2.5, 3.0, 1.7]), "attention_bias": rng.random() < 0.5, "sample_size": 30,
        "patch_size": patch, "norm_elementwise_affine": rng.random() < 0.5,
        "qk_norm": rng.choice([None, "rms_norm_across_heads"]), "rope_max_seq_len": 64,
    }


@pytest.mark.parametrize("pipeline", ["SanaVideoPipeline", "SanaImageToVideoPipeline"])
def test_random_configs(rng, tmp_path, pipeline):
    index = {"_class_name": pipeline}
    for i in range(3):
        cfg = _random_config(rng)
        h, w = random_size(rng, 32, 32, 160), random_size(rng, 32, 32, 160)
        f, t = 4 * rng.randint(cfg["patch_size"][0] - 1, 3) + 1, rng.randint(1, 40)
        measured = {"height": h, "width": w, "num_frames": f, "text_len": t}
        if pipeline == "SanaImageToVideoPipeline":
            measured["expand_timesteps"] = 1
        check_plan(write_config(tmp_path, f"{pipeline}{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, max_sequence_length=t, resolution_binning=False,
                            steps=2), measured, index=index)
