"""Live re-measurement of the Wan 2.1 family: ``WanTransformer3DModel``, ``AutoencoderKLWan`` (decode and
encode, untiled and tiled) and ``UMT5EncoderModel``, built on the meta device and counted now, on the card
at a random size and frame count and on randomized configs (every structural key the assemblers read:
widths, heads, head width, layers, patch sizes, channels, text and frequency widths, cross-attention norm;
VAE widths, decoder width, levels, residual blocks, attention scales, temporal down/upsampling, Wan 2.2
residual blocks and patchify, scale factors; UMT5 widths, heads, layers, buckets, gated or plain MLP).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module path), parameters exact, ``thop`` convention exact.
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

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/wan2.1-t2v-1.3b"
INDEX = json.loads((CARD / "model_index.json").read_text())


def _plan(name: str, cfg: dict, settings: Settings, index: dict | None = INDEX):
    return estimate_configs(index, {name: cfg}, settings, convention="torch")


def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           with_thop: bool = True, index: dict | None = INDEX) -> None:
    """flopcalc's plan for ``name`` under ``WanPipeline`` against a fresh measurement."""
    cfg = json.loads((config_dir / "config.json").read_text())
    comp = next(c for c in _plan(name, cfg, settings, index).components if c.component == name and c.call == call)
    fx = measure.measure_component(config_dir, settings=measure_settings, call=call, with_thop=with_thop)
    where = f"seed {SEED}, {config_dir.name} {call} {measure_settings}"
    assert_matches_measurement(comp, fx, where, thop=with_thop)


def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)


def _frames(rng: random.Random, temporal: int = 4, most: int = 5) -> int:
    return temporal * rng.randint(0, most) + 1


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size_and_frames(rng):
    h, w, f, t = _size(rng, 16, 64, 512), _size(rng, 16, 64, 512), _frames(rng, most=10), rng.randint(1, 512)
    _check(CARD / "transformer", "transformer", Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
           {"height": h, "width": w, "num_frames": f, "text_len": t}, with_thop=False)


def test_card_vae_decode_and_encode_at_random_size_and_frames(rng):
    h, w, f = _size(rng, 16, 32, 256), _size(rng, 16, 32, 256), _frames(rng, most=4)
    s = {"height": h, "width": w, "num_frames": f}
    _check(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=f), s, call="decode")
    _check(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=f, strength=1.0), s, call="encode")


def test_card_text_encoder_at_random_length(rng):
    seq = rng.randint(1, 512)
    _check(CARD / "text_encoder", "text_encoder", Settings(max_sequence_length=seq), {"seq_len": seq}, index=None)


