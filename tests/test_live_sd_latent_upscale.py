"""Live re-measurement of the k-diffusion ``UNet2DConditionModel`` (KDownBlock2D, KCrossAttnDownBlock2D,
KCrossAttnUpBlock2D, KUpBlock2D; the x2 latent upscaler's) against flopcalc: randomized configs built on meta and
counted now, ``torch`` exact in total and for every measured module path, parameters and ``thop`` exact. Varied:
levels (2 to 4, the first down block plain or cross-attention, the last up block plain or not), widths (multiples of
32, the ResNets' group size: the first up block's self-attention needs its width equal to the time embedding's),
``layers_per_block``, ``attention_head_dim``, ``cross_attention_dim``, ``time_cond_proj_dim`` (or none),
``time_embedding_dim``, in/out channels, 1×1 or 3×3 ``conv_in`` / ``conv_out``, the text length, non-square sizes.
The seed is printed; ``FLOPCALC_SEED=N`` replays it."""

from __future__ import annotations

import pytest

from live_support import write_config  # noqa: E402  (skips without torch)

pytestmark = pytest.mark.live


def _config(rng) -> dict:
    levels = rng.randint(2, 4)
    top = 32 * rng.randint(1, 3)
    channels = sorted(32 * rng.randint(1, 3) for _ in range(levels - 1)) + [top]
    channels[-1] = max(channels)
    head = rng.choice([8, 16, 32])
    kernel = rng.choice([1, 3])
    return {
        "_class_name": "UNet2DConditionModel", "act_fn": "gelu", "attention_head_dim": head, "norm_num_groups": None,
        "block_out_channels": channels, "time_cond_proj_dim": rng.choice([None, 8 * rng.randint(2, 30)]),
        # KCrossAttnUpBlock2D's first block adds self-attention when its width is the time embedding's: keep them
        # equal (2 · channels[0] for fourier) only where the widths allow it
        "time_embedding_dim": rng.choice([None, 2 * rng.randint(8, 64)]),
        "conv_in_kernel": kernel, "conv_out_kernel": kernel, "cross_attention_dim": rng.randint(4, 40),
        "down_block_types": [rng.choice(["KDownBlock2D", "KCrossAttnDownBlock2D"])]
        + ["KCrossAttnDownBlock2D"] * (levels - 1),
        "up_block_types": ["KCrossAttnUpBlock2D"] * (levels - 1) + [rng.choice(["KUpBlock2D", "KCrossAttnUpBlock2D"])],
        "in_channels": rng.randint(1, 9), "out_channels": rng.randint(1, 6), "mid_block_type": None,
        "layers_per_block": rng.randint(1, 3), "resnet_time_scale_shift": "scale_shift",
        "time_embedding_type": "fourier", "timestep_post_act": "gelu",
    }


def test_random_k_unet_configs(rng, tmp_path):
    from flopcalc.engine.errors import FlopcalcError
    from flopcalc.engine.registry import RunShape, config_of, lookup
    from classic_call_support import check_assembly

    done = tries = 0
    while done < 3 and tries < 200:
        tries += 1
        cfg = _config(rng)
        levels = len(cfg["block_out_channels"])
        side = 2 ** (levels - 1)
        h, w = side * rng.randint(2, 5), side * rng.randint(2, 5)
        text = rng.randint(1, 80)
        shape = RunShape(latent_height=h, latent_width=w, text_len=text)
        try:  # a random channel layout the real UNet cannot chain (its skip concatenations) is refused: draw again
            lookup("UNet2DConditionModel", "forward", component="unet").assemble(config_of(cfg, component="unet"), shape)
        except FlopcalcError:
            continue
        check_assembly(write_config(tmp_path, f"unet{done}", cfg), "UNet2DConditionModel", shape,
                       {"height": 8 * h, "width": 8 * w, "text_len": text}, module_depth=5, component="unet")
        done += 1
    assert done == 3, "no valid random k-UNet config drawn"
