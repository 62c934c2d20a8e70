"""Live re-measurement of BRIA FIBO's classes: ``BriaFiboTransformer2DModel`` (randomized width, heads, rotary axes,
layer counts, channels, patch size, text widths, guidance embedding) and ``SmolLM3ForCausalLM`` (widths, heads, key/value heads, layers, vocabulary, biases, tied embeddings), built on the meta
device and counted now, against the plan.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "BriaFiboPipeline", "transformer": ["diffusers", "BriaFiboTransformer2DModel"]}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        cfg = {
            "_class_name": "BriaFiboTransformer2DModel",
            "patch_size": rng.choice([1, 2]),
            "in_channels": rng.choice([16, 48]),
            "num_layers": rng.randint(0, 2),
            "num_single_layers": rng.randint(0, 2),
            "attention_head_dim": head_dim,
            "num_attention_heads": heads,
            "joint_attention_dim": rng.choice([12, 40]),
            "guidance_embeds": rng.random() < 0.5,
            "axes_dims_rope": [0, head_dim // 2, head_dim // 2],
            "text_encoder_dim": rng.choice([8, 24]),
        }
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 60)
        check_plan(write_config(tmp_path, f"fibo{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)


def test_random_smollm3_configs(rng, tmp_path):
    for i in range(2):
        kv = rng.randint(1, 2)
        cfg = {
            "architectures": ["SmolLM3ForCausalLM"],
            "model_type": "smollm3",
            "hidden_size": 8 * kv * rng.randint(1, 2),
            "intermediate_size": rng.choice([16, 40]),
            "num_hidden_layers": rng.randint(1, 3),
            "num_attention_heads": 2 * kv,
            "num_key_value_heads": kv,
            "vocab_size": rng.choice([50, 90]),
            "pad_token_id": rng.choice([None, 3]),
            "attention_bias": rng.random() < 0.5,
            "mlp_bias": rng.random() < 0.5,
            "tie_word_embeddings": rng.random() < 0.5,
        }
        seq = rng.randint(1, 40)
        check_plan(write_config(tmp_path, f"smollm3_{i}", cfg), "text_encoder", Settings(max_sequence_length=seq),
                   {"seq_len": seq})
