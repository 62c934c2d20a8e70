"""Live re-measurement of ``UNet2DModel`` (DDPM, DDIM, latent-diffusion super-resolution, consistency models)
against flopcalc: randomized configs built on meta and counted now, ``torch`` exact in total and for every measured
module path, parameters and ``thop`` exact. Varied: levels (1 to 4), the down / up block kinds per level
(``DownBlock2D`` / ``AttnDownBlock2D`` / ``ResnetDownsampleBlock2D`` and their mirrors), ``downsample_type`` and
``upsample_type`` (conv or resnet), the mid block (with or without attention, or none), widths, ``layers_per_block``,
``attention_head_dim`` (or null: one head per block), ``norm_num_groups``, ``resnet_time_scale_shift``,
``time_embedding_type`` (positional, fourier, learned), ``time_embedding_dim``, the class embedding (a table, the
label's sinusoid, identity, or none), in/out channels, non-square sizes. The seed is printed; ``FLOPCALC_SEED=N``
replays it."""

from __future__ import annotations

import math

import pytest

from live_support import write_config  # noqa: E402  (skips without torch)

pytestmark = pytest.mark.live

DOWN = {"DownBlock2D": "UpBlock2D", "AttnDownBlock2D": "AttnUpBlock2D",
        "ResnetDownsampleBlock2D": "ResnetUpsampleBlock2D"}


def _config(rng) -> dict:
    levels = rng.randint(1, 4)
    groups = rng.choice([1, 2, 4])
    head = rng.choice([None, 2, 4, 8])
    unit = math.lcm(groups, head or 1)
    down = [rng.choice(list(DOWN)) for _ in range(levels)]
    up = [DOWN[k] if rng.random() < 0.7 else rng.choice(list(DOWN.values())) for k in reversed(down)]
    cfg = {
        "_class_name": "UNet2DModel", "in_channels": rng.randint(1, 6), "out_channels": rng.randint(1, 6),
        "block_out_channels": [unit * rng.randint(1, 4) for _ in range(levels)], "layers_per_block": rng.randint(1, 2),
        "down_block_types": down, "up_block_types": up, "norm_num_groups": groups, "attention_head_dim": head,
        "downsample_type": rng.choice(["conv", "resnet"]), "upsample_type": rng.choice(["conv", "resnet"]),
        "mid_block_type": rng.choice(["UNetMidBlock2D", None]), "add_attention": rng.random() < 0.7,
        "resnet_time_scale_shift": rng.choice(["default", "scale_shift"]),
        "time_embedding_type": rng.choice(["positional", "fourier", "learned"]),
        "time_embedding_dim": rng.choice([None, 4 * rng.randint(2, 16)]),
    }
    cfg["block_out_channels"][0] = max(cfg["block_out_channels"][0], 4 * groups)  # conv_norm_out's groups
    if cfg["time_embedding_type"] == "learned":
        cfg["num_train_timesteps"] = rng.randint(10, 1000)
    label = rng.choice([None, "table", "timestep", "identity"])
    if label == "table":
        cfg["num_class_embeds"] = rng.randint(2, 1000)
    elif label is not None:
        cfg["class_embed_type"] = label
    return cfg


def test_random_unet_2d_configs(rng, tmp_path):
    from flopcalc.engine.registry import RunShape
    from classic_call_support import check_assembly

    for i in range(4):
        cfg = _config(rng)
        side = 2 ** (len(cfg["block_out_channels"]) - 1)
        h, w = side * rng.randint(1, 32 // side + 1), side * rng.randint(1, 32 // side + 1)
        check_assembly(write_config(tmp_path, f"unet{i}", cfg), "UNet2DModel",
                       RunShape(latent_height=h, latent_width=w), {"height": h, "width": w}, module_depth=5,
                       component="unet")
