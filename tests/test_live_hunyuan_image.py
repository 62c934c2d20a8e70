"""Live re-measurement of the HunyuanImage 2.1 family: ``HunyuanImageTransformer2DModel`` and
``AutoencoderKLHunyuanImage``, built on the meta device and counted now, on the card at a random
size and on randomized configs (every structural key the assemblers read), under
``HunyuanImagePipeline``'s plan and, for the transformer, at random text lengths too.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and
every measured module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    assert_matches_measurement,
    check_plan,
    measure,
    random_size,
    write_config,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.hunyuan_image import GLYPH_TOKENS, TEXT_TOKENS  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/hunyuanimage-2.1"
INDEX = json.loads((CARD / "model_index.json").read_text())


def _plan(folder, name: str, h: int, w: int, call: str = "forward") -> None:
    settings = Settings(height=h, width=w, strength=1.0 if call == "encode" else None)
    measured = {"height": h, "width": w}
    if name == "transformer":
        measured |= {"text_len": TEXT_TOKENS, "text_len_2": GLYPH_TOKENS}
    check_plan(folder, name, settings, measured, index=INDEX, call=call)


def test_card_vae_at_random_size(rng):
    h, w = random_size(rng, 64, 64, 640), random_size(rng, 64, 64, 640)
    for call in ("decode", "encode"):
        _plan(CARD / "vae", "vae", h, w, call)


def _random_transformer_config(rng: random.Random) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    return {
        "_class_name": "HunyuanImageTransformer2DModel",
        "in_channels": rng.choice([4, 8, 16]),
        "out_channels": rng.choice([4, 16]),
        "num_attention_heads": heads,
        "attention_head_dim": head_dim,
        "num_layers": rng.randint(0, 2),
        "num_single_layers": rng.randint(0, 2),
        "num_refiner_layers": rng.randint(0, 2),
        "mlp_ratio": rng.choice([4.0, 2.0, 2.5]),
        "patch_size": [rng.choice([1, 2]), rng.choice([1, 2])],
        "qk_norm": rng.choice(["rms_norm", "layer_norm", None]),
        "guidance_embeds": rng.random() < 0.5,
        "text_embed_dim": rng.choice([24, 40]),
        "text_embed_2_dim": rng.choice([None, 12, 20]),
        "rope_axes_dim": [head_dim // 2, head_dim // 2],
        "use_meanflow": rng.random() < 0.5,
    }


def test_random_transformer_configs_under_the_plan(rng, tmp_path):
    """The plan's text lengths (1000 Qwen tokens, 128 glyph tokens) on random small models."""
    for i in range(3):
        cfg = _random_transformer_config(rng)
        ph, pw = cfg["patch_size"]
        h, w = random_size(rng, 64 * ph, 64, 256), random_size(rng, 64 * pw, 64, 256)
        _plan(write_config(tmp_path, f"hi{i}", cfg), "transformer", h, w)


def test_random_transformer_configs_at_random_text_lengths(rng, tmp_path):
    """The assembler alone, at text lengths the pipeline never uses (the formula, not the plan)."""
    for i in range(4):
        cfg = _random_transformer_config(rng)
        ph, pw = cfg["patch_size"]
        h, w = random_size(rng, 32 * ph, 32, 256), random_size(rng, 32 * pw, 32, 256)
        t, t2 = rng.randint(1, 40), rng.randint(1, 20)
        tree = assemble(cfg, RunShape(latent_height=h // 32, latent_width=w // 32, text_len=t, text_len_2=t2),
                        component="transformer")
        comp = SimpleNamespace(tree=tree, macs_per_run=tree.total.macs("torch"), params=tree.total.params)
        fx = measure.measure_component(write_config(tmp_path, f"ht{i}", cfg),
                                       settings={"height": h, "width": w, "text_len": t, "text_len_2": t2})
        assert_matches_measurement(comp, fx, f"seed {SEED}, {h}x{w} text {t}+{t2}: {cfg}")


def _random_vae_config(rng: random.Random) -> dict:
    """Configs the real class can run: channels change only at the resamplers (with
    ``*_match_channel``; its ResNets cannot change them), every level resamples."""
    levels = rng.randint(2, 4)
    z = rng.choice([4, 8])
    same = rng.random() < 0.3  # equal widths: the match flags may be off
    channels = [64 * rng.choice([1, 2])] * levels if same else [32 * rng.choice([1, 2, 4]) for _ in range(levels)]
    channels[-1] = channels[-1] if same else 64 * rng.choice([1, 2])  # divisible by 2 z (the grouped mean)
    return {
        "_class_name": "AutoencoderKLHunyuanImage",
        "in_channels": 3,
        "out_channels": rng.choice([3, 4]),
        "latent_channels": z,
        "block_out_channels": channels,
        "layers_per_block": rng.randint(1, 2),
        "spatial_compression_ratio": 2 ** (levels - 1),
        "sample_size": 64,
        "downsample_match_channel": not same or rng.random() < 0.5,
        "upsample_match_channel": not same or rng.random() < 0.5,
    }


def test_random_vae_configs(rng, tmp_path):
    for i in range(3):
        cfg = _random_vae_config(rng)
        f = cfg["spatial_compression_ratio"]
        h, w = random_size(rng, 2 * f, 16, 160), random_size(rng, 2 * f, 16, 160)
        folder = write_config(tmp_path, f"vae{i}", cfg)
        for call in ("decode", "encode"):
            _plan(folder, "vae", h, w, call)
