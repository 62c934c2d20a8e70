"""WanPipeline semantics (diffusers ``pipelines/wan/pipeline_wan.py``), the Wan block formulas' closed
forms, the symbolic law in H, W, F, and the Wan fixtures at their own frame counts. No torch needed."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.sources import resolve
from card_support import runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = REPO / "model_cards/wan2.1-t2v-1.3b"
FIXTURES = sorted((REPO / "validation/fixtures").glob("wan2.1-t2v-1.3b*/*.json"))


def _configs() -> tuple[dict, dict]:
    """The card's ``model_index.json`` and component configs, as flopcalc reads them."""
    source = resolve(CARD.name)
    return dict(source.model_index), {name: dict(cfg) for name, cfg in source.components.items()}


def _plan(settings: Settings, *, index: dict | None = None, drop: tuple[str, ...] = (), **overrides):
    base_index, components = _configs()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items() if k not in drop}
    return estimate_configs({**base_index, **(index or {})}, components, settings)


def _pieces(settings: Settings, call: str, **kw):
    """The plan's runs of the VAE ``call``: one per tile shape when tiled (the report folds them
    into one row whose block tree lists the pieces)."""
    from flopcalc.engine.pipelines import plan

    report = _plan(settings, **kw)  # validates like the report does
    index, components = _configs()
    index = {**index, **(kw.get("index") or {})}
    return [r for r in plan(index, components, report.settings).runs if r.component == "vae" and r.call == call]


# --------------------------------------------------------------------------- defaults and guidance


def test_defaults_are_the_pipelines():
    r = flopcalc.estimate("wan2.1")
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == (
        480, 832, 81, 50, 5.0, 512)
    assert r.pipeline == "WanPipeline" and r.passes == 2
    # CFG: two separate transformer forwards per step; the negative prompt ("") is encoded too
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 512}
    assert r.component("transformer").shape == {"latent_height": 60, "latent_width": 104, "text_len": 512,
                                                 "latent_frames": 21}
    assert r.component("vae").shape == {"latent_height": 60, "latent_width": 104, "latent_frames": 21}
    assert any("untiled (the pipeline's default)" in n and "21 latent frames" in n for n in r.notes)


def test_no_guidance_one_pass_and_no_negative_prompt():
    r = _plan(Settings(guidance_scale=1.0, negative_prompt=True))
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.decode": 1}
    assert any("negative prompt is ignored" in n for n in r.notes)


def test_batch_and_videos_per_prompt():
    r = _plan(Settings(batch_size=3, num_images_per_prompt=2, steps=10))
    # prompts encoded once each (+ negative); embeddings repeated per video
    assert runs_by_call(r) == {"text_encoder.forward": 3 * 2, "transformer.forward": 10 * 2 * 3 * 2, "vae.decode": 6}


def test_text_length_follows_max_sequence_length():
    r = _plan(Settings(max_sequence_length=226))
    assert r.component("text_encoder").shape == {"seq_len": 226}
    assert r.component("transformer").shape["text_len"] == 226


# --------------------------------------------------------------------------- frames and sizes


@pytest.mark.parametrize("asked, used", [(81, 81), (80, 81), (79, 77), (82, 81), (17, 17), (1, 1), (2, 1), (4, 5),
                                         (5, 5)])
def test_num_frames_is_rounded_as_diffusers_does(asked, used):
    r = _plan(Settings(num_frames=asked))
    assert r.settings.num_frames == used
    assert r.component("transformer").shape["latent_frames"] == (used - 1) // 4 + 1
    assert any("is rounded to" in n for n in r.notes) == (asked != used)


def test_height_and_width_must_divide_by_16():
    with pytest.raises(ResolutionError, match=r"width 830 → nearest valid: 816 or 832"):
        _plan(Settings(height=480, width=830))
    with pytest.raises(ResolutionError, match=r"height 488 → nearest valid: 480 or 496"):
        flopcalc.estimate("wan2.1", height=488)


def test_patch_larger_than_the_check_floors_like_the_pipeline():
    r = _plan(Settings(height=480, width=848), transformer={"patch_size": [1, 4, 4]})
    assert (r.settings.height, r.settings.width) == (480, 832)
    assert any("floored to 480×832" in n for n in r.notes)


