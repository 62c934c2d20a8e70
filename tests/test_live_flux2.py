"""Live re-measurement of the FLUX.2 family: ``Flux2Transformer2DModel``, ``AutoencoderKLFlux2`` and the
text path of ``Mistral3ForConditionalGeneration`` built on the meta device and counted now, on the
FLUX.2-dev card at a random size and text length (as ``Flux2Pipeline`` plans them) and on randomized
configs (every structural key the assemblers read: heads, head width, rotary axes, double- and
single-stream layer counts, MLP ratio, channels in and out, patch size, text width, timestep channels,
guidance embedding, reference images (``--reference-images``); the VAE's widths, decoder widths, depth, latent channels, quant convs, mid-block
attention; Mistral-3's text geometry, head width, GQA, vocabulary, tying, and the parameter-only Pixtral
tower and projector).

The seed is printed; ``FLOPCALC_SEED=N`` replays it. Bar: ``torch`` convention exact (total and every
measured module path), parameters exact, ``thop`` convention exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from live_support import (  # noqa: E402  (skips without torch)
    REPO,
    check_plan,
    random_size,
    write_config,
)
from flopcalc.engine.pipelines import Settings  # noqa: E402

pytestmark = [pytest.mark.live]

CARD = REPO / "model_cards/flux2-dev"
INDEX = json.loads((CARD / "model_index.json").read_text())


def _check(config_dir: Path, name: str, settings: Settings, measure_settings: dict, call: str = "forward",
           thop: bool = True) -> None:
    """flopcalc's plan for ``name`` under ``Flux2Pipeline`` against a fresh measurement."""
    check_plan(config_dir, name, settings, measure_settings, index=INDEX, call=call, thop=thop)


# --------------------------------------------------------------------------- the card


def test_card_transformer_at_random_size(rng):
    h, w, t = random_size(rng, 16, 128, 1024), random_size(rng, 16, 128, 1024), rng.randint(1, 512)
    _check(CARD / "transformer", "transformer", Settings(height=h, width=w, max_sequence_length=t),
           {"height": h, "width": w, "text_len": t}, thop=False)


