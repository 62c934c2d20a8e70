"""Live re-measurement of Krea 2's classes: ``Krea2Transformer2DModel`` (randomized width, heads, key/value heads,
MLP widths, text fusion geometry, layer counts, channels) and the Qwen3-VL text encoders (``Qwen3VLModel``,
``Qwen3VLForConditionalGeneration``: text widths, heads, layers, vocabulary, tied embeddings, vision tower geometry
and deepstack mergers), built on the meta device and counted now, against the plan.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        kv, head_dim = rng.randint(1, 2), rng.choice([8, 16])
        t_kv = rng.randint(1, 2)
        layers = rng.randint(1, 4)
        cfg = {
            "_class_name": "Krea2Transformer2DModel",
            "in_channels": rng.choice([16, 64]),
            "num_layers": rng.randint(0, 2),
            "attention_head_dim": head_dim,
            "num_attention_heads": kv * rng.randint(1, 2),
            "num_key_value_heads": kv,
            "intermediate_size": rng.choice([24, 40]),
            "timestep_embed_dim": rng.choice([8, 32]),
            "text_hidden_dim": 8 * t_kv * 2,
            "num_text_layers": layers,
            "text_num_attention_heads": 2 * t_kv,
            "text_num_key_value_heads": t_kv,
            "text_intermediate_size": rng.choice([16, 40]),
            "num_layerwise_text_blocks": rng.randint(0, 2),
            "num_refiner_text_blocks": rng.randint(0, 2),
            "axes_dims_rope": [head_dim // 4, head_dim // 4, head_dim // 2],
        }
        index = {"_class_name": "Krea2Pipeline", "text_encoder_select_layers": list(range(layers)),
                 "transformer": ["diffusers", "Krea2Transformer2DModel"]}
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 60)
        check_plan(write_config(tmp_path, f"krea2_{i}", cfg), "transformer",
                   Settings(height=h, width=w, max_sequence_length=t), {"height": h, "width": w, "text_len": t},
                   index=index)


def test_random_qwen3_vl_configs(rng, tmp_path):
    for i in range(2):
        kv = rng.randint(1, 2)
        heads = rng.randint(1, 2)
        cfg = {
            "architectures": [rng.choice(["Qwen3VLModel", "Qwen3VLForConditionalGeneration"])],
            "model_type": "qwen3_vl",
            "tie_word_embeddings": rng.random() < 0.5,
            "text_config": {"hidden_size": rng.choice([16, 32]), "intermediate_size": rng.choice([24, 40]),
                            "num_hidden_layers": rng.randint(1, 3), "num_attention_heads": 2 * kv,
                            "num_key_value_heads": kv, "head_dim": rng.choice([8, 16]), "vocab_size": rng.choice([50, 90]),
                            "attention_bias": rng.random() < 0.5},
            "vision_config": {"depth": rng.randint(0, 2), "hidden_size": 8 * heads, "intermediate_size": rng.choice([16, 24]),
                              "num_heads": heads, "patch_size": rng.choice([4, 8]), "temporal_patch_size": rng.choice([1, 2]),
                              "spatial_merge_size": rng.choice([1, 2]), "out_hidden_size": rng.choice([16, 24]),
                              "num_position_embeddings": rng.choice([16, 64]),
                              "deepstack_visual_indexes": rng.choice([[], [0], [0, 1]])},
        }
        seq = rng.randint(1, 40)
        check_plan(write_config(tmp_path, f"qwen3vl_{i}", cfg), "text_encoder", Settings(max_sequence_length=seq),
                   {"seq_len": seq})
