"""Live re-measurement of LTX-Video: ``LTXVideoTransformer3DModel`` and ``AutoencoderKLLTXVideo``
built on the meta device and counted now, on the card at a random size and frame count, on the
VAE's tiled path (``use_tiling``, what ``vae.enable_tiling()`` turns on) against the plan's per-tile
runs, and on randomized configs (every structural key the assemblers read: widths, heads, layers,
patches, activations, biases, norms; the VAE's 0.9.0 / 0.9.1 / 0.9.5 block variants, causality,
noise injection, timestep conditioning, residual upsampling, explicit compression ratios).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and
every measured module), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from live_support import (  # noqa: E402  (skips without torch)
    # skips without torch
    REPO,
    SEED,
    check_plan,
    measure,
)
from live_support import write_config as _write

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.architectures.autoencoder_kl_ltx import (
    spatial_compression,
    temporal_compression,
)
from flopcalc.engine.pipelines import Settings

pytestmark = pytest.mark.live

CARD = REPO / "model_cards/ltx-video"
INDEX = json.loads((CARD / "model_index.json").read_text())


def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           with_thop: bool = True) -> None:
    """flopcalc's plan for ``name`` under ``LTXPipeline`` against a fresh measurement."""
    check_plan(config_dir, name, settings, measure_settings, index=INDEX, call=call, thop=with_thop)