def test_card_text_encoder_and_vae_at_random_settings(rng):
    t = rng.randint(1, 512)
    _check(CARD / "text_encoder", "text_encoder", Settings(max_sequence_length=t), {"seq_len": t}, thop=False)
    h, w = random_size(rng, 16, 64, 512), random_size(rng, 16, 64, 512)
    _check(CARD / "vae", "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
    _check(CARD / "vae", "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


def test_card_transformers_with_reference_images(rng):
    """``--reference-images R`` on both cards' transformers: the generated tokens followed by R references' tokens
    (each reference the generated size, or resized to about 1024² pixels above it), measured with the ids the
    pipeline's ``_prepare_image_ids`` builds."""
    from flopcalc.engine.pipelines.flux2 import reference_size

    klein = REPO / "model_cards/flux2-klein-9b"
    for card, index in ((CARD, INDEX), (klein, json.loads((klein / "model_index.json").read_text()))):
        refs, t = rng.randint(1, 3), rng.randint(1, 512)
        h, w = random_size(rng, 16, 64, 1024), random_size(rng, 16, 64, 1024)
        while max(h, w) > 8 * min(h, w):  # a reference beyond 8:1 is refused by check_image_input (tested apart)
            w = random_size(rng, 16, 64, 1024)
        check_plan(card / "transformer", "transformer", Settings.make(height=h, width=w, max_sequence_length=t,
                                                                      reference_images=refs),
                   {"height": h, "width": w, "text_len": t, "reference_images": refs}, index=index, thop=False)
    h, w = random_size(rng, 16, 1040, 1536), random_size(rng, 16, 1040, 1536)  # above the cap: resized
    ref_h, ref_w = reference_size(h, w, 16)
    assert ref_h * ref_w <= 1024 * 1024 < h * w
    _check(CARD / "transformer", "transformer", Settings.make(height=h, width=w, reference_images=1),
           {"height": h, "width": w, "text_len": 512, "reference_images": 1, "reference_height": ref_h,
            "reference_width": ref_w}, thop=False)


# --------------------------------------------------------------------------- randomized configs


def test_random_flux2_transformer_configs(rng, tmp_path):
    for i in range(4):
        heads, head_dim = rng.randint(1, 4), rng.choice([16, 32])
        cfg = {
            "_class_name": "Flux2Transformer2DModel",
            "num_attention_heads": heads,
            "attention_head_dim": head_dim,
            "num_layers": rng.randint(0, 3),
            "num_single_layers": rng.randint(0, 3),
            "mlp_ratio": rng.choice([1.0, 2.5, 3.0, 4.0]),
            "patch_size": rng.choice([1, 2]),
            "in_channels": 4 * rng.choice([4, 8]),
            "out_channels": rng.choice([None, 4, 16]),
            "joint_attention_dim": rng.choice([24, 48]),
            "timestep_guidance_channels": rng.choice([16, 32]),
            "axes_dims_rope": [head_dim // 4] * 4,
            "guidance_embeds": rng.random() < 0.5,
        }
        h, w, t = random_size(rng, 16, 32, 256), random_size(rng, 16, 32, 256), rng.randint(1, 40)
        folder = write_config(tmp_path, f"flux2_{i}", cfg)
        _check(folder, "transformer", Settings(height=h, width=w, max_sequence_length=t),
               {"height": h, "width": w, "text_len": t})
        # with reference images (at least 64 px a side, as check_image_input asks)
        h, w, refs = random_size(rng, 16, 64, 256), random_size(rng, 16, 64, 256), rng.randint(1, 3)
        _check(folder, "transformer", Settings.make(height=h, width=w, max_sequence_length=t, reference_images=refs),
               {"height": h, "width": w, "text_len": t, "reference_images": refs})


def test_random_autoencoder_kl_flux2_configs(rng, tmp_path):
    for i in range(3):
        levels = rng.randint(1, 3)
        widths = [32 * rng.randint(1, 2) for _ in range(levels)]
        cfg = {
            "_class_name": "AutoencoderKLFlux2",
            "block_out_channels": widths,
            "decoder_block_out_channels": rng.choice([None, [32 * rng.randint(1, 2) for _ in range(levels)]]),
            "down_block_types": ["DownEncoderBlock2D"] * levels,
            "up_block_types": ["UpDecoderBlock2D"] * levels,
            "layers_per_block": rng.randint(1, 2),
            "latent_channels": rng.choice([4, 8]),
            "norm_num_groups": 32,
            "use_quant_conv": rng.random() < 0.5,
            "use_post_quant_conv": rng.random() < 0.5,
            "mid_block_add_attention": rng.random() < 0.5,
        }
        f = 2 ** (levels - 1)
        h, w = random_size(rng, 2 * f, 16, 96), random_size(rng, 2 * f, 16, 96)
        folder = write_config(tmp_path, f"vae{i}", cfg)
        _check(folder, "vae", Settings(height=h, width=w), {"height": h, "width": w}, call="decode")
        _check(folder, "vae", Settings(height=h, width=w, strength=1.0), {"height": h, "width": w}, call="encode")


def test_random_mistral3_configs(rng, tmp_path):
    for i in range(4):
        kv = rng.randint(1, 3)
        text = {
            "model_type": "mistral",
            "hidden_size": rng.choice([24, 40]),
            "intermediate_size": rng.choice([16, 56]),
            # at least one layer: the harness checks that a model holding attention modules counts attention
            "num_hidden_layers": rng.randint(1, 3),
            "num_attention_heads": kv * rng.randint(1, 3),
            "num_key_value_heads": kv,
            "vocab_size": rng.choice([50, 300]),
            "sliding_window": rng.choice([None, 4]),
        }
        if rng.random() < 0.5:
            text["head_dim"] = rng.choice([8, 16])
        elif text["hidden_size"] % text["num_attention_heads"]:
            text["num_attention_heads"] = text["num_key_value_heads"] = 4 if text["hidden_size"] == 24 else 5
        cfg = {
            "architectures": ["Mistral3ForConditionalGeneration"],
            "model_type": "mistral3",
            "text_config": text,
            "vision_config": {"model_type": "pixtral", "hidden_size": rng.choice([16, 32]),
                              "intermediate_size": rng.choice([8, 24]), "num_hidden_layers": rng.randint(0, 2),
                              "num_attention_heads": 2, "head_dim": 8, "patch_size": rng.choice([2, 14]),
                              "num_channels": rng.choice([1, 3])},
            "vision_feature_layer": rng.choice([-1, [-1, -2]]),
            "multimodal_projector_bias": rng.random() < 0.5,
            "spatial_merge_size": rng.choice([1, 2]),
            "tie_word_embeddings": rng.random() < 0.5,
        }
        seq = rng.randint(1, 60)
        check_plan(write_config(tmp_path, f"mistral3_{i}", cfg), "text_encoder", Settings(max_sequence_length=seq),
                   {"seq_len": seq})