def test_a_bare_transformer_runs_under_wan_pipeline():
    cfg = CARD / "transformer" / "config.json"
    r = flopcalc.estimate(str(cfg))
    assert r.pipeline.startswith("WanPipeline")
    full = flopcalc.estimate("wan2.1")
    assert r.component("transformer").macs == full.component("transformer").macs


# --------------------------------------------------------------------------- VAE tiling


def test_tiling_counts_every_overlapping_tile():
    untiled = _plan(Settings(vae_tiling=False))
    tiled = _plan(Settings(vae_tiling=True))
    decodes = _pieces(Settings(vae_tiling=True), "decode")
    # latent 60×104, 32-latent tiles every 24: rows 32, 32, 12; columns 32, 32, 32, 32, 8
    shapes = {(c.shape.latent_height, c.shape.latent_width): c.runs for c in decodes}
    assert shapes == {(32, 32): 8, (32, 8): 2, (12, 32): 4, (12, 8): 1}
    assert all(c.shape.latent_frames == 21 for c in decodes)
    assert tiled.component("vae", "decode").macs > untiled.component("vae").macs  # overlaps cost extra
    assert any("tiled decode" in n and "15 tiles" in n for n in tiled.notes)
    assert any("untiled (as asked)" in n for n in untiled.notes)


def test_tiling_asked_on_a_latent_that_fits_one_tile():
    r = _plan(Settings(height=256, width=256, vae_tiling=True))
    assert [c.shape for c in r.components if c.call == "decode"] == [
        {"latent_height": 32, "latent_width": 32, "latent_frames": 21}]  # one untiled call
    assert any("fits one tile" in n for n in r.notes)


def test_tiled_encode_for_video_to_video():
    pieces = _pieces(Settings(height=480, width=832, strength=0.5, vae_tiling=True), "encode")
    encodes = {(c.shape.height, c.shape.width): c.runs for c in pieces}
    # 256-pixel tiles every 192: rows 256, 256, 96; columns 256, 256, 256, 256, 64
    assert encodes == {(256, 256): 8, (256, 64): 2, (96, 256): 4, (96, 64): 1}


# --------------------------------------------------------------------------- video-to-video


def test_strength_plans_the_video_to_video_run():
    r = _plan(Settings(strength=0.8))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 40 * 2, "vae.encode": 1, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 832, "frames": 81}
    assert any("WanVideoToVideoPipeline" in n for n in r.notes)
    # get_timesteps: int(steps · strength), not diffusers' image-to-image rounding
    assert runs_by_call(_plan(Settings(strength=0.33)))["transformer.forward"] == 16 * 2


def test_video_to_video_keeps_the_input_frame_count():
    r = _plan(Settings(num_frames=80, strength=0.8))
    assert r.settings.num_frames == 80 and not any("rounded" in n for n in r.notes)
    assert r.component("vae", "encode").shape["frames"] == 80
    assert r.component("transformer").shape["latent_frames"] == 20  # (80 − 1) // 4 + 1


def test_video_to_video_pipeline_defaults():
    r = _plan(Settings(num_images_per_prompt=3), index={"_class_name": "WanVideoToVideoPipeline"})
    assert r.pipeline == "WanVideoToVideoPipeline" and r.settings.strength == 0.8
    assert runs_by_call(r)["transformer.forward"] == 40 * 2
    assert any("forces num_videos_per_prompt" in n for n in r.notes)


# --------------------------------------------------------------------------- what is refused


def test_a_boundary_without_a_second_expert_is_refused():
    """Wan 2.2's two experts and expanded timesteps: tests/test_pipeline_wan22.py."""
    with pytest.raises(FlopcalcError, match="no transformer_2"):
        _plan(Settings(), index={"boundary_ratio": 0.875})


def test_image_to_video_transformer_is_refused():
    with pytest.raises(ConfigError, match="image_dim: an image-to-video Wan transformer"):
        _plan(Settings(), transformer={"image_dim": 1280})


def test_encoding_needs_long_enough_chunks():
    with pytest.raises(ConfigError, match="too short"):
        _plan(Settings(strength=1.0), vae={"dim_mult": [1, 1, 1, 1, 1], "temperal_downsample": [True] * 4})


# --------------------------------------------------------------------------- closed forms and laws


