"""Kolors against the real modules, re-measured now on the meta device: ``ChatGLMModel`` (diffusers'
vendored ChatGLM3 encoder) on randomized configs (layers, widths, heads, head width, multi-query groups,
FFN width, biases, RMSNorm or LayerNorm, final norm, vocabulary, rotary table length) at a random text
length, and randomized Kolors-style UNets (``encoder_hid_dim_type: text_proj`` with ``text_time``
conditioning) under ``KolorsPipeline`` at a random size and text length. The seed is printed;
``FLOPCALC_SEED=N`` replays it.

Bar: ``torch`` convention exact (total and every measured module path), parameters exact, ``thop``
convention exact.
"""

from __future__ import annotations

import pytest

from live_support import check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

KOLORS_INDEX = {"_class_name": "KolorsPipeline"}


def test_random_chatglm_configs(rng, tmp_path):
    for i in range(4):
        heads = rng.choice([1, 2, 4, 6])
        mqa = rng.random() < 0.6
        cfg = {
            "architectures": ["ChatGLMModel"],
            "model_type": "chatglm",
            "num_layers": rng.randint(1, 3),
            "hidden_size": rng.choice([16, 24, 40]),
            "num_attention_heads": heads,
            "kv_channels": rng.choice([4, 8, 12]),  # the head width, independent of hidden / heads
            "ffn_hidden_size": rng.choice([20, 48]),
            "multi_query_attention": mqa,
            "multi_query_group_num": rng.choice([g for g in range(1, heads + 1) if heads % g == 0]),
            "add_qkv_bias": rng.random() < 0.5,
            "add_bias_linear": rng.random() < 0.3,
            "rmsnorm": rng.random() < 0.7,
            "post_layer_norm": rng.random() < 0.7,
            "padded_vocab_size": rng.choice([64, 300]),
            "seq_length": rng.choice([64, 96]),
            "original_rope": True,  # read by ChatGLMModel.__init__, not a ChatGLMConfig default
        }
        seq = rng.randint(1, 64)
        check_plan(write_config(tmp_path, f"chatglm{i}", cfg), "text_encoder", Settings(max_sequence_length=seq),
                   {"seq_len": seq})


def test_random_kolors_unets_under_the_kolors_pipeline(rng, tmp_path):
    for i in range(3):
        nb = rng.randint(2, 3)
        cross = rng.choice([24, 40])
        pooled = rng.choice([16, 32])
        cfg = {
            "_class_name": "UNet2DConditionModel",
            "block_out_channels": [32 * rng.randint(1, 3) for _ in range(nb)],
            "down_block_types": ["DownBlock2D"] + [rng.choice(["CrossAttnDownBlock2D", "DownBlock2D"])
                                                   for _ in range(nb - 1)],
            "up_block_types": [rng.choice(["CrossAttnUpBlock2D", "UpBlock2D"]) for _ in range(nb - 1)] + ["UpBlock2D"],
            "mid_block_type": "UNetMidBlock2DCrossAttn",
            "layers_per_block": rng.choice([1, 2]),
            "transformer_layers_per_block": [rng.randint(1, 2) for _ in range(nb)],
            "attention_head_dim": [rng.choice([1, 2, 4]) for _ in range(nb)],
            "cross_attention_dim": cross,
            "encoder_hid_dim": rng.choice([48, 64]),  # ChatGLM's hidden size, projected to cross_attention_dim
            "encoder_hid_dim_type": "text_proj",
            "addition_embed_type": "text_time",
            "addition_time_embed_dim": 8,
            "projection_class_embeddings_input_dim": pooled + 6 * 8,  # the pooled ChatGLM state + 6 time ids
            "use_linear_projection": True,
            "in_channels": 4,
            "out_channels": 4,
            "sample_size": 16,
        }
        h, w = random_size(rng, 8, 64, 200), random_size(rng, 8, 64, 200)
        text = rng.randint(1, 256)
        check_plan(write_config(tmp_path, f"unet{i}", cfg), "unet",
                   Settings(height=h, width=w, max_sequence_length=text),
                   {"height": h, "width": w, "text_len": text}, index=KOLORS_INDEX, module_depth=5)
