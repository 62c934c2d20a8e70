"""HunyuanVideoPipeline semantics (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video.py``),
the HunyuanVideo block formulas' closed forms, the VAE's chunk layouts, the symbolic law in F, and
the measured fixtures at their frame counts. No torch needed."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, ResolutionError
from flopcalc.formulas.hunyuan_video import dual_stream_block, single_block, token_refiner_block
from flopcalc.formulas.hunyuan_video_vae import tiles
from flopcalc.engine.pipelines import Settings
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/hunyuanvideo"
FIXTURES = sorted(p for case in ("hunyuanvideo", "hunyuanvideo-text")
                  for p in (REPO / "validation/fixtures" / case).glob("*.json"))
VAE_PARAMS = 246_478_803  # encoder + decoder + quant convs, measured (vae-decode fixtures)


def _config(name: str) -> dict:
    return json.loads((CARD / name / "config.json").read_text())


# --------------------------------------------------------------------------- pipeline semantics


def test_defaults():
    r = flopcalc.estimate("hunyuanvideo")
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.true_cfg_scale, s.max_sequence_length) == (
        720, 1280, 129, 50, 6.0, 1.0, 256)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "transformer.forward": 50,
                        "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 256 + 95}
    assert r.component("text_encoder_2").shape == {"seq_len": 77}
    assert r.component("transformer").shape == {"latent_height": 90, "latent_width": 160, "text_len": 256,
                                                "latent_frames": 33}
    assert r.component("vae").shape == {"latent_height": 90, "latent_width": 160, "latent_frames": 33,
                                        "framewise": True, "tiling": False}
    assert r.component("vae").params == VAE_PARAMS
    assert any("11 chunk(s) (10 × 5 + 1 × 3)" in n and "pipeline's default" in n for n in r.notes)


def test_guidance_is_an_embedding_true_cfg_needs_a_negative_prompt():
    for g in (1.0, 6.0, 12.0):
        assert flopcalc.estimate("hunyuanvideo", guidance_scale=g).passes == 1
    alone = flopcalc.estimate("hunyuanvideo", true_cfg_scale=4.0)
    assert alone.passes == 1 and any("no effect without a negative prompt" in n for n in alone.notes)
    r = flopcalc.estimate("hunyuanvideo", true_cfg_scale=4.0, negative_prompt=True, batch_size=2,
                          num_images_per_prompt=3)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "transformer.forward": 50 * 2 * 6,
                        "vae.decode": 6}
    ignored = flopcalc.estimate("hunyuanvideo", negative_prompt=True)
    assert ignored.passes == 1 and any("negative prompt is ignored" in n for n in ignored.notes)


def test_not_guidance_distilled_transformer_is_noted():
    components = {"transformer": {**_config("transformer"), "guidance_embeds": False}}
    r = estimate_configs({"_class_name": "HunyuanVideoPipeline"}, components, Settings())
    assert r.passes == 1 and any("guidance_scale is ignored" in n for n in r.notes)


def test_text_lengths():
    r = flopcalc.estimate("hunyuanvideo", max_sequence_length=100)
    assert r.component("text_encoder").shape == {"seq_len": 195}
    assert r.component("transformer").shape["text_len"] == 100
    assert r.component("text_encoder_2").shape == {"seq_len": 77}


@pytest.mark.parametrize("frames, latent", [(129, 33), (61, 16), (33, 9), (17, 5), (16, 4), (2, 1), (1, 1)])
def test_latent_frames(frames, latent):
    r = flopcalc.estimate("hunyuanvideo", num_frames=frames, height=256, width=256)
    assert r.component("transformer").shape["latent_frames"] == latent
    assert r.component("vae").shape["latent_frames"] == latent


def test_short_clips_decode_in_one_pass():
    short = flopcalc.estimate("hunyuanvideo", num_frames=13)  # 4 latent frames: one chunk
    untiled = flopcalc.estimate("hunyuanvideo", num_frames=13, vae_tiling=False)
    assert short.component("vae").per_run == untiled.component("vae").per_run
    assert any("one pass (4 latent frame(s) fit one chunk)" in n for n in short.notes)


def test_divisible_by_16():
    with pytest.raises(ResolutionError, match="multiple of 16: width 1000 → nearest valid: 992 or 1008"):
        flopcalc.estimate("hunyuanvideo", width=1000)
    flopcalc.estimate("hunyuanvideo", height=528, width=1008)


def test_vae_tiling_modes():
    default = flopcalc.estimate("hunyuanvideo").component("vae")
    untiled = flopcalc.estimate("hunyuanvideo", vae_tiling=False).component("vae")
    tiled = flopcalc.estimate("hunyuanvideo", vae_tiling=True).component("vae")
    assert (untiled.shape["framewise"], untiled.shape["tiling"]) == (False, False)
    assert (tiled.shape["framewise"], tiled.shape["tiling"]) == (True, True)
    assert default.call == untiled.call == tiled.call == "decode"
    assert default.params == untiled.params == tiled.params == VAE_PARAMS
    # the chunks overlap (53 latent frames decoded for 33) and so do the tiles: each costs more convolution
    assert untiled.per_run.conv < default.per_run.conv < tiled.per_run.conv
    # but one pass attends over all 33 frames at once: more attention than 11 chunks of at most 5
    assert untiled.per_run.attention > default.per_run.attention


def test_strength_encodes_the_input_video():
    r = flopcalc.estimate("hunyuanvideo", strength=0.5)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "transformer.forward": 25,
                        "vae.encode": 1, "vae.decode": 1}
    assert r.component("vae", "encode").shape["frames"] == 129
    assert any("no video-to-video mode" in n for n in r.notes)


def test_bare_transformer_runs_under_the_pipeline():
    r = flopcalc.estimate(str(CARD / "transformer" / "config.json"))
    assert r.pipeline.startswith("HunyuanVideoPipeline") and r.component("transformer").runs == 50


def test_temporal_patches_need_enough_latent_frames():
    components = {"transformer": {**_config("transformer"), "patch_size_t": 2}}
    with pytest.raises(FlopcalcError, match="fewer than patch_size_t 2"):
        estimate_configs({"_class_name": "HunyuanVideoPipeline"}, components, Settings(num_frames=1))


# --------------------------------------------------------------------------- closed forms


def test_block_closed_forms():
    heads, hd, n, t = 3, 16, 40, 7
    d, m = heads * hd, int(heads * hd * 2.5)
    dual = dual_stream_block(dim=d, heads=heads, head_dim=hd, video_tokens=n, text_tokens=t, mlp_ratio=2.5,
                             qk_norm="rms_norm")
    assert dual.total.macs() == 12 * d * d + 4 * (n + t) * d * d + 2 * heads * (n + t) ** 2 * hd + 2 * (n + t) * d * m
    replace_dual = dual_stream_block(dim=d, heads=heads, head_dim=hd, video_tokens=n, text_tokens=t, mlp_ratio=2.5,
                                     qk_norm="rms_norm", token_replace=True)
    assert replace_dual.total.macs() - dual.total.macs() == 6 * d * d
    assert replace_dual.total.params == dual.total.params
    L = n + t
    single = single_block(dim=d, heads=heads, head_dim=hd, tokens=L, mlp_ratio=2.5, qk_norm=None)
    assert single.total.macs() == 3 * d * d + 3 * L * d * d + L * d * m + 2 * heads * L * L * hd + L * (d + m) * d
    refiner = token_refiner_block(dim=d, heads=heads, head_dim=hd, tokens=t)
    assert refiner.total.macs() == 12 * t * d * d + 2 * heads * t * t * hd + 2 * d * d


def test_llama_layer_closed_form():
    r = flopcalc.estimate("hunyuanvideo")
    layer = r.component("text_encoder").tree.find("layers.0")
    n, d, h, kv, dh, f = 351, 4096, 32, 8, 128, 14336
    assert layer.per_item.macs() == n * d * dh * (2 * h + 2 * kv) + 2 * h * n * n * dh + 3 * n * d * f


@pytest.mark.parametrize("window, stride", [(5, 3), (17, 12), (32, 24)])
def test_chunk_layouts(window, stride):
    """The slices ``x[i : i + window]`` every ``stride``; the symbolic layout agrees wherever there
    are at least two slices."""
    sympy = pytest.importorskip("sympy")
    x = sympy.Symbol("x", positive=True, integer=True)
    law = tiles(x, window, stride)
    for size in range(1, 12 * window):
        numeric = tiles(size, window, stride)
        expected = [min(window, size - i) for i in range(0, size, stride)]
        assert sorted(s for s, n in numeric for _ in range(n)) == sorted(expected)
        if size > stride:
            assert {k: v for k, v in numeric} == _evaluate(law, x, size)


def _evaluate(layout, x, value: int) -> dict[int, int]:
    import sympy

    out: dict[int, int] = {}
    for size, count in layout:
        size, count = (int(sympy.sympify(v).subs(x, value)) for v in (size, count))
        if count:
            out[size] = out.get(size, 0) + count
    return out


def test_default_decode_chunks_33_latent_frames():
    assert tiles(33, 5, 3) == ((5, 10), (3, 1))
    assert tiles(129, 17, 12) == ((17, 10), (9, 1))


# --------------------------------------------------------------------------- the law in F


@lru_cache(maxsize=None)
def _law(**settings):
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    return symbolic_estimate("hunyuanvideo", **settings)


@pytest.mark.parametrize("h, w, f", [(720, 1280, 129), (512, 512, 33), (256, 448, 61), (320, 320, 17),
                                     (768, 1344, 45), (256, 256, 101)])
def test_law_in_frames_equals_the_estimate(h, w, f):
    law = _law()
    assert "F" in law.symbols
    point = {**law.representative(), "H": h, "W": w, "F": f}
    assert law.at(**point) == flopcalc.estimate("hunyuanvideo", height=h, width=w, num_frames=f).flops


@pytest.mark.parametrize("f", [5, 9, 13, 33, 129])
def test_untiled_and_short_clip_laws(f):
    law = _law(vae_tiling=False)
    assert law.at(**{**law.representative(), "H": 512, "W": 768, "F": f}) == flopcalc.estimate(
        "hunyuanvideo", height=512, width=768, num_frames=f, vae_tiling=False).flops
    short = _law(num_frames=9)  # 3 latent frames: the default decodes them in one pass
    import sympy as sp

    def decode_law(law):
        (decode,) = [c for c in law.components if c.call == "decode"]
        return decode.macs_per_run

    assert not decode_law(short).has(sp.floor)  # one pass: no chunk count in the law
    assert decode_law(_law()).has(sp.floor)  # 33 latent frames: chunked
    if f <= 13:
        assert short.at(**{**short.representative(), "F": f}) == flopcalc.estimate(
            "hunyuanvideo", num_frames=f).flops


def test_tiled_vae_has_no_law():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate("hunyuanvideo", vae_tiling=True)


# --------------------------------------------------------------------------- fixtures at their frame counts


@lru_cache(maxsize=None)
def _estimate(height, width, num_frames, convention):
    return flopcalc.estimate("hunyuanvideo", height=height, width=width, num_frames=num_frames, strength=1.0,
                             convention=convention)


def _matching(fx: dict, convention: str = "torch"):
    s = fx["settings"]
    r = _estimate(s.get("height"), s.get("width"), s.get("num_frames"), convention)
    (comp,) = [c for c in r.components if c.component == fx["component"] and c.call == fx["call"]]
    for key in ("seq_len", "text_len"):
        if key in s:
            assert comp.shape[key] == s[key]
    return comp


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_at_its_frame_count(path):
    """Like tests/test_fixtures.py, with the fixture's ``num_frames`` passed on."""
    fx = json.loads(path.read_text())
    comp = _matching(fx)
    assert 2 * comp.macs_per_run == fx["torch"]["flops"]
    for module, flops in fx["torch"]["by_module"].items():
        node = comp.tree if module == "Global" else comp.tree.find(module)
        assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, module
    assert comp.params == fx["params"]
    for module, params in fx["params_by_module"].items():
        node = comp.tree.find(module)
        if node is not None:
            assert node.total.params == params, module
    assert _matching(fx, "thop").macs_per_run == fx["thop"]["macs"]
