"""Live re-measurement of the HunyuanVideo family: ``HunyuanVideoTransformer3DModel``,
``AutoencoderKLHunyuanVideo`` (all three ways it runs: the default temporal chunks, untiled,
``enable_tiling()``) and ``LlamaModel``, built on the meta device and counted now, on the card at a
random size / frame count and on randomized configs (every structural key the assemblers read).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and
every measured module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    SEED,
    assert_matches_measurement,
    measure,
    write_config as _write,
)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.hunyuan_video import CROP_START  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/hunyuanvideo"
INDEX = json.loads((CARD / "model_index.json").read_text())
#: ``vae_tiling`` → the model attributes that run it (use_framewise_*, use_tiling).
VAE_MODES = {None: (True, False), False: (False, False), True: (True, True)}


def _component(config_dir: Path, name: str, settings: Settings, call: str):
    cfg = json.loads((config_dir / "config.json").read_text())
    report = estimate_configs(INDEX, {name: cfg}, settings, convention="torch")
    return next(c for c in report.components if c.component == name and c.call == call)


def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           with_thop: bool = True) -> None:
    """flopcalc's plan for ``name`` under ``HunyuanVideoPipeline`` against a fresh measurement."""
    comp = _component(config_dir, name, settings, call)
    fx = measure.measure_component(config_dir, settings=measure_settings, call=call, with_thop=with_thop)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {config_dir.name} {call} {measure_settings}", thop=with_thop)


def _check_vae(config_dir: Path, kind: str, tiling: bool | None, h: int, w: int, frames: int) -> None:
    """One VAE call with the attributes ``vae_tiling`` stands for, set on the built model."""
    framewise, use_tiling = VAE_MODES[tiling]
    settings = Settings(height=h, width=w, num_frames=frames, vae_tiling=tiling,
                        strength=1.0 if kind == "encode" else None)
    cfg = json.loads((config_dir / "config.json").read_text())
    report = estimate_configs(INDEX, {"vae": cfg}, settings, convention="torch")
    (comp,) = [c for c in report.components if c.call == kind]
    model = measure.build_model(config_dir)
    model.use_framewise_decoding = model.use_framewise_encoding = framewise
    model.use_tiling = use_tiling
    inputs, _ = measure.build_inputs(model, {"height": h, "width": w, "num_frames": frames}, kind)
    fx = measure.measure_model(model, inputs, call=kind)
    where = f"seed {SEED}, {config_dir.name} {kind} (vae_tiling={tiling}) {frames} frames {h}x{w}"
    assert_matches_measurement(comp, fx, where)


def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size(rng):
    h, w = _size(rng, 16, 128, 512), _size(rng, 16, 128, 512)
    frames, t = rng.randint(1, 40), rng.randint(1, 300)
    _check(CARD / "transformer", "transformer",
           Settings(height=h, width=w, num_frames=frames, max_sequence_length=t),
           {"height": h, "width": w, "num_frames": frames, "text_len": t}, with_thop=False)


def test_card_vae_every_mode_at_random_size(rng):
    h, w, frames = _size(rng, 16, 64, 400), _size(rng, 16, 64, 400), rng.randint(1, 40)
    for tiling in (None, False, True):
        _check_vae(CARD / "vae", "decode", tiling, h, w, frames)
    _check_vae(CARD / "vae", "encode", rng.choice([None, False, True]), h, w, frames)


def test_card_text_encoders():
    _check(CARD / "text_encoder", "text_encoder", Settings(), {"seq_len": 351}, with_thop=False)
    _check(CARD / "text_encoder_2", "text_encoder_2", Settings(), {"seq_len": 77})


# --------------------------------------------------------------------------- randomized configs


