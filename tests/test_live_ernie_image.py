"""Live re-measurement of ERNIE-Image's classes: ``ErnieImageTransformer2DModel`` (randomized width, heads,
feed-forward width, layers, channels, patch size, text width, rotary axes) and ``Mistral3Model``'s text path
(randomized Ministral-3 / Mistral text configs), built on the meta device and counted now, against the plan.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

INDEX = {"_class_name": "ErnieImagePipeline", "transformer": ["diffusers", "ErnieImageTransformer2DModel"]}


def test_random_transformer_configs(rng, tmp_path):
    for i in range(2):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 16])
        cfg = {
            "_class_name": "ErnieImageTransformer2DModel",
            "hidden_size": heads * head_dim,
            "num_attention_heads": heads,
            "num_layers": rng.randint(0, 2),
            "ffn_hidden_size": rng.choice([16, 40]),
            "in_channels": rng.choice([16, 128]),
            "out_channels": rng.choice([16, 128]),
            "patch_size": rng.choice([1, 2]),
            "text_in_dim": rng.choice([heads * head_dim, 24]),
            "rope_axes_dim": [head_dim // 4, head_dim // 4, head_dim // 2],
            "qk_layernorm": True,
        }
        h, w, t = random_size(rng, 32, 64, 320), random_size(rng, 32, 64, 320), rng.randint(1, 60)
        check_plan(write_config(tmp_path, f"ernie{i}", cfg), "transformer",
                   Settings(height=h, width=w).with_options(prompt_tokens=t), {"height": h, "width": w, "text_len": t},
                   index=INDEX)


def test_random_mistral3_model_configs(rng, tmp_path):
    kv = rng.randint(1, 2)
    cfg = {
        "architectures": ["Mistral3Model"],
        "model_type": "mistral3",
        "text_config": {"model_type": rng.choice(["ministral3", "mistral"]), "hidden_size": rng.choice([16, 32]),
                        "intermediate_size": rng.choice([24, 40]), "num_hidden_layers": rng.randint(1, 2),
                        "num_attention_heads": 2 * kv, "num_key_value_heads": kv, "head_dim": rng.choice([8, 16]),
                        "vocab_size": rng.choice([50, 90])},
        "vision_config": {"model_type": "pixtral", "hidden_size": 16, "intermediate_size": rng.choice([16, 24]),
                          "num_hidden_layers": rng.randint(0, 2), "num_attention_heads": 2, "patch_size": 4},
        "spatial_merge_size": rng.choice([1, 2]),
    }
    seq = rng.randint(1, 40)
    check_plan(write_config(tmp_path, "mistral3", cfg), "text_encoder", Settings(max_sequence_length=seq),
               {"seq_len": seq})
