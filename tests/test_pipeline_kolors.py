"""Kolors pipeline semantics (``KolorsPipeline``; the card's index names Kolors' own
``StableDiffusionXLPipeline``) and the ChatGLM encoder's config checks. No torch needed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from card_support import Card

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError, UnknownArchitectureError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

CARD = Card("kolors")


def test_the_card_index_names_sdxl_and_is_planned_as_kolors():
    assert CARD.index()["_class_name"] == "StableDiffusionXLPipeline"  # verbatim from the Hub repo
    p = plan(CARD.index(), CARD.components(), Settings())
    assert p.pipeline == "KolorsPipeline"
    assert any("names StableDiffusionXLPipeline" in n for n in p.notes)
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 5.0, 256)
    runs = {r.component: r for r in p.runs}
    assert p.passes == 2
    # the negative prompt is encoded although the index sets force_zeros_for_empty_prompt (see the plan's doc)
    assert runs["text_encoder"].runs == 2 and runs["text_encoder"].shape.seq_len == 256
    assert any("force_zeros_for_empty_prompt" in n for n in p.notes)
    u = runs["unet"]
    assert u.runs == 100 and (u.shape.latent_height, u.shape.latent_width, u.shape.text_len) == (128, 128, 256)
    assert runs["vae"].runs == 1 and runs["vae"].call == "decode"


def test_the_card_estimate_equals_the_measured_components():
    r = flopcalc.estimate("kolors")
    by = {c.component: c for c in r.components}
    assert 2 * by["text_encoder"].macs_per_run == CARD.fixture("text_encoder-L256.json")["torch"]["flops"]
    assert 2 * by["unet"].macs_per_run == CARD.fixture("unet-1024x1024.json")["torch"]["flops"]
    assert 2 * by["vae"].macs_per_run == CARD.fixture("vae-decode-1024x1024.json")["torch"]["flops"]
    assert by["text_encoder"].params == CARD.fixture("text_encoder-L256.json")["params"]


def test_kolors_index_name_plans_alike():
    a = estimate_configs({"_class_name": "KolorsPipeline"}, CARD.components(), Settings(height=768, width=1344))
    b = estimate_configs(CARD.index(), CARD.components(), Settings(height=768, width=1344))
    assert a.pipeline == b.pipeline == "KolorsPipeline" and a.macs == b.macs


def test_no_guidance_one_pass_prompt_encoded_once():
    settings = Settings(guidance_scale=1.0, steps=20, batch_size=2, num_images_per_prompt=3)
    p = plan(CARD.index(), CARD.components(), settings)
    runs = {r.component: r for r in p.runs}
    assert p.passes == 1 and runs["text_encoder"].runs == 2
    assert runs["unet"].runs == 20 * 2 * 3 and runs["vae"].runs == 6
    assert not any("force_zeros" in n for n in p.notes)


def test_text_length_and_size_limits():
    with pytest.raises(FlopcalcError, match="greater than 256"):
        plan(CARD.index(), CARD.components(), Settings(max_sequence_length=257))
    with pytest.raises(ResolutionError, match="multiple of 8"):
        plan(CARD.index(), CARD.components(), Settings(height=1020, width=1024))
    p = plan(CARD.index(), CARD.components(), Settings(max_sequence_length=64))
    assert {r.component: r.shape for r in p.runs}["unet"].text_len == 64


def test_a_kolors_unet_alone_runs_under_kolors_and_sdxl_stays_sdxl():
    r = estimate_configs(None, {"unet": CARD.config("unet")}, Settings())
    assert r.pipeline == "KolorsPipeline (denoiser only)"
    assert 2 * r.components[0].macs_per_run == CARD.fixture("unet-1024x1024.json")["torch"]["flops"]
    sdxl = estimate_configs(None, {"unet": Card("sdxl-base").config("unet")}, Settings())
    assert sdxl.pipeline == "StableDiffusionXLPipeline (denoiser only)"


def test_chatglm_config_checks():
    cfg = CARD.config("text_encoder")
    with pytest.raises(FlopcalcError, match="seq_length 64 positions and cannot encode 256"):
        estimate_configs(None, {"text_encoder": {**cfg, "seq_length": 64}}, Settings(max_sequence_length=256))
    with pytest.raises(UnknownArchitectureError, match="pre_seq_len"):
        estimate_configs(None, {"text_encoder": {**cfg, "pre_seq_len": 16}}, Settings(max_sequence_length=8))
    with pytest.raises(ConfigError, match="multi_query_group_num 3"):
        estimate_configs(None, {"text_encoder": {**cfg, "multi_query_group_num": 3}}, Settings(max_sequence_length=8))


def test_chatglm_closed_form():
    """MACs = L·(n d d_h (2h + 2g) + 2 h n² d_h + 3 n d d_f), the LM head not run."""
    cfg = CARD.config("text_encoder")
    n, d, h, g, dh, df, layers = 256, 4096, 32, 2, 128, 13696, 28
    r = estimate_configs(None, {"text_encoder": cfg}, Settings(max_sequence_length=n))
    assert r.components[0].macs_per_run == layers * (n * d * dh * (2 * h + 2 * g) + 2 * h * n * n * dh + 3 * n * d * df)


def test_kaplan_row_of_chatglm():
    """Kaplan's N leaves out the token embedding and the LM head (built, never run): the measured
    parameters of ``encoder`` alone; n_layer and d_attn = heads × kv_channels from the config."""
    from flopcalc.flops.kaplan import kaplan_rows

    (row,) = kaplan_rows("kolors")
    cfg, fixture = CARD.config("text_encoder"), CARD.fixture("text_encoder-L256.json")
    assert (row.class_name, row.n_ctx, row.n_layer) == ("ChatGLMModel", 256, cfg["num_layers"])
    assert row.d_attn == cfg["num_attention_heads"] * cfg["kv_channels"]
    assert row.non_embedding_params == fixture["params_by_module"]["encoder"]
    assert row.exact_flops == fixture["torch"]["flops"]


def test_options_are_those_kolors_applies_whatever_the_index_names():
    with pytest.raises(OptionError, match="--num-frames does not apply to KolorsPipeline"):
        plan(CARD.index(), CARD.components(), Settings(num_frames=9))
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to KolorsPipeline"):
        plan(CARD.index(), CARD.components(), Settings(true_cfg_scale=2.0))
    sdxl = Card("sdxl-base")
    with pytest.raises(OptionError, match="--max-sequence-length does not apply to StableDiffusionXLPipeline"):
        plan(sdxl.index(), sdxl.components(), Settings(max_sequence_length=64))


def test_a_fresh_process_finds_the_plan_that_serves_the_index(tmp_path):
    """Lazy discovery: the index names StableDiffusionXLPipeline, and the module of the plan serving
    that name's ChatGLM folders is imported too (cache built, then reused)."""
    code = "import flopcalc; print(flopcalc.estimate('kolors', max_sequence_length=64).pipeline)"
    env = {**os.environ, "FLOPCALC_CACHE_DIR": str(tmp_path)}
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "KolorsPipeline"
