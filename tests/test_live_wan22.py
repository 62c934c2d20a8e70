"""Live re-measurement of Wan 2.2 under ``WanPipeline`` and Wan image-to-video: the Wan 2.1 I2V transformer (CLIP
image tokens, added k/v, the context split at 512 text tokens, at random text lengths) and CLIP vision towers on
randomized configs; the TI2V transformer with one timestep per token
(``expand_timesteps``) on the card at a random size and frame count and on randomized configs, the A14B
experts on the card at a random size, and the TI2V 16× VAE (z_dim 48, patchify, residual blocks) at a
random size. The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total
and every measured module path), parameters exact, ``thop`` exact."""

from __future__ import annotations

import json

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
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402

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


I2V21 = REPO / "model_cards/wan2.1-i2v-14b-480p"
INDEX_I2V21 = json.loads((I2V21 / "model_index.json").read_text())


def _random_clip_vision(rng) -> dict:
    heads = rng.randint(1, 4)
    return {"architectures": ["CLIPVisionModelWithProjection"], "model_type": "clip_vision_model",
            "hidden_size": heads * rng.choice([8, 16]), "intermediate_size": rng.choice([24, 64]),
            "num_hidden_layers": rng.randint(1, 3), "num_attention_heads": heads, "patch_size": rng.choice([4, 7, 14]),
            "image_size": rng.choice([28, 56]), "projection_dim": rng.choice([8, 12]), "num_channels": rng.choice([1, 3])}


def test_random_clip_vision_configs(rng, tmp_path):
    transformer = json.loads((I2V21 / "transformer/config.json").read_text())
    for i in range(4):
        cfg = _random_clip_vision(rng)
        size = cfg["image_size"]
        report = estimate_configs(INDEX_I2V21, {"transformer": transformer, "image_encoder": cfg},
                                  Settings(height=64, width=64, num_frames=1, steps=1))
        fx = measure.measure_component(write_config(tmp_path, f"clipv{i}", cfg), settings={"height": size, "width": size})
        assert_matches_measurement(report.component("image_encoder"), fx, f"seed {SEED}, {cfg}")


def test_random_image_conditioned_transformers(rng, tmp_path):
    """Random Wan 2.1 I2V transformers under WanImageToVideoPipeline with a random image encoder and a random
    text length (below and above 512 − image tokens, where the processor's slicing changes branch)."""
    for i in range(4):
        heads, head_dim = rng.randint(1, 3), rng.choice([8, 12, 16])
        dim = heads * head_dim
        image = _random_clip_vision(rng)
        cfg = {
            "_class_name": "WanTransformer3DModel", "patch_size": [1, 2, 2], "num_attention_heads": heads,
            "attention_head_dim": head_dim, "in_channels": rng.choice([8, 36]), "out_channels": 4,
            "text_dim": rng.choice([24, 40]), "freq_dim": 32, "ffn_dim": rng.choice([32, 56]),
            "num_layers": rng.randint(1, 2), "cross_attn_norm": rng.random() < 0.5, "rope_max_seq_len": 64,
            "image_dim": image["hidden_size"], "added_kv_proj_dim": rng.choice([dim, None]),
        }
        h, w, f = random_size(rng, 16, 16, 128), random_size(rng, 16, 16, 128), 4 * rng.randint(0, 2) + 1
        tokens = rng.choice([rng.randint(1, 300), rng.randint(400, 600)])
        folder = write_config(tmp_path, f"i2v{i}", cfg)
        report = estimate_configs(INDEX_I2V21, {"transformer": cfg, "image_encoder": image},
                                  Settings(height=h, width=w, num_frames=f, max_sequence_length=tokens, steps=2))
        comp = report.component("transformer")
        n_image = (image["image_size"] // image["patch_size"]) ** 2 + 1
        fx = measure.measure_component(folder, settings={"height": h, "width": w, "num_frames": f, "text_len": tokens,
                                                         "image_tokens": n_image})
        assert_matches_measurement(comp, fx, f"seed {SEED}, {cfg}, {image}, {h}x{w}x{f}, L={tokens}")


def test_lucy_edit_transformer_at_random_size_and_frames(rng, tmp_path):
    """LucyEditPipeline: the TI2V transformer with 96 input channels (noise + the edited video's latent) and one
    timestep per token, alone under the pipeline (the 8× fallback without a VAE)."""
    cfg = {**json.loads((TI2V / "transformer/config.json").read_text()), "in_channels": 96, "num_layers": 2}
    h, w, f = random_size(rng, 16, 64, 384), random_size(rng, 16, 64, 384), _frames(rng, 6)
    check_plan(write_config(tmp_path, "lucy", cfg), "transformer", Settings(height=h, width=w, num_frames=f),
               {"height": h, "width": w, "num_frames": f, "text_len": 512, "expand_timesteps": 1},
               index={**INDEX_TI2V, "_class_name": "LucyEditPipeline"}, thop=False)
