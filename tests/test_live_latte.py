"""Live re-measurement of ``LatteTransformer3DModel`` (Latte), built on the meta device and counted now as
``LattePipeline`` calls it: randomized configs (heads, widths, layers, patch size, activation, attention bias, norm
affine, caption width, video length) at random sizes, text lengths and frame counts (the video length, or one frame).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_configs(rng, tmp_path):
    for i in range(3):
        heads, head_dim, patch = rng.randint(1, 3), rng.choice([8, 16]), rng.choice([1, 2])
        length = rng.randint(2, 6)
        cfg = {"_class_name": "LatteTransformer3DModel", "num_attention_heads": heads, "attention_head_dim": head_dim,
               "in_channels": 4, "out_channels": rng.choice([None, 8]), "num_layers": rng.randint(1, 2),
               "cross_attention_dim": heads * head_dim, "attention_bias": rng.random() < 0.5,
               "sample_size": rng.choice([4, 8]), "patch_size": patch,
               "activation_fn": rng.choice(["geglu", "gelu", "gelu-approximate"]), "num_embeds_ada_norm": 1000,
               "norm_type": "ada_norm_single", "norm_elementwise_affine": rng.random() < 0.5,
               "caption_channels": rng.choice([8, 24]), "video_length": length}
        h, w = random_size(rng, 8 * patch, 8, 64), random_size(rng, 8 * patch, 8, 64)
        frames, text = rng.choice([1, length]), rng.randint(1, 40)
        check_plan(write_config(tmp_path, f"latte{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=frames, max_sequence_length=text, steps=1),
                   {"height": h, "width": w, "num_frames": frames, "text_len": text},
                   index={"_class_name": "LattePipeline"})
