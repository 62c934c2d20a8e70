"""Live re-measurement of Stable Cascade (``StableCascadeUNet`` as prior and as decoder, ``PaellaVQModel``)
against flopcalc.

The bundled cards' prior, decoder and VQGAN at random valid sizes, and randomized configs varying every
key the assemblers read, are built on meta and counted now: ``torch`` convention exact in total and for
every module path measured, parameters exact, ``thop`` exact. UNet: level count (1 to 4), widths, heads,
per-level block types (any order and repeats of the three block kinds), down and up layer counts (0 to 2),
repeat mappers, ``switch_level`` (None, or per-level bilinear resampling on or off), ``self_attn`` (one flag
or one per level), ``kernel_size``, ``patch_size``, ``timestep_conditioning_type``, ``clip_seq``,
``conditioning_dim``, the clip / effnet / pixel mappers (prior-style: text and image mappers; decoder-style:
effnet and pixel mappers), in/out channels, non-square sizes (odd level sizes: the up path's interpolation).
Paella: ``levels``, ``embed_dim``, ``bottleneck_blocks``, ``up_down_scale_factor``, channels; ``decode`` (as
the pipeline calls it) and ``encode``. The seed is printed; ``FLOPCALC_SEED=N`` replays it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from live_support import REPO, check_plan, write_config  # noqa: E402  (skips without torch)
from flopcalc.engine.pipelines import Settings  # noqa: E402
from flopcalc.engine.pipelines.stable_cascade import decoder_latent_side, prior_latent_side  # noqa: E402

pytestmark = pytest.mark.live

CARD = REPO / "model_cards" / "stable-cascade"
LITE = REPO / "model_cards" / "stable-cascade-lite"
TYPES = ("SDCascadeResBlock", "SDCascadeTimestepBlock", "SDCascadeAttnBlock")


def _side(rng: random.Random, lo: int, hi: int, patch: int, decoder: bool) -> int:
    """A random image side whose latent (the prior's ``ceil(side / 42.67)``, the decoder's ``int(· · 10.67)``)
    divides by ``patch``."""
    while True:
        side = rng.randint(lo, hi)
        latent = decoder_latent_side(prior_latent_side(side)) if decoder else prior_latent_side(side)
        if latent % patch == 0:
            return side


def _unet(cfg_dir: Path, rng: random.Random, lo: int, hi: int) -> None:
    """At a random size (``lo``..``hi`` px above the smallest the config's downscalings can run at)."""
    cfg = json.loads((cfg_dir / "config.json").read_text())
    decoder = cfg.get("effnet_in_channels") is not None
    patch = cfg.get("patch_size", 1)
    smallest = 43 * patch * 2 ** (len(cfg["block_out_channels"]) - 1) // (10 if decoder else 1)
    lo, hi = lo + smallest, hi + smallest
    h, w = _side(rng, lo, hi, patch, decoder), _side(rng, lo, hi, patch, decoder)
    check_plan(cfg_dir, "decoder" if decoder else "prior", Settings(height=h, width=w),
               {"height": h, "width": w, "text_len": 77}, module_depth=4)


def _vqgan(cfg_dir: Path, rng: random.Random, factor: int, lo: int, hi: int) -> None:
    h, w = factor * rng.randint(lo, hi), factor * rng.randint(lo, hi)
    check_plan(cfg_dir, "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
    check_plan(cfg_dir, "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


# --------------------------------------------------------------------------- the bundled cards


def test_card_prior_at_random_size(rng):
    _unet(CARD / "prior_prior", rng, 0, 1500)


def test_card_prior_with_reference_images(rng):
    """``--reference-images N``: the prior sees ``clip_seq`` tokens per image."""
    n = rng.randint(1, 4)
    h, w = rng.randint(256, 1536), rng.randint(256, 1536)
    check_plan(CARD / "prior_prior", "prior", Settings.make(height=h, width=w, reference_images=n),
               {"height": h, "width": w, "text_len": 77, "reference_images": n}, module_depth=4)


def test_card_prior_encoders():
    """The prior's CLIP text encoder (77 tokens) and, given reference images, its CLIP vision encoder (224²),
    as the combined pipeline plans them."""
    index = json.loads((CARD / "model_index.json").read_text())
    check_plan(CARD / "prior_text_encoder", "prior_text_encoder", Settings(), {"seq_len": 77}, index=index)
    check_plan(CARD / "prior_image_encoder", "prior_image_encoder", Settings.make(reference_images=2),
               {"height": 224, "width": 224}, index=index)


def test_card_decoder_at_random_size(rng):
    _unet(LITE / "decoder", rng, 0, 700)


def test_card_vqgan_at_random_size(rng):
    _vqgan(CARD / "vqgan", rng, 4, 8, 64)


# --------------------------------------------------------------------------- randomized configs


def _unet_config(rng: random.Random, decoder: bool) -> dict:
    levels = rng.randint(1, 4)
    heads = [rng.randint(1, 4) for _ in range(levels)]
    channels = [h * rng.choice([2, 4, 6]) for h in heads]
    types = []
    for _ in range(levels):
        kinds = [rng.choice(TYPES) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.7:
            kinds[0] = "SDCascadeResBlock"  # the real checkpoints' order: the skip goes to the first ResBlock
        types.append(kinds)
    cond = rng.randint(4, 24)
    cfg = {
        "_class_name": "StableCascadeUNet",
        "in_channels": rng.randint(1, 6),
        "out_channels": rng.randint(1, 6),
        "timestep_ratio_embedding_dim": rng.randint(4, 12),
        "patch_size": rng.randint(1, 2),
        "conditioning_dim": cond,
        "block_out_channels": channels,
        "num_attention_heads": heads,
        "down_num_layers_per_block": [rng.randint(0, 2) for _ in range(levels)],
        "up_num_layers_per_block": [rng.randint(0, 2) for _ in range(levels)],
        "down_blocks_repeat_mappers": [rng.randint(1, 3) for _ in range(levels)],
        "up_blocks_repeat_mappers": [rng.randint(1, 3) for _ in range(levels)],
        "block_types_per_layer": types,
        "clip_text_in_channels": None if decoder else rng.randint(2, 20),
        "clip_text_pooled_in_channels": rng.randint(2, 20),
        "clip_image_in_channels": None if decoder else rng.randint(2, 20),
        "clip_seq": rng.randint(1, 4),
        "effnet_in_channels": rng.randint(1, 16) if decoder else None,
        "pixel_mapper_in_channels": rng.choice([None, 3]) if decoder else None,
        "kernel_size": rng.choice([1, 3, 5]),
        "dropout": [0.0] * levels,
        "self_attn": rng.choice([True, False]) if rng.random() < 0.5 else [rng.random() < 0.5 for _ in range(levels)],
        "timestep_conditioning_type": rng.sample(["sca", "crp"], rng.randint(0, 2)),
        "switch_level": None if rng.random() < 0.5 else [rng.random() < 0.5 for _ in range(levels - 1)] or [False],
    }
    has_attn = any("SDCascadeAttnBlock" in t and (d or u) for t, d, u in
                   zip(types, cfg["down_num_layers_per_block"], cfg["up_num_layers_per_block"]))
    if not has_attn:  # the harness requires attention counted whenever the model has attention modules
        types[0].append("SDCascadeAttnBlock")
        cfg["down_num_layers_per_block"][0] = max(1, cfg["down_num_layers_per_block"][0])
    return cfg


def test_random_prior_configs(rng, tmp_path):
    for i in range(3):
        _unet(write_config(tmp_path, f"prior{i}", _unet_config(rng, False)), rng, 0, 500)


def test_random_decoder_configs(rng, tmp_path):
    for i in range(3):
        _unet(write_config(tmp_path, f"decoder{i}", _unet_config(rng, True)), rng, 0, 300)


def test_random_paella_configs(rng, tmp_path):
    for i in range(3):
        levels = rng.randint(1, 3)
        scale = rng.randint(1, 3)
        cfg = {
            "_class_name": "PaellaVQModel",
            "in_channels": rng.randint(1, 4),
            "out_channels": rng.randint(1, 4),
            "up_down_scale_factor": scale,
            "levels": levels,
            "bottleneck_blocks": rng.randint(0, 3),
            "embed_dim": 2 ** (levels - 1) * rng.randint(1, 6),
            "latent_channels": rng.randint(1, 6),
            "num_vq_embeddings": rng.randint(2, 64),
        }
        _vqgan(write_config(tmp_path, f"paella{i}", cfg), rng, scale * 2 ** (levels - 1), 2, 24)


def test_latent_geometry_equals_diffusers_prepare_latents(rng):
    """flopcalc's latent sides against the pipelines' own ``prepare_latents`` (called on stand-ins for
    ``self``, on meta) at random sizes and the Hub index values."""
    from types import SimpleNamespace

    import torch
    from diffusers.pipelines.stable_cascade.pipeline_stable_cascade import StableCascadeDecoderPipeline
    from diffusers.pipelines.stable_cascade.pipeline_stable_cascade_prior import StableCascadePriorPipeline

    scheduler = SimpleNamespace(init_noise_sigma=1.0)
    for _ in range(20):
        h, w = rng.randint(64, 4096), rng.randint(64, 4096)
        prior = SimpleNamespace(prior=SimpleNamespace(config=SimpleNamespace(in_channels=16)),
                                config=SimpleNamespace(resolution_multiple=42.67))
        latents = StableCascadePriorPipeline.prepare_latents(prior, 1, h, w, 1, torch.float32, "meta", None, None,
                                                             scheduler)
        assert tuple(latents.shape[2:]) == (prior_latent_side(h), prior_latent_side(w)), (h, w)
        decoder = SimpleNamespace(config=SimpleNamespace(latent_dim_scale=10.67))
        out = StableCascadeDecoderPipeline.prepare_latents(decoder, 1, latents, 1, torch.float32, "meta", None, None,
                                                           scheduler)
        assert tuple(out.shape[2:]) == tuple(decoder_latent_side(s) for s in latents.shape[2:]), (h, w)
