"""Live re-measurement of ``SkyReelsV2Transformer3DModel``, built on the meta device and counted now, as each
SkyReels V2 pipeline calls it: ``SkyReelsV2Pipeline`` (one timestep), ``SkyReelsV2DiffusionForcingPipeline`` (one
timestep per latent frame, ``fps``, a block-causal mask after ``_set_ar_attention``) and
``SkyReelsV2ImageToVideoPipeline`` (CLIP image tokens, added k/v): on the cards at a random size, frame count and
text length, and on randomized configs (widths, heads, head width, layers, patch sizes, channels, text and
frequency widths, cross-attention norm, qk norm, ``inject_sample_info``, ``num_frame_per_block``, image width and
added k/v width).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every measured
module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json

import pytest

from live_support import REPO, check_plan, random_size, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = pytest.mark.live

CARDS = REPO / "model_cards"


def _index(card: str) -> dict:
    return json.loads((CARDS / card / "model_index.json").read_text())


def _frames(rng, most: int = 5, least: int = 0) -> int:
    return 4 * rng.randint(least, most) + 1


def test_t2v_card_at_random_size_frames_and_text(rng):
    h, w, f, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), _frames(rng), rng.randint(1, 512)
    check_plan(CARDS / "skyreels-v2-t2v-14b-720p/transformer", "transformer",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t}, index=_index("skyreels-v2-t2v-14b-720p"),
               thop=False)


def test_diffusion_forcing_card_with_random_causal_blocks(rng):
    """DF-1.3B (fps projection) on a short video whose latent frames are whole causal blocks: one window."""
    block = rng.randint(1, 4)
    latent = block * rng.randint(1, 3)
    f = 4 * (latent - 1) + 1
    h, w, t = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192), rng.randint(1, 64)
    settings = Settings.make(height=h, width=w, num_frames=f, max_sequence_length=t, causal_block_size=block,
                        ar_step=rng.randint(0, 3))
    check_plan(CARDS / "skyreels-v2-df-1.3b-540p/transformer", "transformer", settings,
               {"height": h, "width": w, "num_frames": f, "text_len": t, "diffusion_forcing": 1,
                "causal_block_size": block}, index=_index("skyreels-v2-df-1.3b-540p"))


def test_i2v_card_at_random_size_and_text(rng):
    """257 CLIP tokens before the text: the added k/v attention gets ``context − 512`` of them (Python slicing)."""
    h, w, f, t = random_size(rng, 16, 32, 192), random_size(rng, 16, 32, 192), _frames(rng, 2), rng.randint(1, 600)
    _check_i2v(CARDS / "skyreels-v2-i2v-14b-720p/transformer", Settings(height=h, width=w, num_frames=f,
                                                                        max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t}, image_size=224, thop=False)


def _random_config(rng, *, forcing: bool, image: bool) -> dict:
    heads, head_dim = rng.randint(1, 4), rng.choice([8, 12, 16, 24])
    cfg = {
        "_class_name": "SkyReelsV2Transformer3DModel",
        "patch_size": [1 if forcing else rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([1, 2])],
        "num_attention_heads": heads,
        "attention_head_dim": head_dim,
        "in_channels": rng.choice([4, 16]),
        "out_channels": rng.choice([None, 4, 16]),
        "text_dim": rng.choice([24, 40]),
        "freq_dim": rng.choice([32, 256]),
        "ffn_dim": rng.choice([32, 56]),
        "num_layers": rng.randint(1, 3),
        "cross_attn_norm": rng.random() < 0.5,
        "qk_norm": rng.choice(["rms_norm_across_heads", None]),
        "rope_max_seq_len": 64,
        "inject_sample_info": forcing and rng.random() < 0.5,
    }
    if image:
        cfg.update(image_dim=rng.choice([16, 32]), added_kv_proj_dim=heads * head_dim)
    return cfg


def test_random_configs_under_each_pipeline(rng, tmp_path):
    for i in range(3):
        kind = rng.choice(["t2v", "df", "i2v"])
        cfg = _random_config(rng, forcing=kind == "df", image=kind == "i2v")
        h, w, t = random_size(rng, 16, 16, 192), random_size(rng, 16, 16, 192), rng.randint(1, 40)
        f = _frames(rng, 4, least=cfg["patch_size"][0] - 1)  # at least p_t latent frames
        measured = {"height": h, "width": w, "num_frames": f, "text_len": t}
        settings = Settings(height=h, width=w, num_frames=f, max_sequence_length=t)
        card = {"t2v": "skyreels-v2-t2v-14b-720p", "df": "skyreels-v2-df-14b-720p", "i2v": "skyreels-v2-i2v-14b-720p"}
        index = _index(card[kind])
        if kind == "df":
            block = rng.randint(1, 2)
            latent = (f - 1) // 4 + 1
            if latent % block:
                block = 1
            measured.update(diffusion_forcing=1, causal_block_size=block)
            settings = Settings.make(height=h, width=w, num_frames=f, max_sequence_length=t, causal_block_size=block)
        if kind == "i2v":
            _check_i2v(write_config(tmp_path, f"sky{i}", cfg), settings, measured, image_size=14 * rng.randint(1, 4))
            continue
        check_plan(write_config(tmp_path, f"sky{i}", cfg), "transformer", settings, measured, index=index)


def _check_i2v(config_dir, settings: Settings, measured: dict, *, image_size: int, thop: bool = True) -> None:
    """The I2V plan's transformer run against a measurement with the CLIP tokens the plan derives from the card's
    CLIP ViT-H/14 config at ``image_size`` (``(image_size / 14)² + 1``)."""
    from live_support import SEED, assert_matches_measurement, measure
    from flopcalc.flops.estimate import estimate_configs

    cfg = json.loads((config_dir / "config.json").read_text())
    clip = {**json.loads((CARDS / "skyreels-v2-i2v-14b-720p/image_encoder/config.json").read_text()),
            "image_size": image_size}
    tokens = (image_size // clip["patch_size"]) ** 2 + 1
    report = estimate_configs(_index("skyreels-v2-i2v-14b-720p"), {"transformer": cfg, "image_encoder": clip},
                              settings, convention="torch")
    comp = next(c for c in report.components if c.component == "transformer")
    assert comp.shape["image_tokens"] == tokens
    measured = {**measured, "image_tokens": tokens}
    fx = measure.measure_component(config_dir, settings=measured, with_thop=thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {cfg} {measured}", thop=thop)
