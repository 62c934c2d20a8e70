"""Live re-measurement of ``MochiTransformer3DModel``, built on the meta device and counted now, as ``MochiPipeline``
calls it (a ``(num_frames − 1)//6 + 1``-frame latent, a 1-D timestep, the T5 states with an all-ones mask): on the
card at a random size, frame count and text length, and on randomized configs (heads, head width, layers, text
stream width, T5 width, time embedding width, channels, patch size).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, assert_runs_match, check_plan, measure, random_size, write_config  # noqa: E402
from flopcalc.engine.pipelines import plan  # noqa: E402
from flopcalc.engine.registry import assemble  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/mochi-1-preview"
INDEX = json.loads((CARD / "model_index.json").read_text()) if CARD.exists() else None


def test_card_at_random_size_and_frames(rng):
    h, w, t, f = random_size(rng, 16, 16, 128), random_size(rng, 16, 16, 128), rng.randint(1, 64), rng.randint(1, 25)
    check_plan(CARD / "transformer", "transformer",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t, "num_frames": f}, index=INDEX)


def test_random_configs(rng, tmp_path):
    for i in range(4):
        heads = rng.randint(1, 4)
        cfg = {
            "_class_name": "MochiTransformer3DModel",
            "patch_size": rng.choice([1, 2]),
            "num_attention_heads": heads,
            "attention_head_dim": rng.choice([8, 16, 24]),
            "num_layers": rng.randint(1, 3),
            "pooled_projection_dim": rng.choice([12, 24, 40]),
            "in_channels": rng.choice([4, 12]),
            "out_channels": rng.choice([None, 4, 8]),
            "text_embed_dim": 8 * rng.randint(1, 5),
            "time_embed_dim": rng.choice([16, 32]),
            "max_sequence_length": 256,
        }
        unit = 8 * cfg["patch_size"]  # the latent (H/8) must split into whole patches
        h, w, t, f = random_size(rng, unit, 8, 96), random_size(rng, unit, 8, 96), rng.randint(1, 40), rng.randint(1, 20)
        check_plan(write_config(tmp_path, f"mochi{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
                   {"height": h, "width": w, "text_len": t, "num_frames": f}, index=INDEX)


def test_vae_card_decode_at_random_size_and_frames(rng):
    h, w, f = random_size(rng, 8, 8, 64), random_size(rng, 8, 8, 64), rng.randint(1, 25)
    check_plan(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=f),
               {"height": h, "width": w, "num_frames": f}, index=INDEX, call="decode")


def test_vae_random_configs(rng, tmp_path):
    for i in range(3):
        levels = rng.randint(2, 4)
        cfg = {
            "_class_name": "AutoencoderKLMochi",
            "in_channels": rng.choice([15, 6]),
            "out_channels": rng.choice([3, 1]),
            "encoder_block_out_channels": [32 * rng.randint(1, 3) for _ in range(levels)],
            "decoder_block_out_channels": [32 * rng.randint(1, 3) for _ in range(levels)],
            "latent_channels": rng.choice([4, 12]),
            "layers_per_block": [rng.randint(1, 2) for _ in range(levels + 1)],
            "temporal_expansions": [rng.choice([1, 2, 3]) for _ in range(levels - 1)],
            "spatial_expansions": [rng.choice([1, 2]) for _ in range(levels - 1)],
            "add_attention_block": [rng.random() < 0.5 for _ in range(levels + 1)],
        }
        # Height 16 or more: at an 8-pixel height and width the latent is 1x1, and the real decoder's
        # F.group_norm raises "Expected more than 1 value per channel" on a 32-channel stage with 32 groups.
        h, w, f = random_size(rng, 8, 16, 48), random_size(rng, 8, 8, 48), rng.randint(1, 13)
        check_plan(write_config(tmp_path, f"mochi_vae{i}", cfg), "vae", Settings(height=h, width=w, num_frames=f),
                   {"height": h, "width": w, "num_frames": f}, index=INDEX, call="decode")


def test_vae_tiled_decode_as_planned(rng):
    """``vae_tiling``: the plan's tile runs against the real ``tiled_decode`` (``enable_tiling()``) measured now."""
    h, w, f = random_size(rng, 8, 264, 520), random_size(rng, 8, 264, 520), rng.randint(1, 13)
    cfg = json.loads((CARD / "vae/config.json").read_text())
    runs = [r for r in plan(INDEX, {"vae": cfg}, Settings(height=h, width=w, num_frames=f, vae_tiling=True)).runs
            if r.call == "decode"]
    assert len(runs) > 1 or runs[0].runs > 1  # more than one tile
    fx = measure.measure_component(CARD / "vae", call="decode",
                                   settings={"height": h, "width": w, "num_frames": f, "vae_tiling": 1})
    trees = [(r.runs, assemble(cfg, r.shape, component="vae", call="decode")) for r in runs]
    assert_runs_match(trees, trees[0][1].total.params, fx, f"{h}x{w}x{f}")