def test_card_vae_tiled_decode_and_encode():
    """``enable_tiling()``: every overlapping tile decoded (encoded) in full, as the plan counts them."""
    h, w, f = 320, 384, 5  # latent 40×48 > 32: 2×2 tiles; pixels > 256: 2×2 tiles
    cfg = json.loads((CARD / "vae/config.json").read_text())
    model = measure.build_model(CARD / "vae")
    model.enable_tiling()
    report = _plan("vae", cfg, Settings(height=h, width=w, num_frames=f, strength=1.0, vae_tiling=True))
    for call, spec in (("decode", {"z": measure.TensorSpec((1, 16, 2, h // 8, w // 8))}),
                       ("encode", {"x": measure.TensorSpec((1, 3, f, h, w))})):
        runs = [c for c in report.components if c.call == call]
        (row,) = runs  # the pieces are folded into one row
        assert sum(p.count for p in row.tree.children) * row.runs == 4 if row.tree.formula == "pieces" \
            else row.runs == 4, call
        fx = measure.measure_model(model, spec, call=call)
        assert 2 * sum(c.runs * c.macs_per_run for c in runs) == fx["torch"]["flops"], call
        assert sum(c.runs * c.tree.total.macs("thop") for c in runs) == fx["thop"]["macs"], call


# --------------------------------------------------------------------------- randomized configs


def test_random_wan_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 12, 16, 24])
        cfg = {
            "_class_name": "WanTransformer3DModel",
            "patch_size": [rng.choice([1, 2]), rng.choice([1, 2]), rng.choice([1, 2])],
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "in_channels": rng.choice([4, 16]),
            "out_channels": rng.choice([None, 4, 16]),
            "text_dim": rng.choice([24, 40]),
            "freq_dim": rng.choice([32, 256]),
            "ffn_dim": rng.choice([32, 56]),
            "num_layers": rng.randint(0, 3),
            "cross_attn_norm": rng.random() < 0.5,
            "qk_norm": rng.choice(["rms_norm_across_heads", None]),
            "rope_max_seq_len": 64,
        }
        h, w, t = _size(rng, 16, 16, 256), _size(rng, 16, 16, 256), rng.randint(1, 40)
        f = 4 * rng.randint(cfg["patch_size"][0] - 1, 5) + 1  # at least p_t latent frames
        _check(_write(tmp_path, f"wan{i}", cfg), "transformer",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t})


def _random_vae_config(rng: random.Random) -> dict:
    """Wan 2.1 (``WanUpBlock``, optional encoder attention) or Wan 2.2 style (``is_residual``, patchify).
    Wan 2.2's ``AvgDown3D`` / ``DupUp3D`` shortcuts need widths that step by powers of 2 and a last level
    as wide as the one before it."""
    residual = rng.random() < 0.5
    levels = rng.randint(2, 4) if residual else rng.randint(1, 4)
    if residual:
        mult = [1]
        for _ in range(levels - 2):
            mult.append(mult[-1] * rng.choice([1, 2]))
        mult.append(mult[-1])
    else:
        mult = [rng.randint(1, 4) for _ in range(levels)]
    patch = rng.choice([None, 2]) if residual else rng.choice([None, 1])
    p = patch or 1
    return {
        "_class_name": "AutoencoderKLWan",
        "base_dim": rng.choice([8, 16]),
        "decoder_base_dim": rng.choice([None, 8, 24]),
        "z_dim": rng.choice([4, 8]),
        "dim_mult": mult,
        "num_res_blocks": rng.randint(1, 2),
        "attn_scales": [] if residual else sorted(rng.sample([1.0, 0.5, 0.25], rng.randint(0, 2))),
        "temperal_downsample": [rng.random() < 0.5 for _ in range(levels - 1)],
        "is_residual": residual,
        "in_channels": 3 * p * p,
        "out_channels": rng.choice([3, 4]) * p * p,
        "patch_size": patch,
        "scale_factor_spatial": 2 ** (levels - 1) * p,
        "scale_factor_temporal": rng.choice([2, 4]),
    }


def _encoder_has_attention(cfg: dict) -> bool:
    """``attn_scales`` puts ``WanAttentionBlock``s in a Wan 2.1 encoder's ``down_blocks``, which
    ``WanEncoder3d.forward`` calls with the feature cache: diffusers 0.42.1 raises ``TypeError``, so
    encoding cannot be measured (their parameters still count, checked through ``decode``)."""
    return not cfg["is_residual"] and any(0.5 ** i in cfg["attn_scales"] for i in range(len(cfg["dim_mult"])))


def test_random_wan_vae_configs(rng, tmp_path):
    for i in range(5):
        cfg = _random_vae_config(rng)
        f = cfg["scale_factor_spatial"]
        side = max(16, 2 * f)  # WanPipeline: multiples of 16, then of f × the transformer's 2×2 patches
        h, w = _size(rng, side, side, 2 * side), _size(rng, side, side, 2 * side)
        t = cfg["scale_factor_temporal"]
        frames = _frames(rng, t, 3)
        folder = _write(tmp_path, f"vae{i}", cfg)
        s = {"height": h, "width": w, "num_frames": frames}
        _check(folder, "vae", Settings(height=h, width=w, num_frames=frames), s, call="decode")
        if _encoder_has_attention(cfg):
            continue
        if sum(cfg["temperal_downsample"]) > 2:  # chunks of 4 frames halve at most twice
            s["num_frames"] = frames = 1
        _check(folder, "vae", Settings(height=h, width=w, num_frames=frames, strength=1.0), s, call="encode")


def test_random_umt5_configs(rng, tmp_path):
    for i in range(4):
        cfg = {
            "architectures": ["UMT5EncoderModel"],
            "model_type": "umt5",
            "vocab_size": rng.choice([100, 257]),
            "d_model": rng.choice([16, 24]),
            "d_kv": rng.choice([4, 8]),
            "d_ff": rng.choice([20, 32]),
            "num_layers": rng.randint(1, 3),  # 0 layers count nothing, which the harness cannot record
            "num_heads": rng.randint(1, 4),
            "relative_attention_num_buckets": rng.choice([8, 32]),
            "feed_forward_proj": rng.choice(["gated-gelu", "relu", "gated-silu", "gelu"]),
        }
        seq = rng.randint(1, 64)
        _check(_write(tmp_path, f"umt5{i}", cfg), "text_encoder", Settings(max_sequence_length=seq),
               {"seq_len": seq}, index=None)


def test_random_wan_vace_transformer_configs(rng, tmp_path):
    """WanVACETransformer3DModel (WanVACEPipeline): the Wan transformer and its VACE blocks on the control latent."""
    from live_support import check_plan, write_config

    for i in range(3):
        heads, layers = rng.randint(1, 2), rng.randint(1, 4)
        cfg = {"_class_name": "WanVACETransformer3DModel", "num_attention_heads": heads, "attention_head_dim": 16,
               "in_channels": rng.choice([4, 16]), "out_channels": rng.choice([4, 16]), "text_dim": rng.choice([8, 32]),
               "freq_dim": 16, "ffn_dim": rng.choice([32, 48]), "num_layers": layers,
               "cross_attn_norm": rng.random() < 0.5, "patch_size": [1, 2, 2],
               "vace_layers": sorted({0, *rng.sample(range(layers), rng.randint(0, layers - 1))}),
               "vace_in_channels": rng.choice([8, 96])}
        h, w, f = 16 * rng.randint(1, 6), 16 * rng.randint(1, 6), 4 * rng.randint(0, 4) + 1
        check_plan(write_config(tmp_path, f"vace{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=f, max_sequence_length=16),
                   {"height": h, "width": w, "num_frames": f, "text_len": 16},
                   index={"_class_name": "WanVACEPipeline"})
