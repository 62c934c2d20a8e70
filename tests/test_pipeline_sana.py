"""SanaPipeline semantics (diffusers ``pipelines/sana/pipeline_sana.py``) and the SANA block formulas'
closed forms. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.sana import sana_binned_size
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent


def _config(card: str, component: str) -> dict:
    return json.loads((REPO / "model_cards" / card / component / "config.json").read_text())


@pytest.mark.parametrize("card", ["sana-600m-512", "sana-1.6b-512"])
def test_defaults_1024_binned_to_512_20_steps_cfg(card):
    r = flopcalc.estimate(card)
    s = r.settings
    # __call__ defaults 1024×1024; the 512px model (sample_size 16) bins to ASPECT_RATIO_512_BIN["1.0"].
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (512, 512, 20, 4.5, 300)
    assert any("1024×1024 is generated at 512×512" in n for n in r.notes)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 40, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 300}
    assert r.component("transformer").shape == {"latent_height": 16, "latent_width": 16, "text_len": 300}
    assert r.component("vae").shape == {"latent_height": 16, "latent_width": 16}
    assert any("complex human instruction" in n for n in r.notes)


def test_binning_off_keeps_the_pipeline_default_1024():
    r = flopcalc.estimate("sana-600m-512", resolution_binning=False)
    assert (r.settings.height, r.settings.width) == (1024, 1024)
    assert r.component("transformer").shape["latent_height"] == 32


def test_binning_snaps_aspect_ratio_like_the_pipeline():
    r = flopcalc.estimate("sana-600m-512", height=768, width=1344)
    # 768/1344 = 0.571 → "0.57": [384, 672] in ASPECT_RATIO_512_BIN
    assert (r.settings.height, r.settings.width) == (384, 672)
    assert r.component("transformer").shape == {"latent_height": 12, "latent_width": 21, "text_len": 300}
    assert sana_binned_size(768, 1344, 32) == (768, 1344)  # "0.57" of the 1024px table
    assert sana_binned_size(1024, 1024, 128) == (4096, 4096)


def test_binning_table_follows_transformer_sample_size():
    cfg = dict(_config("sana-600m-512", "transformer"), sample_size=32)
    r = estimate_configs(None, {"transformer": cfg}, Settings())
    assert (r.settings.height, r.settings.width) == (1024, 1024)
    with pytest.raises(FlopcalcError, match="sample_size 24"):
        estimate_configs(None, {"transformer": dict(cfg, sample_size=24)}, Settings())
    # without binning any sample size runs
    r = estimate_configs(None, {"transformer": dict(cfg, sample_size=24)}, Settings(resolution_binning=False))
    assert r.settings.height == 1024


def test_no_cfg_runs_the_denoiser_once_and_encodes_no_negative():
    r = flopcalc.estimate("sana-1.6b-512", guidance_scale=1.0, steps=4)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 4, "vae.decode": 1}


def test_batch_images_and_text_length():
    r = flopcalc.estimate("sana-600m-512", batch_size=2, num_images_per_prompt=3, max_sequence_length=120)
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 20 * 2 * 6, "vae.decode": 6}
    assert r.component("text_encoder").shape == {"seq_len": 120}
    assert r.component("transformer").shape["text_len"] == 120


def test_sizes_must_be_multiples_of_32():
    with pytest.raises(ResolutionError, match="multiple of 32.*height 500 → nearest valid: 480 or 512"):
        flopcalc.estimate("sana-600m-512", height=500, width=512, resolution_binning=False)


def test_vae_factor_is_from_the_encoder_widths():
    tcfg, vcfg = _config("sana-600m-512", "transformer"), _config("sana-600m-512", "vae")
    index = {"_class_name": "SanaPipeline"}
    r = estimate_configs(index, {"transformer": tcfg, "vae": vcfg}, Settings(height=512, width=512))
    assert r.component("vae").shape == {"latent_height": 16, "latent_width": 16}
    small = {k: v[:4] if k.startswith("encoder_") and isinstance(v, list) else v for k, v in vcfg.items()}  # f 8
    r = estimate_configs(index, {"transformer": tcfg, "vae": small}, Settings(height=512, width=512,
                                                                            resolution_binning=False))
    assert r.component("transformer").shape["latent_height"] == 64


def test_bare_transformer_runs_under_sana_pipeline_with_factor_32():
    r = estimate_configs(None, {"transformer": _config("sana-1.6b-512", "transformer")},
                         Settings(height=1024, width=768, resolution_binning=False))
    assert r.pipeline == "SanaPipeline (denoiser only)"
    assert r.component("transformer").shape == {"latent_height": 32, "latent_width": 24, "text_len": 300}


def test_image_to_image_plans_the_dc_ae_encoder():
    r = flopcalc.estimate("sana-600m-512", height=512, width=512, strength=0.5)
    assert runs_by_call(r)["vae.encode"] == 1 and runs_by_call(r)["transformer.forward"] == 10 * 2
    assert r.component("vae", "encode").shape == {"height": 512, "width": 512}


def test_params_are_the_whole_autoencoder():
    r = flopcalc.estimate("sana-600m-512")
    assert r.component("vae").params == 312_250_275  # encoder 153,027,104 + decoder 159,223,171 (measured)
    assert r.component("transformer").params == 591_747_872


def test_unsupported_configs_say_why():
    cfg = _config("sana-600m-512", "transformer")
    with pytest.raises(ConfigError, match="qk_norm 'rms_norm'"):
        estimate_configs(None, {"transformer": dict(cfg, qk_norm="rms_norm")}, Settings())
    with pytest.raises(ConfigError, match="cross_attention_dim null"):
        estimate_configs(None, {"transformer": dict(cfg, cross_attention_dim=None)}, Settings())
    vae = _config("sana-600m-512", "vae")
    index = {"_class_name": "SanaPipeline"}
    with pytest.raises(ConfigError, match="decoder_norm_types"):
        estimate_configs(index, {"vae": dict(vae, decoder_norm_types="layer_norm")}, Settings())
    with pytest.raises(ConfigError, match="decoder_block_types"):
        estimate_configs(index, {"vae": dict(vae, decoder_block_types="Foo")}, Settings())


# --------------------------------------------------------------------------- closed forms

sympy = pytest.importorskip("sympy")


def _symbols():
    return sympy.symbols("H W T h d h_c d_c C", positive=True, integer=True)


def test_block_closed_form():
    from flopcalc.formulas.sana import sana_transformer_block

    H, W, T, h, d, hc, dc, _ = _symbols()
    D = h * d
    F = 5 * D  # expand ratio 5 (an integral F keeps int() out of the symbols)
    N = H * W
    block = sana_transformer_block(dim=D, heads=h, head_dim=d, cross_heads=hc, cross_head_dim=dc,
                                   cross_attention_dim=D, height=H, width=W, text_tokens=T, attention_bias=False,
                                   norm_affine=False, mlp_ratio=5)
    Dc = hc * dc
    stated = (4 * N * D**2 + 2 * h * N * d * (d + 1) + 2 * N * D * Dc + 2 * T * D * Dc + 2 * hc * N * T * dc
              + N * (3 * F * D + 18 * F))
    assert sympy.expand(block.total.macs("torch") - stated) == 0


def test_linear_attention_and_dc_blocks_closed_forms():
    from flopcalc.formulas.autoencoder_dc import dc_down_block, dc_up_block, efficient_vit_block, res_block
    from flopcalc.formulas.sana import linear_attention

    H, W, T, h, d, _, _, C = _symbols()
    P = H * W
    assert sympy.expand(linear_attention(P, h, d).attention - 2 * h * P * d * (d + 1)) == 0
    assert sympy.expand(res_block(C, 2 * C, H, W, "rms_norm").total.macs() - 9 * P * C * (C + 2 * C)) == 0
    for interpolate in (True, False):
        assert sympy.expand(dc_up_block(2 * C, C, H, W, interpolate=interpolate).total.macs() - 36 * P * 2 * C * C) == 0
    for unshuffle in (True, False):
        down = dc_down_block(C, 2 * C, 2 * H, 2 * W, pixel_unshuffle=unshuffle).total.macs()
        assert sympy.expand(down - sympy.Rational(9, 4) * 4 * P * C * 2 * C) == 0
    # EfficientViT block, C = h·d channels (so h heads), one 5×5 scale:
    c, inner, s = h * d, h * d, 1
    stated = (3 * P * c * inner + (3 * P * inner * 25 + 3 * P * inner * d) + 2 * (1 + s) * h * P * d * (d + 1)
              + (1 + s) * P * inner * c + P * (8 * c * c + 72 * c + 4 * c * c))
    got = efficient_vit_block(c, d, [5], H, W, "rms_norm").total.macs()
    assert sympy.expand(got - stated) == 0
