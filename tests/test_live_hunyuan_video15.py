"""Live re-measurement of HunyuanVideo 1.5: ``HunyuanVideo15Transformer3DModel`` and
``AutoencoderKLHunyuanVideo15``, built on the meta device and counted now: randomized configs (every
structural key the assemblers read) under ``HunyuanVideo15Pipeline``'s plan and, for the transformer,
through the assembler at random token counts; and the plan's default size against diffusers' own
``calculate_default_height_width``.

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module), parameters exact, ``thop`` convention exact.
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
from flopcalc.engine.pipelines.hunyuan_video15 import GLYPH_TOKENS, IMAGE_TOKENS, TEXT_TOKENS, default_size  # noqa: E402
from flopcalc.engine.registry import RunShape, assemble  # noqa: E402

pytestmark = pytest.mark.live

CONFIGS = REPO / "model_cards/hunyuanvideo-1.5-480p"
INDEX = json.loads((CONFIGS / "model_index.json").read_text())


def _random_config(rng: random.Random) -> dict:
    heads, head_dim = rng.randint(1, 3), rng.choice([16, 32])
    t_axis = rng.choice([4, 8])  # rotary axes: even widths summing to head_dim
    return {
        "_class_name": "HunyuanVideo15Transformer3DModel",
        "in_channels": rng.choice([5, 9, 17]),
        "out_channels": rng.choice([4, 8]),
        "num_attention_heads": heads,
        "attention_head_dim": head_dim,
        "num_layers": rng.randint(0, 2),
        "num_refiner_layers": rng.randint(0, 2),
        "mlp_ratio": rng.choice([4.0, 2.0, 2.5]),
        "patch_size": rng.choice([1, 2]),
        "patch_size_t": rng.choice([1, 2]),
        "qk_norm": rng.choice(["rms_norm", "layer_norm"]),  # None: the processor calls norm_q unconditionally
        "text_embed_dim": rng.choice([24, 40]),
        "text_embed_2_dim": rng.choice([12, 20]),
        "image_embed_dim": rng.choice([8, 12]),
        "rope_axes_dim": [t_axis, (head_dim - t_axis) // 2, (head_dim - t_axis) // 2],
        "use_meanflow": rng.random() < 0.5,
    }


def _frames(rng: random.Random, cfg: dict) -> int:
    """At least patch_size_t latent frames ((frames - 1) // 4 + 1), a multiple of it."""
    pt = cfg["patch_size_t"]
    return 4 * pt * rng.randint(1, 3) - 3


def test_random_configs_under_the_plan(rng, tmp_path):
    """The plan's token counts (1000 Qwen, 256 byT5, 729 image tokens) on random small models."""
    for i in range(2):
        cfg = _random_config(rng)
        p = cfg["patch_size"]
        h, w, frames = random_size(rng, 16 * p, 16, 96), random_size(rng, 16 * p, 16, 96), _frames(rng, cfg)
        check_plan(write_config(tmp_path, f"hv15-{i}", cfg), "transformer",
                   Settings(height=h, width=w, num_frames=frames),
                   {"height": h, "width": w, "num_frames": frames, "text_len": TEXT_TOKENS,
                    "text_len_2": GLYPH_TOKENS, "image_tokens": IMAGE_TOKENS}, index=INDEX)


def test_random_configs_at_random_token_counts(rng, tmp_path):
    for i in range(4):
        cfg = _random_config(rng)
        p = cfg["patch_size"]
        h, w, frames = random_size(rng, 16 * p, 16, 128), random_size(rng, 16 * p, 16, 128), _frames(rng, cfg)
        t1, t2, t3 = rng.randint(1, 30), rng.randint(1, 20), rng.randint(1, 20)
        shape = RunShape(latent_height=h // 16, latent_width=w // 16, latent_frames=(frames - 1) // 4 + 1,
                         text_len=t1, text_len_2=t2, image_tokens=t3)
        tree = assemble(cfg, shape, component="transformer")
        comp = SimpleNamespace(tree=tree, macs_per_run=tree.total.macs("torch"), params=tree.total.params)
        fx = measure.measure_component(write_config(tmp_path, f"hv15t-{i}", cfg), settings={
            "height": h, "width": w, "num_frames": frames, "text_len": t1, "text_len_2": t2, "image_tokens": t3})
        assert_matches_measurement(comp, fx, f"seed {SEED}, {h}x{w}x{frames} tokens {t1}+{t2}+{t3}: {cfg}")


def test_default_size_is_diffusers_bucket(rng):
    from diffusers.pipelines.hunyuan_video1_5.image_processor import HunyuanVideo15ImageProcessor

    processor = HunyuanVideo15ImageProcessor(vae_scale_factor=16)
    for target in [640, 960] + [16 * rng.randint(8, 80) for _ in range(5)]:
        assert default_size(target, 16) == tuple(processor.calculate_default_height_width(9, 16, target)), target
        h, w = rng.randint(64, 2048), rng.randint(64, 2048)  # an image-to-video input image
        assert default_size(target, 16, h, w) == tuple(processor.calculate_default_height_width(h, w, target)), \
            (target, h, w)


def _random_vae_config(rng: random.Random) -> dict:
    """Configs the real class can run: neighbouring widths equal or doubling (the pixel shuffles' reshapes)."""
    levels = rng.randint(2, 4)
    z = rng.choice([4, 8])
    channels = [32]
    for _ in range(levels - 1):
        channels.append(channels[-1] * rng.choice([1, 2]))
    spatial = 2 ** (levels - 1)
    return {
        "_class_name": "AutoencoderKLHunyuanVideo15",
        "in_channels": 3,
        "out_channels": rng.choice([3, 4]),
        "latent_channels": z,
        "block_out_channels": channels,
        "layers_per_block": rng.randint(1, 2),
        "spatial_compression_ratio": spatial,
        "temporal_compression_ratio": rng.choice([t for t in (1, 2, 4) if t <= spatial]),
        "downsample_match_channel": True,
        "upsample_match_channel": True,
    }


def test_random_vae_configs(rng, tmp_path):
    for i in range(3):
        cfg = _random_vae_config(rng)
        f, t = cfg["spatial_compression_ratio"], cfg["temporal_compression_ratio"]
        h, w, frames = random_size(rng, f, 16, 96), random_size(rng, f, 16, 96), 1 + t * rng.randint(0, 3)
        folder = write_config(tmp_path, f"vae{i}", cfg)
        for call in ("decode", "encode"):
            check_plan(folder, "vae", Settings(height=h, width=w, num_frames=frames,
                                               strength=1.0 if call == "encode" else None),
                       {"height": h, "width": w, "num_frames": frames}, index=INDEX, call=call)
