"""Live re-measurement of DeepFloyd IF's UNet (``UNet2DConditionModel`` with ``addition_embed_type: text``) against
flopcalc: randomized configs built on meta and counted now, ``torch`` convention exact in total and for every module
path measured, parameters exact, ``thop`` exact. Varied: levels (1 to 3), the added-KV block kinds per level, the mid
block (or none), widths, ``layers_per_block`` (int or per level), ``attention_head_dim``, ``cross_attention_dim``
and ``encoder_hid_dim`` (the T5 width the ``TextTimeEmbedding`` pools, or none: then the cross-attention width),
``addition_embed_type_num_heads``, ``cross_attention_norm`` (group_norm or none), ``only_cross_attention`` (one flag
or per level) and ``mid_block_only_cross_attention``, ``class_embed_type`` timestep (stage II's noise level),
``resnet_time_scale_shift``, ``time_embedding_dim``, the text length, non-square sizes. The seed is printed;
``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import math
import random

import pytest

from live_support import write_config  # noqa: E402  (skips without torch)

pytestmark = pytest.mark.live


def _config(rng: random.Random) -> dict:
    levels = rng.randint(1, 3)
    head_dims = [rng.choice([4, 8, 16]) for _ in range(levels)]
    groups = rng.choice([2, 4, 8])
    stage_ii = rng.random() < 0.5
    norm_cross = rng.random() < 0.7
    heads = rng.choice([1, 2, 4])
    hid = rng.choice([None, 8 * rng.randint(1, 6) * heads])
    cross = 32 * rng.randint(1, 2) if norm_cross else 4 * rng.randint(1, 10)
    attn_levels = [rng.random() < 0.6 for _ in range(levels)]
    attn_levels[-1] = True  # keep some attention for the harness to count
    only = [rng.random() < 0.3 for _ in range(levels)]
    cfg = {
        "_class_name": "UNet2DConditionModel",
        "in_channels": 6 if stage_ii else 3,
        "out_channels": 6,
        "addition_embed_type": "text",
        "addition_embed_type_num_heads": heads,
        "encoder_hid_dim": hid,
        "encoder_hid_dim_type": "text_proj" if hid else None,
        "cross_attention_norm": "group_norm" if norm_cross else None,
        "down_block_types": ["SimpleCrossAttnDownBlock2D" if a else "ResnetDownsampleBlock2D" for a in attn_levels],
        "up_block_types": ["SimpleCrossAttnUpBlock2D" if a else "ResnetUpsampleBlock2D" for a in attn_levels[::-1]],
        "mid_block_type": rng.choice(["UNetMidBlock2DSimpleCrossAttn", None]),
        "block_out_channels": [math.lcm(groups, *head_dims) * rng.randint(1, 3) for _ in range(levels)],
        "layers_per_block": rng.choice([rng.randint(1, 2), [rng.randint(1, 2) for _ in range(levels)]]),
        "norm_num_groups": groups,
        "attention_head_dim": head_dims if rng.random() < 0.5 else head_dims[0],
        "cross_attention_dim": cross,
        "only_cross_attention": only if rng.random() < 0.5 else only[0],
        "mid_block_only_cross_attention": rng.choice([None, True, False]),
        "resnet_time_scale_shift": rng.choice(["scale_shift", "default"]),
        "time_embedding_dim": rng.choice([None, 4 * rng.randint(2, 12)]),
        "act_fn": "gelu",
    }
    if hid is None:  # the text states are the cross-attention width, which the pooling's heads must divide
        cfg["addition_embed_type_num_heads"] = math.gcd(cross, heads)
    if stage_ii:
        cfg["class_embed_type"] = "timestep"
    return cfg


def test_random_if_unet_configs(rng, tmp_path):
    from flopcalc.engine.registry import RunShape
    from classic_call_support import check_assembly

    for i in range(3):
        cfg = _config(rng)
        multiple = 2 ** (len(cfg["block_out_channels"]) - 1)
        h, w = multiple * rng.randint(1, 24 // multiple + 1), multiple * rng.randint(1, 24 // multiple + 1)
        text = rng.randint(1, 80)
        check_assembly(write_config(tmp_path, f"unet{i}", cfg), "UNet2DConditionModel",
                       RunShape(latent_height=h, latent_width=w, text_len=text),
                       {"height": h, "width": w, "text_len": text, "vae_scale": 1}, module_depth=5, component="unet")
