"""Live re-measurement of Wan 2.2 under ``WanPipeline``: the TI2V transformer with one timestep per token
(``expand_timesteps``) on the card at a random size and frame count and on randomized configs, the A14B
experts on the card at a random size, and the TI2V 16× VAE (z_dim 48, patchify, residual blocks) at a
random size. The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total
and every measured module path), parameters exact, ``thop`` exact."""

from __future__ import annotations

import json

import pytest

from live_support import REPO, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

A14B, TI2V = REPO / "model_cards/wan2.2-t2v-a14b", REPO / "model_cards/wan2.2-ti2v-5b"
INDEX_A14B = json.loads((A14B / "model_index.json").read_text())
INDEX_TI2V = json.loads((TI2V / "model_index.json").read_text())


def _frames(rng, most: int) -> int:
    return 4 * rng.randint(0, most) + 1


def test_ti2v_transformer_expanded_timesteps_at_random_size_and_frames(rng):
    # alone under the TI2V pipeline (no VAE given: the pipeline's 8× fallback), sizes multiples of 16
    h, w, f, t = random_size(rng, 16, 64, 384), random_size(rng, 16, 64, 384), _frames(rng, 6), rng.randint(1, 512)
    check_plan(TI2V / "transformer", "transformer", Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t, "expand_timesteps": 1},
               index=INDEX_TI2V, thop=False)


@pytest.mark.parametrize("expert", ["transformer", "transformer_2"])
def test_a14b_experts_at_random_size(rng, expert):
    h, w, f = random_size(rng, 16, 64, 320), random_size(rng, 16, 64, 320), _frames(rng, 4)
    check_plan(A14B / expert, expert, Settings(height=h, width=w, num_frames=f, steps=8),
               {"height": h, "width": w, "num_frames": f, "text_len": 512}, index=INDEX_A14B, thop=False)


def test_ti2v_vae_at_random_size(rng):
    h, w, f = random_size(rng, 32, 64, 256), random_size(rng, 32, 64, 256), _frames(rng, 2)
    s = {"height": h, "width": w, "num_frames": f}
    check_plan(TI2V / "vae", "vae", Settings(height=h, width=w, num_frames=f), s, index=INDEX_TI2V, call="decode")
    check_plan(TI2V / "vae", "vae", Settings(height=h, width=w, num_frames=f, strength=1.0), s, index=INDEX_TI2V,
               call="encode")


def test_random_configs_with_expanded_timesteps(rng, tmp_path):
    for i in range(4):
        cfg = {
            "_class_name": "WanTransformer3DModel",
            "patch_size": [1, 2, 2],
            "num_attention_heads": rng.randint(1, 4),
            "attention_head_dim": rng.choice([8, 12, 16]),
            "in_channels": rng.choice([4, 16, 48]),
            "out_channels": rng.choice([None, 4, 48]),
            "text_dim": rng.choice([24, 40]),
            "freq_dim": rng.choice([32, 256]),
            "ffn_dim": rng.choice([32, 56]),
            "num_layers": rng.randint(0, 3),
            "cross_attn_norm": rng.random() < 0.5,
            "rope_max_seq_len": 64,
        }
        h, w, t, f = random_size(rng, 16, 16, 256), random_size(rng, 16, 16, 256), rng.randint(1, 40), _frames(rng, 5)
        check_plan(write_config(tmp_path, f"ti2v{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
                   {"height": h, "width": w, "num_frames": f, "text_len": t, "expand_timesteps": 1}, index=INDEX_TI2V)


def test_i2v_a14b_expert_at_random_size(rng):
    card = REPO / "model_cards/wan2.2-i2v-a14b"
    index = json.loads((card / "model_index.json").read_text())
    h, w, f = random_size(rng, 16, 64, 320), random_size(rng, 16, 64, 320), _frames(rng, 4)
    check_plan(card / "transformer_2", "transformer_2", Settings(height=h, width=w, num_frames=f, steps=8),
               {"height": h, "width": w, "num_frames": f, "text_len": 512}, index=index, thop=False)
