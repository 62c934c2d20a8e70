"""Live re-measurement of Kandinsky 2.2 (``PriorTransformer``, the image-conditioned
``UNet2DConditionModel``) against flopcalc.

The bundled card's decoder UNet at a random size and its prior, then randomized configs, built on meta and
counted now: ``torch`` convention exact in total and for every module path measured, parameters exact,
``thop`` exact. UNet (added-KV blocks): level count (1 to 4), the down/up block kinds per level
(``ResnetDownsampleBlock2D`` / ``SimpleCrossAttnDownBlock2D``, ``SimpleCrossAttnUpBlock2D`` /
``ResnetUpsampleBlock2D``), mid block (``UNetMidBlock2DSimpleCrossAttn`` or none), widths (also not divisible
by the head width), ``layers_per_block``, ``attention_head_dim`` (int or per level: the up blocks read it
unreversed), ``cross_attention_dim``, ``encoder_hid_dim``, ``norm_num_groups``, ``resnet_time_scale_shift``,
``time_embedding_dim``, ``addition_embed_type`` image / image_hint (the hint convolutions), ``in_channels``,
non-square sizes. Prior: heads, head width, layers, ``embedding_dim``, ``num_embeddings``,
``embedding_proj_dim``, ``clip_embed_dim``, ``time_embed_dim``, ``norm_in_type``,
``embedding_proj_norm_type``. The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    check_plan,
    write_config as _write,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards" / "kandinsky-2.2"
PRIOR = REPO / "validation" / "configs" / "kandinsky-2.2-prior"


def _unet(cfg_dir: Path, rng: random.Random, levels: int, lo: int, hi: int) -> None:
    """A random size the decoder runs: a multiple of 64 px, so that the latent divides by every level."""
    cfg = json.loads((cfg_dir / "config.json").read_text())
    pipeline = "KandinskyV22ControlnetPipeline" if cfg["addition_embed_type"] == "image_hint" else (
        "KandinskyV22InpaintPipeline" if cfg.get("in_channels") == 9 else "KandinskyV22Pipeline")
    h, w = 64 * rng.randint(lo, hi), 64 * rng.randint(lo, hi)
    check_plan(cfg_dir, "unet", Settings(height=h, width=w), {"height": h, "width": w, "text_len": 32},
               index={"_class_name": pipeline}, module_depth=5)


def _prior(cfg_dir: Path) -> None:
    cfg = json.loads((cfg_dir / "config.json").read_text())
    check_plan(cfg_dir, "prior", Settings(), {"seq_len": cfg.get("num_embeddings", 77)},
               index={"_class_name": "KandinskyV22PriorPipeline"}, module_depth=3)


def test_card_unet_at_random_size(rng):
    _unet(CARD / "unet", rng, 4, 1, 10)


def test_card_prior():
    _prior(PRIOR / "prior")


def _unet_config(rng: random.Random) -> dict:
    levels = rng.randint(1, 4)
    groups = rng.choice([1, 2, 4, 8])
    head_dims = [rng.choice([2, 4, 8, 16]) for _ in range(levels)]
    hint = rng.random() < 0.3
    return {
        "_class_name": "UNet2DConditionModel",
        "in_channels": rng.randint(5, 9) if hint else rng.randint(1, 9),
        "out_channels": rng.randint(1, 8),
        "addition_embed_type": "image_hint" if hint else "image",
        "encoder_hid_dim_type": "image_proj",
        "encoder_hid_dim": rng.randint(4, 48),
        "down_block_types": [rng.choice(["ResnetDownsampleBlock2D", "SimpleCrossAttnDownBlock2D"])
                             for _ in range(levels)],
        "up_block_types": [rng.choice(["SimpleCrossAttnUpBlock2D", "ResnetUpsampleBlock2D"]) for _ in range(levels)],
        "mid_block_type": rng.choice(["UNetMidBlock2DSimpleCrossAttn", None]),
        # whole heads (AttnAddedKVProcessor2_0 reshapes the heads back to the channels) and whole groups; the
        # up blocks read attention_head_dim unreversed, so every width divides by every head width
        "block_out_channels": [math.lcm(groups, *head_dims) * rng.randint(1, 3) for _ in range(levels)],
        "layers_per_block": rng.randint(1, 3),
        "norm_num_groups": groups,
        "attention_head_dim": head_dims if rng.random() < 0.5 else head_dims[0],
        "cross_attention_dim": rng.randint(4, 40),
        "resnet_time_scale_shift": rng.choice(["scale_shift", "default"]),
        "time_embedding_dim": rng.choice([None, 4 * rng.randint(2, 12)]),
    }


def test_random_image_conditioned_unet_configs(rng, tmp_path):
    done = 0
    while done < 4:
        cfg = _unet_config(rng)
        # the harness requires attention counted when the model has attention modules
        if cfg["mid_block_type"] is None and "SimpleCrossAttnDownBlock2D" not in cfg["down_block_types"] \
                and "SimpleCrossAttnUpBlock2D" not in cfg["up_block_types"]:
            continue
        _unet(_write(tmp_path, f"unet{done}", cfg), rng, len(cfg["block_out_channels"]), 1, 3)
        done += 1


def test_random_prior_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 6), rng.choice([4, 8, 16])
        cfg = {
            "_class_name": "PriorTransformer",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(1, 3),
            "embedding_dim": rng.randint(4, 48),
            "num_embeddings": rng.randint(1, 90),
            "embedding_proj_dim": rng.choice([None, rng.randint(4, 48)]),
            "clip_embed_dim": rng.choice([None, rng.randint(4, 48)]),
            "time_embed_dim": rng.choice([None, rng.randint(4, 64)]),
            "norm_in_type": rng.choice([None, "layer"]),
            "embedding_proj_norm_type": rng.choice([None, "layer"]),
        }
        _prior(_write(tmp_path, f"prior{i}", cfg))
