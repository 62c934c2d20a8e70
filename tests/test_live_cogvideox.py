"""Live re-measurement of the CogVideoX family: ``CogVideoXTransformer3DModel`` and
``AutoencoderKLCogVideoX`` built on the meta device and counted now: the card at a random size and
frame count (the VAE also tiled), randomized configs (every structural key the assemblers read),
and the VAE on arbitrary latent frame counts (both parities of ``_decode``'s frame batches).

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
    assert_runs_match,
    measure,
    write_config as _write,
)
from flopcalc.flops.estimate import estimate_configs  # noqa: E402
from flopcalc.engine.errors import ResolutionError  # noqa: E402
from flopcalc.engine.pipelines import Settings, plan  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble, component_params  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/cogvideox-2b"
INDEX = json.loads((CARD / "model_index.json").read_text())


class _Estimate:
    """The parts of a component estimate ``assert_matches_measurement`` reads, for a tree
    assembled directly (no pipeline plan)."""

    def __init__(self, cfg: dict, shape: RunShape, call: str) -> None:
        self.tree = assemble(cfg, shape, component="x", call=call)
        self.macs_per_run = self.tree.total.macs("torch")
        self.params = component_params(cfg, component="x", assembled=self.tree, call=call)


def _check_plan(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward") -> None:
    """flopcalc's plan for ``name`` under ``CogVideoXPipeline`` against a fresh measurement (a tiled
    VAE call: the sum of its per-tile-shape runs, read from the plan itself); where flopcalc refuses
    a size (an edge tile too small to encode), the real module must fail too."""
    cfg = json.loads((config_dir / "config.json").read_text())
    where = f"seed {SEED}, {config_dir.name} {call} {measure_settings}"
    try:
        runs = [r for r in plan(INDEX, {name: cfg}, settings).runs if r.component == name and r.call == call]
        trees = [(r.runs, assemble(cfg, r.shape, component=name, call=call)) for r in runs]
    except ResolutionError:
        with pytest.raises(RuntimeError):
            measure.measure_component(config_dir, settings=measure_settings, call=call, with_thop=False)
        return
    fx = measure.measure_component(config_dir, settings=measure_settings, call=call)
    if call == "forward":
        report = estimate_configs(INDEX, {name: cfg}, settings, convention="torch")
        assert_matches_measurement(report.component(name), fx, where)
    else:  # a VAE call at batch 1: one run, or one run per tile shape (n tiles of that shape)
        assert_runs_match(trees, component_params(cfg, component=name), fx, where)


def _check_direct(config_dir: Path, shape: RunShape, measure_settings: dict, call: str = "forward") -> None:
    """The assembler on ``shape`` (no plan) against a fresh measurement."""
    cfg = json.loads((config_dir / "config.json").read_text())
    fx = measure.measure_component(config_dir, settings=measure_settings, call=call)
    where = f"seed {SEED}, {config_dir.name} {call} {measure_settings}"
    assert_matches_measurement(_Estimate(cfg, shape, call), fx, where)


def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size_and_frames(rng):
    h, w, frames = _size(rng, 16, 128, 768), _size(rng, 16, 128, 768), 4 * rng.randint(0, 6) + 1
    _check_plan(CARD / "transformer", "transformer", Settings(height=h, width=w, num_frames=frames),
                {"height": h, "width": w, "num_frames": frames, "text_len": 226})


def test_card_vae_at_random_size_and_frames(rng):
    h, w, frames = _size(rng, 8, 64, 320), _size(rng, 8, 64, 320), 4 * rng.randint(0, 4) + 1
    for tiling in (False, True):
        s = {"height": h, "width": w, "num_frames": frames, "vae_tiling": int(tiling)}
        _check_plan(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=tiling), s,
                    call="decode")
        _check_plan(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=tiling,
                                                  strength=1.0), s, call="encode")


def test_card_vae_tiled_above_the_tile_size(rng):
    """Sizes above the 240×360 tile (30×45 latent pixels): several overlapping tiles, each in full."""
    h, w, frames = _size(rng, 8, 248, 440), _size(rng, 8, 368, 648), rng.choice([1, 5])
    s = {"height": h, "width": w, "num_frames": frames, "vae_tiling": 1}
    _check_plan(CARD / "vae", "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=True), s, call="decode")


def test_card_vae_on_any_latent_frame_count(rng):
    """``_decode`` batches latent frames by 2 (the first batch takes 3 when the count is odd): any
    count, whatever the pipeline's frame rule."""
    for t in sorted(rng.sample(range(1, 9), 3)):
        h, w = 8 * rng.randint(2, 8), 8 * rng.randint(2, 8)
        frames = 4 * (t - 1) + 1
        shape = RunShape(latent_height=h // 8, latent_width=w // 8, latent_frames=t)
        _check_direct(CARD / "vae", shape, {"height": h, "width": w, "num_frames": frames, "vae_tiling": 0},
                      call="decode")


def test_card_vae_encode_on_any_frame_count(rng):
    """``_encode`` batches 8 frames (the first batch takes the ``F mod 8`` extra ones)."""
    for frames in sorted(rng.sample(range(1, 30), 3)):
        h, w = 8 * rng.randint(2, 6), 8 * rng.randint(2, 6)
        _check_direct(CARD / "vae", RunShape(height=h, width=w, frames=frames),
                      {"height": h, "width": w, "num_frames": frames, "vae_tiling": 0}, call="encode")


# --------------------------------------------------------------------------- randomized transformers


def _random_transformer(rng: random.Random) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    rotary = rng.random() < 0.5
    learned = rotary and rng.random() < 0.3
    # positional tables cover T·(h/p)(w/p) positions, not the (T/p_t)·… tokens: diffusers runs
    # ``patch_size_t`` only without one (the rotary CogVideoX 1.5)
    patch_t = rng.choice([None, None, 2]) if rotary and not learned else None
    cond = rng.choice([16, 24])
    return {
        "_class_name": "CogVideoXTransformer3DModel",
        "num_attention_heads": heads,
        "attention_head_dim": head_dim,
        "in_channels": rng.choice([4, 8]),
        "out_channels": rng.choice([4, 8, 12]),
        "time_embed_dim": cond,
        "ofs_embed_dim": rng.choice([None, None, cond]),  # added to the time embedding: the same width
        "text_embed_dim": rng.choice([12, 40]),
        "num_layers": rng.randint(0, 3),
        "attention_bias": rng.random() < 0.5,
        "sample_height": 2 * rng.randint(4, 8),
        "sample_width": 2 * rng.randint(4, 8),
        "sample_frames": rng.choice([9, 13, 49]),
        "patch_size": rng.choice([1, 2]),
        "patch_size_t": patch_t,
        "temporal_compression_ratio": rng.choice([2, 4]),
        "max_text_seq_length": rng.randint(3, 20),
        "activation_fn": rng.choice(["gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu",
                                     "linear-silu"]),
        "norm_elementwise_affine": rng.random() < 0.5,
        "use_rotary_positional_embeddings": rotary,
        "use_learned_positional_embeddings": learned,
        "patch_bias": rng.random() < 0.5,
    }


def test_random_cogvideox_transformer_configs(rng, tmp_path):
    for i in range(5):
        cfg = _random_transformer(rng)
        p = cfg["patch_size"]
        if cfg["use_learned_positional_embeddings"]:
            lh, lw = cfg["sample_height"], cfg["sample_width"]  # learned tables run at the sample size only
        else:
            lh, lw = p * rng.randint(1, 8 // p), p * rng.randint(1, 8 // p)
        ratio = cfg["temporal_compression_ratio"]
        latent = rng.randint(1, 4)
        frames = (latent - 1) * ratio + 1  # the builder recovers ``latent`` with the pipeline's rule
        if cfg["patch_size_t"] and latent % cfg["patch_size_t"]:
            latent += cfg["patch_size_t"] - latent % cfg["patch_size_t"]  # the pipeline's padding
        uses_table = not cfg["use_rotary_positional_embeddings"] or cfg["use_learned_positional_embeddings"]
        text = cfg["max_text_seq_length"] if uses_table else rng.randint(1, 24)
        shape = RunShape(latent_height=lh, latent_width=lw, latent_frames=latent, text_len=text)
        _check_direct(_write(tmp_path, f"cog{i}", cfg), shape,
                      {"height": 8 * lh, "width": 8 * lw, "num_frames": frames, "text_len": text})


# --------------------------------------------------------------------------- randomized VAEs


def _random_vae(rng: random.Random) -> dict:
    levels = rng.randint(1, 4)
    groups = rng.choice([1, 2, 4])
    latent = rng.choice([2, 4])
    out = rng.choice([3, latent])
    return {
        "_class_name": "AutoencoderKLCogVideoX",
        "in_channels": rng.choice([1, 3]),
        "out_channels": out,
        "down_block_types": ["CogVideoXDownBlock3D"] * levels,
        "up_block_types": ["CogVideoXUpBlock3D"] * levels,
        # two channels per group at least: GroupNorm refuses one value per group (a 1×1 frame)
        "block_out_channels": [groups * rng.randint(2, 3) for _ in range(levels)],
        "latent_channels": latent,
        "layers_per_block": rng.randint(1, 2),
        "norm_num_groups": groups,
        "temporal_compression_ratio": rng.choice([1, 2, 4]),
        "sample_height": 8 * rng.randint(6, 12),  # tiles of half that: a few tiles at the sizes below
        "sample_width": 8 * rng.randint(6, 12),
        "use_quant_conv": out == latent and rng.random() < 0.5,
        "use_post_quant_conv": out == latent and rng.random() < 0.5,
    }


def test_random_cogvideox_vae_configs(rng, tmp_path):
    for i in range(3):
        cfg = _random_vae(rng)
        f = 2 ** (len(cfg["block_out_channels"]) - 1)
        h, w = _size(rng, f, 16, 80), _size(rng, f, 16, 80)
        frames = cfg["temporal_compression_ratio"] * rng.randint(0, 3) + 1
        tiling = rng.random() < 0.5
        folder = _write(tmp_path, f"vae{i}", cfg)
        s = {"height": h, "width": w, "num_frames": frames, "vae_tiling": int(tiling)}
        _check_plan(folder, "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=tiling), s,
                    call="decode")
        _check_plan(folder, "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=tiling, strength=1.0),
                    s, call="encode")


def test_random_vae_tiled(rng, tmp_path):
    """The tiled calls on a VAE with small tiles, at sizes several tiles wide: the sum of the
    per-tile-shape runs the plan makes."""
    cfg = {**_random_vae(rng), "sample_height": 32, "sample_width": 48}
    f = 2 ** (len(cfg["block_out_channels"]) - 1)
    h, w = _size(rng, f, 24, 48), _size(rng, f, 32, 64)
    frames = cfg["temporal_compression_ratio"] * rng.randint(0, 2) + 1
    folder = _write(tmp_path, "vae_tiles", cfg)
    s = {"height": h, "width": w, "num_frames": frames, "vae_tiling": 1}
    _check_plan(folder, "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=True), s, call="decode")
    _check_plan(folder, "vae", Settings(height=h, width=w, num_frames=frames, vae_tiling=True, strength=1.0), s,
                call="encode")
