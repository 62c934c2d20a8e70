"""CogView4 against the real modules, re-measured now on the meta device: ``CogView4Transformer2DModel``
on randomized configs (layers, heads, head width, patch size, channels, text width, time and condition
widths) under ``CogView4Pipeline`` at a random size and text length, and ``GlmModel`` (GLM-4) on
randomized configs (layers, widths, heads, key/value heads, head width, MLP width, biases, partial
rotary factor, vocabulary) at a random text length. The seed is printed; ``FLOPCALC_SEED=N`` replays it.

Bar: ``torch`` convention exact (total and every measured module path), parameters exact, ``thop``
convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_cogview4_transformers_under_the_pipeline(rng, tmp_path):
    for i in range(4):
        patch = rng.choice([1, 2])
        cfg = {
            "_class_name": "CogView4Transformer2DModel",
            "num_layers": rng.randint(1, 3),
            "num_attention_heads": rng.choice([1, 2, 3]),
            "attention_head_dim": rng.choice([8, 12, 16]),  # a multiple of 4 (the 2-D rotary split)
            "patch_size": patch,
            "in_channels": rng.choice([4, 16]),
            "out_channels": rng.choice([4, 16]),
            "text_embed_dim": rng.choice([24, 40]),
            "time_embed_dim": rng.choice([16, 32]),
            "condition_dim": rng.choice([8, 16]),
            "rope_axes_dim": [rng.choice([32, 64]), rng.choice([32, 64])],
            "sample_size": 16,
        }
        h, w = random_size(rng, 16, 64, 256), random_size(rng, 16, 64, 256)
        text = 16 * rng.randint(1, 8)
        check_plan(write_config(tmp_path, f"cogview{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=text),
                   {"height": h, "width": w, "text_len": text}, index={"_class_name": "CogView4Pipeline"})


def test_random_glm_configs(rng, tmp_path):
    for i in range(4):
        heads = rng.choice([1, 2, 4, 6])
        cfg = {
            "architectures": ["GlmModel"],
            "model_type": "glm",
            "hidden_size": heads * rng.choice([4, 6, 10]),
            "num_attention_heads": heads,
            "num_key_value_heads": rng.choice([k for k in range(1, heads + 1) if heads % k == 0]),
            "head_dim": rng.choice([4, 8, 12]),  # independent of hidden_size / heads
            "intermediate_size": rng.choice([20, 48]),
            "num_hidden_layers": rng.randint(1, 3),
            "vocab_size": rng.choice([64, 300]),
            "attention_bias": rng.random() < 0.5,
            "partial_rotary_factor": rng.choice([0.5, 1.0]),
            "max_position_embeddings": 128,
            "pad_token_id": 0,  # GlmConfig's default pad id (151329) lies outside these small vocabularies
        }
        seq = rng.randint(1, 64)
        check_plan(write_config(tmp_path, f"glm{i}", cfg), "text_encoder", Settings(max_sequence_length=seq),
                   {"seq_len": seq})