def test_random_hunyuan_video_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
        t_axis = rng.choice([4, 8])  # rotary axes: even widths summing to head_dim
        cfg = {
            "_class_name": "HunyuanVideoTransformer3DModel",
            "in_channels": rng.choice([4, 8, 16]),
            "out_channels": rng.choice([4, 16]),
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(0, 2),
            "num_single_layers": rng.randint(0, 2),
            "num_refiner_layers": rng.randint(0, 2),
            "mlp_ratio": rng.choice([4.0, 2.0, 2.5]),
            "patch_size": rng.choice([1, 2]),
            "patch_size_t": rng.choice([1, 2]),
            "qk_norm": rng.choice(["rms_norm", "layer_norm", None]),
            "guidance_embeds": rng.random() < 0.5,
            "text_embed_dim": rng.choice([24, 40]),
            "pooled_projection_dim": rng.choice([8, 12]),
            "rope_axes_dim": [t_axis, (head_dim - t_axis) // 2, (head_dim - t_axis) // 2],
            "image_condition_type": rng.choice([None, "latent_concat", "token_replace"]),
        }
        h, w = _size(rng, 16, 16, 96), _size(rng, 16, 16, 96)
        # at least patch_size_t latent frames ((frames - 1) // 4 + 1), as the patch embedding needs
        frames, t = rng.randint(4 * cfg["patch_size_t"] - 3, 24), rng.randint(1, 24)
        _check(_write(tmp_path, f"hv{i}", cfg), "transformer",
               Settings(height=h, width=w, num_frames=frames, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": frames, "text_len": t})


def _random_vae_config(rng: random.Random) -> dict:
    levels = rng.randint(2, 4)
    groups = rng.choice([4, 8])
    return {
        "_class_name": "AutoencoderKLHunyuanVideo",
        "in_channels": 3,
        "out_channels": rng.choice([3, 4]),
        "latent_channels": rng.choice([4, 8]),
        "down_block_types": ["HunyuanVideoDownBlock3D"] * levels,
        "up_block_types": ["HunyuanVideoUpBlock3D"] * levels,
        "block_out_channels": [groups * rng.randint(1, 3) for _ in range(levels)],
        "layers_per_block": rng.randint(1, 2),
        "norm_num_groups": groups,
        "spatial_compression_ratio": rng.choice([4, 8]),
        "temporal_compression_ratio": 4,
        "mid_block_add_attention": rng.random() < 0.7,
    }


def test_random_hunyuan_video_vae_configs(rng, tmp_path):
    """Every mode of both calls; sizes cross the 256-pixel spatial tile (32 latent pixels at 8×) and
    the 16-frame chunk so that tiles and chunks of several lengths occur."""
    for i in range(3):
        cfg = _random_vae_config(rng)
        folder = _write(tmp_path, f"vae{i}", cfg)
        f = cfg["spatial_compression_ratio"]
        h, w, frames = _size(rng, max(16, f), 16, 320), _size(rng, max(16, f), 16, 320), rng.randint(1, 30)
        for kind in ("decode", "encode"):
            _check_vae(folder, kind, rng.choice([None, False, True]), h, w, frames)


def test_random_llama_configs(rng, tmp_path):
    for i in range(4):
        heads = rng.choice([2, 4])
        head_dim = rng.choice([8, 16])
        cfg = {
            "architectures": ["LlamaModel"],
            "model_type": "llama",
            "vocab_size": rng.choice([64, 100]),
            "hidden_size": heads * head_dim * rng.choice([1, 2]),
            "intermediate_size": rng.choice([24, 56]),
            "num_hidden_layers": rng.randint(1, 3),  # 0 layers: nothing to count (the harness needs a FLOP)
            "num_attention_heads": heads,
            "num_key_value_heads": rng.choice([None, 1, heads]),
            "head_dim": rng.choice([None, head_dim]),
            "attention_bias": rng.random() < 0.5,
            "mlp_bias": rng.random() < 0.5,
        }
        n = rng.randint(1, 64)  # the Llama prompt: max_sequence_length + the template's crop_start tokens
        _check(_write(tmp_path, f"llama{i}", cfg), "text_encoder", Settings(max_sequence_length=n),
               {"seq_len": n + CROP_START})


def test_skyreels_image_encode_as_planned_at_random_size(rng):
    """HunyuanSkyreelsImageToVideoPipeline: the image as a one-frame video through the framewise encoder."""
    h, w = _size(rng, 16, 64, 400), _size(rng, 16, 64, 400)
    cfg = json.loads((CARD / "vae" / "config.json").read_text())
    report = estimate_configs({"_class_name": "HunyuanSkyreelsImageToVideoPipeline"}, {"vae": cfg},
                              Settings(height=h, width=w, num_frames=rng.choice([9, 97])), convention="torch")
    comp = report.component("vae", "encode")
    assert comp.shape["frames"] == 1
    fx = measure.measure_component(CARD / "vae", settings={"height": h, "width": w, "num_frames": 1}, call="encode")
    assert_matches_measurement(comp, fx, f"seed {SEED}, skyreels image encode {h}x{w}")
