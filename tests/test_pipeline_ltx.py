"""LTXPipeline semantics (diffusers ``pipelines/ltx/pipeline_ltx.py``), the VAE's tiling switch, the
law in H, W and F, and the LTX block formulas' closed forms. No torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.ltx import tile_sides, tiles
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/ltx-video"


def _configs() -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, **overrides):
    index, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return estimate_configs(index, components, settings)


def _pieces(settings: Settings, call: str, **kw):
    """The plan's runs of the VAE ``call``: one per tile shape when tiled (the report folds them
    into one row whose block tree lists the pieces)."""
    from flopcalc.engine.pipelines import plan

    report = _plan(settings, **kw)  # validates like the report does
    index, components = _configs()
    return [r for r in plan(index, components, report.settings).runs if r.component == "vae" and r.call == call]


# --------------------------------------------------------------------------- defaults and guidance


def test_defaults_are_the_signature_s():
    r = _plan(Settings())
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (512, 704, 161, 50, 3.0, 128)
    assert r.pipeline == "LTXPipeline" and r.passes == 2
    # CFG on a doubled batch: 2 passes; the negative prompt ("") is encoded by T5 too.
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 128}
    # 161 frames → (161 − 1)//8 + 1 = 21 latent frames of 512/32 × 704/32.
    assert r.component("transformer").shape == {"latent_height": 16, "latent_width": 22, "latent_frames": 21,
                                                 "text_len": 128}
    assert r.component("vae").shape == {"latent_height": 16, "latent_width": 22, "latent_frames": 21}
    assert any("untiled: the pipeline's default" in n for n in r.notes)


def test_no_guidance_is_one_pass_and_no_negative_prompt():
    r = _plan(Settings(guidance_scale=1.0))
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}


def test_batch_videos_per_prompt_steps_and_text_length():
    r = _plan(Settings(batch_size=2, num_images_per_prompt=3, steps=10, max_sequence_length=64))
    # T5 runs per prompt (and per negative prompt), embeddings are repeated per video.
    assert runs_by_call(r) == {"text_encoder.forward": 2 * 2, "transformer.forward": 10 * 2 * 6, "vae.decode": 6}
    assert r.component("text_encoder").shape == {"seq_len": 64}
    assert r.component("transformer").shape["text_len"] == 64


def test_transformer_tokens_are_frames_times_latent_area():
    r = _plan(Settings(height=480, width=704, num_frames=121))
    tree = r.component("transformer").tree
    n = 16 * 15 * 22  # (121 − 1)/8 + 1 = 16 latent frames of 15 × 22
    assert tree.find("proj_in").total.linear == n * 128 * 2048


# --------------------------------------------------------------------------- sizes and frames


def test_sizes_must_divide_by_32():
    with pytest.raises(ResolutionError, match="height 500 → nearest valid: 480 or 512"):
        _plan(Settings(height=500))
    with pytest.raises(ResolutionError, match="width 700 → nearest valid: 672 or 704"):
        _plan(Settings(width=700))


def test_frames_must_be_8k_plus_1():
    with pytest.raises(ResolutionError, match="num_frames 160 → nearest valid: 153 or 161"):
        _plan(Settings(num_frames=160))
    with pytest.raises(ResolutionError, match="num_frames 2 → nearest valid: 1 or 9"):
        _plan(Settings(num_frames=2))
    r = _plan(Settings(num_frames=1))
    assert r.component("transformer").shape["latent_frames"] == 1
    assert _plan(Settings(num_frames=9)).component("vae").shape["latent_frames"] == 2


def test_temporal_patches_tighten_the_frame_rule():
    with pytest.raises(ResolutionError, match=r"16k \+ 9.*num_frames 17 → nearest valid: 9 or 25"):
        _plan(Settings(num_frames=17), transformer={"patch_size_t": 2})
    r = _plan(Settings(num_frames=25), transformer={"patch_size_t": 2})
    assert r.component("transformer").shape["latent_frames"] == 4


def test_vae_compression_comes_from_the_vae_config():
    # 0.9.5-style explicit ratios; no VAE: the pipeline's 32 / 8 fallbacks.
    r = _plan(Settings(height=512, width=512, num_frames=17),
              vae={"spatio_temporal_scaling": [True] * 4, "spatial_compression_ratio": 32,
                   "temporal_compression_ratio": 8})
    assert r.component("transformer").shape["latent_height"] == 16
    r = _plan(Settings(height=512, width=512, num_frames=9), vae={"spatio_temporal_scaling": [True, True, False, False]})
    assert r.component("transformer").shape == {"latent_height": 32, "latent_width": 32, "latent_frames": 3,
                                                "text_len": 128}
    _, components = _configs()
    bare = estimate_configs(None, {"transformer": components["transformer"]}, Settings())
    assert bare.pipeline == "LTXPipeline (denoiser only)"
    assert bare.component("transformer").shape == {"latent_height": 16, "latent_width": 22, "latent_frames": 21,
                                                   "text_len": 128}


# --------------------------------------------------------------------------- the VAE


def test_tile_grid_mirrors_tiled_decode():
    # tiled_decode: for i in range(0, h, 14): z[..., i:i+16] (latent tiles 512/32 at stride 448/32).
    assert tile_sides(22, 16, 14) == [16, 8]
    assert tile_sides(16, 16, 14) == [16, 2]
    assert tiles(16, 22, 16, 14) == {(16, 16): 1, (16, 8): 1, (2, 16): 1, (2, 8): 1}
    assert tiles(16, 16, 16, 14) == {(16, 16): 1}  # fits one tile: the VAE does not tile


def test_vae_tiling_decodes_overlapping_tiles_in_full():
    plain, tiled = _plan(Settings()), _plan(Settings(vae_tiling=True))
    assert _plan(Settings(vae_tiling=False)).component("vae").macs == plain.component("vae").macs
    runs = _pieces(Settings(vae_tiling=True), "decode")
    assert {(c.shape.latent_height, c.shape.latent_width): c.runs for c in runs} == \
        {(16, 16): 1, (16, 8): 1, (2, 16): 1, (2, 8): 1}
    assert all(c.shape.latent_frames == 21 for c in runs)
    assert len(tiled.component("vae", "decode").tree.children) == 4  # one report row, four pieces
    assert any("4 spatial tile(s)" in n for n in tiled.notes)
    # Linear in area: the tiles cover (16 + 2) × (16 + 8) latent pixels instead of 16 × 22.
    plain_macs, tiled_macs = plain.component("vae").macs, tiled.component("vae", "decode").macs
    assert tiled_macs > plain_macs
    small = _plan(Settings(height=256, width=384, num_frames=25, vae_tiling=True))
    assert [c.runs for c in _pieces(Settings(height=256, width=384, num_frames=25, vae_tiling=True), "decode")] == [1]
    assert any("fits one 16×16 tile" in n for n in small.notes)


def test_strength_encodes_the_input_video():
    r = _plan(Settings(strength=0.5, num_frames=25))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 25 * 2, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 512, "width": 704, "frames": 25}
    assert any("no strength" in n for n in r.notes)
    pieces = _pieces(Settings(strength=1.0, height=736, width=1024, num_frames=9, vae_tiling=True), "encode")
    enc = {(c.shape.height, c.shape.width): c.runs for c in pieces}
    assert enc == {(512, 512): 2, (512, 128): 1, (288, 512): 2, (288, 128): 1}


def test_vae_parameters_are_the_whole_model():
    r = _plan(Settings(strength=1.0))
    dec, enc = r.component("vae", "decode"), r.component("vae", "encode")
    assert dec.params == enc.params == dec.tree.total.params + enc.tree.total.params == 419_193_649
    assert r.component("transformer").params == 1_923_385_472


def test_vae_alone_decodes_an_image_as_one_frame():
    _, components = _configs()
    r = estimate_configs(None, {"vae": components["vae"]}, Settings(height=512, width=512))
    assert r.pipeline == "VAE only"
    assert r.component("vae").shape == {"latent_height": 16, "latent_width": 16}
    assert r.component("vae").macs > 0


def test_unsupported_configs_say_why():
    with pytest.raises(ConfigError, match="rms_norm_across_heads"):
        _plan(Settings(), transformer={"qk_norm": "rms_norm"})
    with pytest.raises(ConfigError, match="activation_fn"):
        _plan(Settings(), transformer={"activation_fn": "relu"})
    with pytest.raises(ConfigError, match="down_block_types"):
        _plan(Settings(strength=1.0), vae={"down_block_types": ["DownBlock3D"] * 4})


# --------------------------------------------------------------------------- the law in F


def test_symbolic_law_matches_the_estimate_in_height_width_and_frames():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    for settings in ({}, {"strength": 0.5}):
        law = symbolic_estimate("ltx-video", **settings)
        assert {"H", "W", "F", "S", "P", "B", "L"} <= set(law.symbols)
        for h, w, f in ((512, 704, 161), (256, 384, 25), (1024, 1024, 9), (480, 832, 121)):
            expected = flopcalc.estimate("ltx-video", height=h, width=w, num_frames=f, **settings).flops
            assert law.at(**{**law.representative(), "H": h, "W": w, "F": f}) == expected, (settings, h, w, f)


def test_vae_decode_law_is_linear_in_area_and_frames():
    sp = pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import F, H, W, symbolic_estimate

    law = symbolic_estimate("ltx-video")
    vae = next(c for c in law.components if c.call == "decode")
    poly = sp.Poly(vae.macs_per_run, H, W, F)
    assert set(poly.monoms()) == {(1, 1, 1), (1, 1, 0)}  # α·F·HW + β·HW: convolutions only


# --------------------------------------------------------------------------- closed forms


def test_block_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.ltx import ltx_video_block

    h, dh, n, t, dc = sp.symbols("h d_h N T d_c", positive=True, integer=True)
    d = h * dh
    for activation, g in (("gelu-approximate", 1), ("geglu", 2)):
        cost = ltx_video_block(dim=d, heads=h, head_dim=dh, tokens=n, text_tokens=t, cross_attention_dim=dc,
                               activation=activation).total
        stated = 6 * n * d**2 + 2 * t * dc * d + 2 * h * n * (n + t) * dh + (g + 1) * n * d * 4 * d
        assert sp.expand(cost.macs("torch") - stated) == 0
        assert sp.expand(cost.macs("thop") - (stated - 2 * h * n * (n + t) * dh)) == 0  # no attention, no rule for RMSNorm


def test_resnet_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.ltx import ltx_resnet_block

    ci, co, t, hh, ww = sp.symbols("C_i C_o t h w", positive=True, integer=True)
    p = t * hh * ww
    res = ltx_resnet_block(ci, co, (t, hh, ww)).total
    assert sp.expand(res.macs("torch") - p * (27 * co * ci + 27 * co**2 + co * ci)) == 0
    # every LTXVideoCausalConv3d wraps a plain nn.Conv3d (thop counts it), plus norm3's LayerNorm rule
    assert sp.expand(res.macs("thop") - res.macs("torch") - 4 * p * ci) == 0
