"""``AuraFlowTransformer2DModel`` against the real module, re-measured now on the meta device, on
randomized configs (joint and single block counts, heads, head width, patch size, channels, caption
width, positional table size) under ``AuraFlowPipeline`` at a random size and text length. The seed is
printed; ``FLOPCALC_SEED=N`` replays it. (The Pile-T5 encoder is ``UMT5EncoderModel``, randomized in
``tests/test_live_wan.py``.)

Bar: ``torch`` convention exact (total and every measured module path), parameters exact, ``thop``
convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_aura_flow_transformers_under_the_pipeline(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.choice([1, 2, 3]), rng.choice([8, 16, 24])
        joint = rng.randint(0, 2)
        patch = rng.choice([1, 2])
        cfg = {
            "_class_name": "AuraFlowTransformer2DModel",
            "num_mmdit_layers": joint,
            "num_single_dit_layers": rng.randint(0 if joint else 1, 2),
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "caption_projection_dim": heads * head_dim,  # the text stream is built dim wide
            "joint_attention_dim": rng.choice([16, 40]),
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "out_channels": rng.choice([4, 16]),
            "pos_embed_max_size": rng.choice([256, 1024]),
            "sample_size": 32,
        }
        h, w = random_size(rng, 16, 64, 256), random_size(rng, 16, 64, 256)
        text = rng.randint(1, 300)
        check_plan(write_config(tmp_path, f"aura{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=text),
                   {"height": h, "width": w, "text_len": text}, index={"_class_name": "AuraFlowPipeline"})