def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(max(1, lo // multiple), hi // multiple)


def _frames(rng: random.Random, temporal: int, most: int) -> int:
    return temporal * rng.randint(0, most) + 1


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size_and_frames(rng):
    h, w, f, t = _size(rng, 32, 128, 768), _size(rng, 32, 128, 768), _frames(rng, 8, 12), rng.randint(1, 256)
    _check(CARD / "transformer", "transformer", Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
           {"height": h, "width": w, "num_frames": f, "text_len": t}, with_thop=False)


def test_card_vae_decode_and_encode_at_random_size_and_frames(rng):
    h, w, f = _size(rng, 32, 64, 768), _size(rng, 32, 64, 768), _frames(rng, 8, 8)
    s = {"height": h, "width": w, "num_frames": f}
    _check(CARD / "vae", "vae", Settings(**s), s, call="decode")
    _check(CARD / "vae", "vae", Settings(**s, strength=1.0), s, call="encode")


def test_card_vae_tiled_decode_and_encode_are_the_plans_tile_runs(rng):
    """``use_tiling`` (``vae.enable_tiling()``): ``tiled_decode``/``tiled_encode`` run the decoder /
    encoder on every overlapping 512-px tile (latent 16 at stride 14); the plan lists one run per tile
    shape, the report folds them into one row, and its count is the measured count."""
    h, w, f = _size(rng, 32, 544, 1088), _size(rng, 32, 64, 1088), _frames(rng, 8, 2)
    cfg = json.loads((CARD / "vae/config.json").read_text())
    report = estimate_configs(INDEX, {"vae": cfg}, Settings(height=h, width=w, num_frames=f, strength=1.0,
                                                            vae_tiling=True))
    model = measure.build_model(CARD / "vae")
    model.use_tiling = True
    latent = measure.TensorSpec((1, cfg["latent_channels"], (f - 1) // 8 + 1, h // 32, w // 32))
    for call, inputs in (("decode", {"z": latent, "temb": None}),
                         ("encode", {"x": measure.TensorSpec((1, 3, f, h, w))})):
        fx = measure.measure_model(model, inputs, call=call)
        runs = [c for c in report.components if c.call == call]
        where = f"seed {SEED}, tiled {call} at {h}x{w}x{f}"
        assert len(runs) == 1 and len(runs[0].tree.children) > 1, where  # one row, one piece per tile shape
        assert 2 * sum(c.runs * c.macs_per_run for c in runs) == fx["torch"]["flops"], where
        assert sum(c.runs * c.tree.total.macs("thop") for c in runs) == fx["thop"]["macs"], where


# --------------------------------------------------------------------------- randomized transformers


def test_random_ltx_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
        patch, patch_t = rng.choice([1, 2]), rng.choice([1, 2])
        in_channels = rng.choice([4, 8, 16])
        cfg = {
            "_class_name": "LTXVideoTransformer3DModel",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "cross_attention_dim": heads * head_dim,  # attn2's to_k/to_v see caption_projection's width
            "num_layers": rng.randint(0, 3),
            "in_channels": in_channels,
            "out_channels": rng.choice([None, in_channels, 8]),
            "patch_size": patch,
            "patch_size_t": patch_t,
            "caption_channels": rng.choice([12, 24]),
            "activation_fn": rng.choice(["gelu", "gelu-approximate", "geglu", "geglu-approximate", "swiglu",
                                         "linear-silu"]),
            "attention_bias": rng.random() < 0.5,
            "attention_out_bias": rng.random() < 0.5,
            "norm_elementwise_affine": rng.random() < 0.5,
        }
        h, w = _size(rng, 32 * patch, 32, 256), _size(rng, 32 * patch, 32, 256)
        f, t = 8 * patch_t * rng.randint(0, 2) + 1 + 8 * (patch_t - 1), rng.randint(1, 40)
        _check(_write(tmp_path, f"ltx{i}", cfg), "transformer",
               Settings(height=h, width=w, num_frames=f, max_sequence_length=t),
               {"height": h, "width": w, "num_frames": f, "text_len": t})


# --------------------------------------------------------------------------- randomized VAEs


def _random_decoder(rng: random.Random) -> dict:
    """0.9.0-style (upsample_factor 1: any widths; timestep conditioning and noise injection need
    equal widths: an up block's ``conv_in`` gets the raw timestep, and ``per_channel_scale1`` has the
    block's input width but scales its output) or 0.9.1-style (factor 2, every level scaling,
    widths doubling from the top: each up block then keeps its width)."""
    levels = rng.randint(1, 3)
    noise = [rng.random() < 0.3 for _ in range(levels + 1)]
    layers = [rng.randint(1, 2) for _ in range(levels + 1)]
    if rng.random() < 0.5:
        conditioned = rng.random() < 0.5
        same = conditioned or any(noise)
        widths = [8] * levels if same else [rng.choice([8, 16, 24]) for _ in range(levels)]
        return {"decoder_block_out_channels": widths, "decoder_layers_per_block": layers,
                "decoder_spatio_temporal_scaling": [rng.random() < 0.6 for _ in range(levels)],
                "decoder_inject_noise": noise, "upsample_residual": [rng.random() < 0.5 for _ in range(levels)],
                "upsample_factor": [1] * levels, "timestep_conditioning": conditioned}
    base = rng.choice([8, 16])
    return {"decoder_block_out_channels": [base * 2 ** i for i in range(levels)], "decoder_layers_per_block": layers,
            "decoder_spatio_temporal_scaling": [True] * levels, "decoder_inject_noise": noise,
            "upsample_residual": [rng.random() < 0.5 for _ in range(levels)], "upsample_factor": [2] * levels,
            "timestep_conditioning": rng.random() < 0.5}


def _random_encoder(rng: random.Random) -> dict:
    """0.9.0-style ``LTXVideoDownBlock3D``s (any widths, stride-2 convolution downsamplers) or
    0.9.5-style ``LTXVideo095DownBlock3D``s (one fewer block than widths; space-to-depth
    downsamplers to the next width, or the stride-2 convolution where the width stays)."""
    levels = rng.randint(1, 4)
    if rng.random() < 0.5:
        return {"block_out_channels": [rng.choice([8, 16]) for _ in range(levels)],
                "down_block_types": ["LTXVideoDownBlock3D"] * levels,
                "layers_per_block": [rng.randint(1, 2) for _ in range(levels + 1)],
                "spatio_temporal_scaling": [rng.random() < 0.5 for _ in range(levels)],
                "downsample_type": ["conv"] * levels}
    kinds = [rng.choice(["conv", "spatial", "temporal", "spatiotemporal"]) for _ in range(levels)]
    widths = [8]
    for kind in kinds:
        widths.append(widths[-1] if kind == "conv" else 2 * widths[-1])
    return {"block_out_channels": widths, "down_block_types": ["LTXVideo095DownBlock3D"] * levels,
            "layers_per_block": [rng.randint(1, 2) for _ in range(levels + 1)],
            "spatio_temporal_scaling": [True] * levels, "downsample_type": kinds}


def _ratios(cfg: dict) -> tuple[int, int]:
    """The encoder's real compression (for the explicit ``*_compression_ratio`` of 0.9.5-style configs)."""
    spatial, temporal = cfg["patch_size"], 1
    for kind, on in zip(cfg["downsample_type"], cfg["spatio_temporal_scaling"]):
        if on:
            spatial *= 1 if kind == "temporal" else 2
            temporal *= 1 if kind == "spatial" else 2
    return spatial, temporal


def test_random_ltx_vae_configs(rng, tmp_path):
    for i in range(5):
        cfg = {"_class_name": "AutoencoderKLLTXVideo", "in_channels": rng.choice([3, 4]),
               "out_channels": rng.choice([3, 4]), "latent_channels": rng.choice([4, 8]),
               "patch_size": rng.choice([1, 2, 4]), "encoder_causal": rng.random() < 0.5,
               "decoder_causal": rng.random() < 0.5, **_random_encoder(rng), **_random_decoder(rng)}
        if cfg["down_block_types"][-1] == "LTXVideo095DownBlock3D":
            cfg["spatial_compression_ratio"], cfg["temporal_compression_ratio"] = _ratios(cfg)
        spatial, temporal = spatial_compression(cfg), temporal_compression(cfg)
        multiple = math.lcm(spatial, 32)  # LTXPipeline.check_inputs: 32; the latent grid: the VAE's ratio
        h, w, f = _size(rng, multiple, 32, 160), _size(rng, multiple, 32, 160), temporal * rng.randint(0, 2) + 1
        folder = _write(tmp_path, f"vae{i}", cfg)
        s = {"height": h, "width": w, "num_frames": f}
        _check(folder, "vae", Settings(**s), s, call="decode")
        _check(folder, "vae", Settings(**s, strength=1.0), s, call="encode")
