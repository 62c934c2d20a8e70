"""Live re-measurement of ``BriaTransformer2DModel``: randomized configs (width, heads, rotary axes, layer counts,
channels, patch size, text width) built on the meta device and counted now, against the plan at a random size and
text length; the card's transformer at a random size.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import REPO, check_plan, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "BriaPipeline", "transformer": ["diffusers", "BriaTransformer2DModel"]}


def test_random_configs(rng, tmp_path):
    for i in range(2):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        cfg = {
            "_class_name": "BriaTransformer2DModel",
            "patch_size": rng.choice([1, 2]),
            "in_channels": rng.choice([16, 64]),
            "num_layers": rng.randint(0, 2),
            "num_single_layers": rng.randint(0, 2),
            "attention_head_dim": head_dim,
            "num_attention_heads": heads,
            "joint_attention_dim": rng.choice([12, 40]),
            "pooled_projection_dim": None,
            "guidance_embeds": False,
            "axes_dims_rope": [0, head_dim // 2, head_dim // 2],
        }
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 60)
        check_plan(write_config(tmp_path, f"bria{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)


def test_card_transformer_at_random_size(rng):
    h, w, t = random_size(rng, 16, 128, 768), random_size(rng, 16, 128, 768), rng.randint(1, 512)
    check_plan(REPO / "model_cards/bria-3.2/transformer", "transformer",
               Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
               index=INDEX, thop=False)