def test_block_closed_form():
    sp = pytest.importorskip("sympy")
    from flopcalc.formulas.wan import wan_transformer_block

    n, t, h, dh, f = sp.symbols("N T h d_h f", positive=True, integer=True)
    d = h * dh
    block = wan_transformer_block(dim=d, heads=h, head_dim=dh, ffn_dim=f, tokens=n, text_tokens=t,
                                  cross_attn_norm=True)
    stated = 6 * n * d**2 + 2 * t * d**2 + 2 * h * n**2 * dh + 2 * h * n * t * dh + 2 * n * d * f
    assert sp.expand(block.total.macs("torch") - stated) == 0


def test_decode_is_linear_in_latent_frames():
    """One decoder call per latent frame: cost(T) = first call + (T − 1) × a later call (temporal
    upsamplers run from the second call on), exact for a symbolic T as well."""
    sp = pytest.importorskip("sympy")
    from flopcalc.engine.registry import RunShape, assemble

    _, components = _configs()
    vae = components["vae"]
    t = sp.Symbol("T", positive=True, integer=True)
    law = assemble(vae, RunShape(latent_height=8, latent_width=12, latent_frames=t), component="vae", call="decode")
    for frames in (1, 2, 5, 21):
        tree = assemble(vae, RunShape(latent_height=8, latent_width=12, latent_frames=frames), component="vae",
                        call="decode")
        assert law.total.macs("torch").subs(t, frames) == tree.total.macs("torch")
        assert law.total.macs("thop").subs(t, frames) == tree.total.macs("thop")


@pytest.mark.parametrize("convention", ["torch", "thop"])
def test_law_in_height_width_and_frames_equals_the_estimate(convention):
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate("wan2.1", convention=convention)
    assert {"H", "W", "F", "S", "P", "B", "L"} <= set(law.symbols)
    for h, w, f, steps, batch, tokens in ((480, 832, 81, 50, 1, 512), (240, 416, 17, 7, 2, 100),
                                          (1024, 1024, 5, 3, 1, 512), (720, 1280, 129, 1, 3, 33), (16, 16, 1, 2, 1, 1)):
        exact = flopcalc.estimate("wan2.1", height=h, width=w, num_frames=f, steps=steps, batch_size=batch,
                                  max_sequence_length=tokens, convention=convention)
        assert law.at(**{**law.representative(), "H": h, "W": w, "F": f, "S": steps, "B": batch,
                         "L": tokens}) == exact.flops


def test_tiled_law_is_refused():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="tiled VAE has no closed-form law"):
        symbolic_estimate("wan2.1", vae_tiling=True)


# --------------------------------------------------------------------------- the fixtures, at their frames


@lru_cache(maxsize=None)
def _report(model: str, height: int | None, width: int | None, frames: int | None, convention: str):
    return flopcalc.estimate(model, height=height, width=width, num_frames=frames, strength=1.0,
                             convention=convention)


def _component(fixture: dict, convention: str = "torch"):
    s = fixture["settings"]
    config_dir = REPO / fixture["config_dir"]
    report = _report(str(config_dir.parent), s.get("height"), s.get("width"), s.get("num_frames"), convention)
    (comp,) = [c for c in report.components if c.component == fixture["component"] and c.call == fixture["call"]]
    for key in ("seq_len", "text_len"):
        if key in s:
            assert comp.shape[key] == s[key]
    return comp


def test_fixtures_cover_two_frame_counts_and_the_text_encoder():
    frames = {json.loads(p.read_text())["settings"].get("num_frames") for p in FIXTURES}
    assert {81, 17} <= frames
    assert any(p.parent.name == "wan2.1-t2v-1.3b-text" for p in FIXTURES)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_at_its_own_frame_count(path):
    """tests/test_fixtures.py estimates every fixture at the pipeline's default frame count; this checks
    the Wan fixtures at the frame count each was measured at: torch total and every module path exact,
    parameters exact, thop exact."""
    fixture = json.loads(path.read_text())
    comp = _component(fixture)
    assert 2 * comp.macs_per_run == fixture["torch"]["flops"]
    for module_path, flops in fixture["torch"]["by_module"].items():
        node = comp.tree if module_path == "Global" else comp.tree.find(module_path)
        assert (0 if node is None else 2 * node.per_item.macs("torch")) == flops, module_path
    assert comp.params == fixture["params"]
    if sum(fixture["params_by_module"].values()) <= fixture["params"]:  # no tied weights
        for module_path, params in fixture["params_by_module"].items():
            node = comp.tree.find(module_path)
            if node is not None:
                assert node.total.params == params, module_path
    assert _component(fixture, "thop").macs_per_run == fixture["thop"]["macs"]
