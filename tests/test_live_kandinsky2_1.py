"""Live re-measurement of Kandinsky 2.1's new classes against flopcalc: ``MultilingualCLIP`` (XLM-R + the linear map;
width, layers, heads, FFN width, vocabulary, the projection width, the text length) and the ``text_image`` /
``text_image_proj`` ``UNet2DConditionModel`` (levels, the added-KV block kinds, mid block, widths, head widths,
``layers_per_block``, ``cross_attention_dim`` (the image embedding's width too), ``encoder_hid_dim``, in/out channels,
the text length, non-square sizes): built on meta and counted now, ``torch`` exact in total and per measured module,
parameters and ``thop`` exact. The seed is printed; ``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import math

import pytest

from live_support import write_config  # noqa: E402  (skips without torch)

pytestmark = pytest.mark.live


def test_random_multilingual_clip_configs(rng, tmp_path):
    from flopcalc.engine.registry import RunShape
    from classic_call_support import check_assembly

    for i in range(2):
        heads = rng.randint(1, 4)
        d = heads * rng.randint(2, 8)
        cfg = {"architectures": ["MultilingualCLIP"], "model_type": "xlm-roberta", "hidden_size": d,
               "num_attention_heads": heads, "num_hidden_layers": rng.randint(1, 3), "intermediate_size": rng.randint(4, 64),
               "vocab_size": rng.randint(10, 2000), "max_position_embeddings": 514, "type_vocab_size": 1,
               "pad_token_id": 1, "transformerDimensions": d, "numDims": rng.randint(4, 48)}
        n = rng.randint(1, 100)
        check_assembly(write_config(tmp_path, f"te{i}", cfg), "MultilingualCLIP", RunShape(seq_len=n), {"seq_len": n},
                       component="text_encoder")


def test_random_text_image_unet_configs(rng, tmp_path):
    from flopcalc.engine.registry import RunShape
    from classic_call_support import check_assembly

    for i in range(2):
        levels = rng.randint(1, 3)
        groups = rng.choice([1, 2, 4])
        head_dims = [rng.choice([2, 4, 8]) for _ in range(levels)]
        attn = [rng.random() < 0.6 for _ in range(levels)]
        attn[-1] = True
        cfg = {"_class_name": "UNet2DConditionModel", "in_channels": rng.choice([4, 9]), "out_channels": 8,
               "addition_embed_type": "text_image", "encoder_hid_dim_type": "text_image_proj",
               "encoder_hid_dim": rng.randint(4, 48), "cross_attention_dim": rng.randint(4, 40),
               "down_block_types": ["SimpleCrossAttnDownBlock2D" if a else "ResnetDownsampleBlock2D" for a in attn],
               "up_block_types": ["SimpleCrossAttnUpBlock2D" if a else "ResnetUpsampleBlock2D" for a in attn[::-1]],
               "mid_block_type": rng.choice(["UNetMidBlock2DSimpleCrossAttn", None]),
               "block_out_channels": [math.lcm(groups, *head_dims) * rng.randint(1, 3) for _ in range(levels)],
               "layers_per_block": rng.randint(1, 2), "norm_num_groups": groups,
               "attention_head_dim": head_dims if rng.random() < 0.5 else head_dims[0],
               "resnet_time_scale_shift": rng.choice(["scale_shift", "default"])}
        side = 2 ** (levels - 1)
        h, w = side * rng.randint(1, 16 // side + 1), side * rng.randint(1, 16 // side + 1)
        text = rng.randint(1, 80)
        check_assembly(write_config(tmp_path, f"unet{i}", cfg), "UNet2DConditionModel",
                       RunShape(latent_height=h, latent_width=w, text_len=text),
                       {"height": 8 * h, "width": 8 * w, "text_len": text}, module_depth=5, component="unet")
