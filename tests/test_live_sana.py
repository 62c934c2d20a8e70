"""Live re-measurement of the SANA family (``SanaTransformer2DModel``, ``AutoencoderDC``) against
flopcalc, and of SANA's resolution bins against diffusers' own tables.

The bundled cards' transformer and DC-AE at a random size, and randomized configs varying every
key the assemblers read, are built on meta and counted now: ``torch`` convention exact in total
and for every module path measured, parameters exact, ``thop`` exact. Transformer: heads, head
width, layers, cross-attention heads and width, caption width and length, ``mlp_ratio`` (incl.
non-integral products), attention bias, patch size, in/out channels, norm affine, q/k norms,
``guidance_embeds``, ``interpolation_scale``. DC-AE: stage count and widths (encoder and decoder
apart), layers per stage (incl. ``r_0 = 0``: the strided ``conv_in`` / ``conv_out`` blocks), block
types, multi-scale kernels, head width (incl. widths it does not divide), decoder norms (RMSNorm /
BatchNorm) and activations, up/down-sampling types, shortcuts, latent/image channels, and maps small
enough (at most ``attention_head_dim`` positions) for the quadratic attention branch. The seed is printed; ``FLOPCALC_SEED=N`` replays it (the
pattern of tests/test_live.py).
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

SANA_INDEX = {"_class_name": "SanaPipeline"}



def _size(rng: random.Random, multiple: int, lo: int, hi: int) -> int:
    return multiple * rng.randint(lo // multiple, hi // multiple)



def _check_transformer(folder: Path, height: int, width: int, text_len: int) -> None:
    """SanaPipeline's transformer run (denoiser only, no binning) against the harness."""
    cfg = json.loads((folder / "config.json").read_text())
    report = estimate_configs(None, {"transformer": cfg}, Settings(height=height, width=width,
                                                                   max_sequence_length=text_len,
                                                                   resolution_binning=False))
    comp = report.component("transformer")
    assert comp.shape == {"latent_height": height // 32, "latent_width": width // 32, "text_len": text_len}
    fx = measure.measure_component(folder, settings={"height": height, "width": width, "text_len": text_len})
    assert_matches_measurement(comp, fx, f"seed {SEED}, {folder.name} {height}x{width} text {text_len}: {cfg}")


def _check_vae(folder: Path, height: int, width: int, call: str) -> None:
    """The DC-AE planned by SanaPipeline (a pipeline of just the VAE) against the harness."""
    cfg = json.loads((folder / "config.json").read_text())
    settings = Settings(height=height, width=width, resolution_binning=False,
                        strength=1.0 if call == "encode" else None)
    report = estimate_configs(SANA_INDEX, {"vae": cfg}, settings)
    comp = report.component("vae", call)
    fx = measure.measure_component(folder, settings={"height": height, "width": width}, call=call, module_depth=6)
    assert_matches_measurement(comp, fx, f"seed {SEED}, {folder.name} {call} {height}x{width}: {cfg}")


# --------------------------------------------------------------------------- bundled cards


@pytest.mark.parametrize("card", ["sana-600m-512", "sana-1.6b-512", "sana-1.5-1.6b", "sana-sprint-1.6b"])
def test_card_transformer_at_random_size(rng, card):
    h, w = _size(rng, 32, 64, 2048), _size(rng, 32, 64, 2048)
    _check_transformer(REPO / "model_cards" / card / "transformer", h, w, rng.randint(1, 400))


def test_card_vae_at_random_size(rng):
    h, w = _size(rng, 32, 32, 1024), _size(rng, 32, 32, 1024)
    for call in ("decode", "encode"):
        _check_vae(REPO / "model_cards/sana-600m-512/vae", h, w, call)


# --------------------------------------------------------------------------- randomized configs


def _random_transformer(rng: random.Random) -> dict:
    heads, head_dim = rng.randint(1, 4), rng.choice([8, 16])
    dim = heads * head_dim
    cross_head_dim = rng.choice([d for d in (4, 8, 16, dim) if dim % d == 0])
    return {
        "_class_name": "SanaTransformer2DModel",
        "in_channels": rng.choice([4, 8]),
        "out_channels": rng.choice([None, 4, 12]),
        "num_attention_heads": heads,
        "attention_head_dim": head_dim,
        "num_layers": rng.randint(0, 2),
        "num_cross_attention_heads": dim // cross_head_dim,
        "cross_attention_head_dim": cross_head_dim,
        "cross_attention_dim": dim,  # the blocks attend to the caption after projection to the model width
        "caption_channels": rng.choice([16, 24, 40]),
        "mlp_ratio": rng.choice([2.5, 1.0, 3.3, 4]),
        "attention_bias": rng.random() < 0.5,
        "sample_size": rng.choice([4, 8, 16]),
        "patch_size": rng.choice([1, 2]),
        "norm_elementwise_affine": rng.random() < 0.5,
        "qk_norm": rng.choice([None, "rms_norm_across_heads", "layer_norm_across_heads"]),
        "guidance_embeds": rng.random() < 0.3,
        "interpolation_scale": rng.choice([None, None, 1.0, 2.0]),
        "timestep_scale": rng.choice([1.0, 1000.0]),
    }


def test_random_transformer_configs(rng, tmp_path):
    for i in range(4):
        cfg = _random_transformer(rng)
        multiple = 32 * cfg["patch_size"]
        h, w = _size(rng, multiple, multiple, 8 * multiple), _size(rng, multiple, multiple, 8 * multiple)
        _check_transformer(_write(tmp_path, f"sana{i}", cfg), h, w, rng.randint(1, 24))


def _widths(rng: random.Random, stages: int) -> list[int]:
    """Non-decreasing powers of two, each at most twice the one before (the DC shortcuts need
    4·C_out divisible by C_in up and 4·C_in by C_out down)."""
    widths = [rng.choice([16, 32])]
    for _ in range(stages - 1):
        widths.append(min(widths[-1] * rng.choice([1, 2]), 64))
    return widths


def _random_dc_ae(rng: random.Random) -> dict:
    stages = rng.randint(2, 4)
    enc, dec = _widths(rng, stages), _widths(rng, stages)
    latent = rng.choice([c for c in (4, 8, 16) if enc[-1] % c == 0 and dec[-1] % c == 0])

    def layers() -> list[int]:
        return [rng.choice([0, 1, 2])] + [rng.randint(1, 2) for _ in range(stages - 1)]

    def kinds() -> list[str]:  # the last stage attends: see below
        return [rng.choice(["ResBlock", "EfficientViTBlock"]) for _ in range(stages - 1)] + ["EfficientViTBlock"]

    def scales() -> list[list[int]]:
        return [rng.choice([[], [3], [5], [3, 5]]) for _ in range(stages)]

    norms = rng.choice(["rms_norm", [rng.choice(["rms_norm", "batch_norm"]) for _ in range(stages)]])
    acts = rng.choice(["silu", [rng.choice(["silu", "relu"]) for _ in range(stages)]])
    return {
        "_class_name": "AutoencoderDC",
        "in_channels": rng.choice([3, 4]),
        "latent_channels": latent,
        "attention_head_dim": rng.choice([8, 12, 16]),
        # Attention on both sides or on neither: the harness refuses a call that runs no attention
        # matmul in a model that has attention modules (the decoder alone is all ResBlocks).
        **({"encoder_block_types": "ResBlock", "decoder_block_types": "ResBlock"} if rng.random() < 0.2 else
           {"encoder_block_types": rng.choice(["EfficientViTBlock", kinds()]), "decoder_block_types": kinds()}),
        "encoder_block_out_channels": enc,
        "decoder_block_out_channels": dec,
        "encoder_layers_per_block": layers(),
        "decoder_layers_per_block": layers(),
        "encoder_qkv_multiscales": scales(),
        "decoder_qkv_multiscales": scales(),
        "upsample_block_type": rng.choice(["pixel_shuffle", "interpolate"]),
        "downsample_block_type": rng.choice(["pixel_unshuffle", "conv"]),
        "decoder_norm_types": norms,
        "decoder_act_fns": acts,
        "encoder_out_shortcut": rng.random() < 0.7,
        "decoder_in_shortcut": rng.random() < 0.7,
        "decoder_conv_act_fn": rng.choice(["relu", "silu"]),
    }


def test_random_dc_ae_configs(rng, tmp_path):
    for i in range(4):
        cfg = _random_dc_ae(rng)
        h, w = 32 * rng.randint(1, 3), 32 * rng.randint(1, 3)  # SanaPipeline: multiples of 32
        folder = _write(tmp_path, f"dcae{i}", cfg)
        for call in ("decode", "encode"):
            _check_vae(folder, h, w, call)


def test_dc_ae_quadratic_attention_on_small_maps(tmp_path):
    """A 4×4 latent with 16-wide heads: the deepest stages take the quadratic branch
    (``height * width <= attention_head_dim``), the shallower ones the linear one."""
    cfg = {"_class_name": "AutoencoderDC", "latent_channels": 8, "attention_head_dim": 16,
           "encoder_block_types": ["ResBlock", "EfficientViTBlock", "EfficientViTBlock", "EfficientViTBlock"],
           "decoder_block_types": ["ResBlock", "EfficientViTBlock", "EfficientViTBlock", "EfficientViTBlock"],
           "encoder_block_out_channels": [16, 32, 32, 64], "decoder_block_out_channels": [16, 32, 32, 64],
           "encoder_layers_per_block": [1, 1, 1, 1], "decoder_layers_per_block": [1, 1, 1, 1],
           "encoder_qkv_multiscales": [[], [3], [5], [5]], "decoder_qkv_multiscales": [[], [3], [5], [5]]}
    folder = _write(tmp_path, "dcae_small", cfg)
    for call in ("decode", "encode"):
        _check_vae(folder, 32, 32, call)


# --------------------------------------------------------------------------- pipeline data


def test_bins_are_diffusers_tables():
    """flopcalc/data/sana_aspect_ratio_bins.json is what validation/extract_tables.py copies."""
    from diffusers.pipelines.sana import pipeline_sana as sana

    data = json.loads((REPO / "flopcalc/data/sana_aspect_ratio_bins.json").read_text())
    for key, table in (("128", sana.ASPECT_RATIO_4096_BIN), ("64", sana.ASPECT_RATIO_2048_BIN),
                       ("32", sana.ASPECT_RATIO_1024_BIN), ("16", sana.ASPECT_RATIO_512_BIN)):
        assert data[key] == {r: [int(h), int(w)] for r, (h, w) in table.items()}


def test_binning_matches_diffusers(rng):
    from diffusers.image_processor import PixArtImageProcessor
    from diffusers.pipelines.sana import pipeline_sana as sana

    from flopcalc.engine.pipelines.sana import sana_binned_size

    for sample, table in ((16, sana.ASPECT_RATIO_512_BIN), (32, sana.ASPECT_RATIO_1024_BIN),
                          (64, sana.ASPECT_RATIO_2048_BIN), (128, sana.ASPECT_RATIO_4096_BIN)):
        for _ in range(25):
            h, w = _size(rng, 32, 32, 4096), _size(rng, 32, 32, 4096)
            assert sana_binned_size(h, w, sample) == PixArtImageProcessor.classify_height_width_bin(h, w, table)


def test_random_controlnet_configs(rng, tmp_path):
    """``SanaControlNetModel`` (randomized like the transformer, no q/k norms or guidance: the class has
    neither) under SanaControlNetPipeline against the harness."""
    for i in range(3):
        cfg = {k: v for k, v in _random_transformer(rng).items()
               if k not in ("qk_norm", "guidance_embeds", "timestep_scale")}
        cfg["_class_name"] = "SanaControlNetModel"
        multiple = 32 * cfg["patch_size"]
        h, w = _size(rng, multiple, multiple, 8 * multiple), _size(rng, multiple, multiple, 8 * multiple)
        folder = _write(tmp_path, f"sana_cn{i}", cfg)
        t = rng.randint(1, 24)
        report = estimate_configs(None, {"controlnet": cfg}, Settings(height=h, width=w, max_sequence_length=t,
                                                                     resolution_binning=False))
        fx = measure.measure_component(folder, settings={"height": h, "width": w, "text_len": t})
        assert_matches_measurement(report.component("controlnet"), fx, f"seed {SEED}, {h}x{w} text {t}: {cfg}")
