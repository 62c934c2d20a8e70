"""CogView4 pipeline semantics (``CogView4Pipeline``), the transformer's closed form and the GLM-4
encoder's config checks. No torch needed."""

from __future__ import annotations

import pytest
from card_support import Card

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

CARD = Card("cogview4-6b")


def test_defaults_two_forwards_and_the_text_upper_bound():
    p = plan(CARD.index(), CARD.components(), Settings())
    assert p.pipeline == "CogView4Pipeline"
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 5.0, 1024)
    runs = {r.component: r for r in p.runs}
    assert p.passes == 2
    assert runs["text_encoder"].runs == 2 and runs["text_encoder"].shape.seq_len == 1024
    t = runs["transformer"]
    assert t.runs == 100 and (t.shape.latent_height, t.shape.latent_width, t.shape.text_len) == (128, 128, 1024)
    assert runs["vae"].runs == 1 and runs["vae"].call == "decode"
    assert any("upper bound" in n for n in p.notes)


def test_the_card_estimate_equals_the_measured_components():
    by = {c.component: c for c in flopcalc.estimate("cogview4-6b").components}
    assert 2 * by["transformer"].macs_per_run == CARD.fixture("transformer-1024x1024.json")["torch"]["flops"]
    assert 2 * by["text_encoder"].macs_per_run == CARD.fixture("text_encoder-L1024.json")["torch"]["flops"]
    assert 2 * by["vae"].macs_per_run == CARD.fixture("vae-decode-1024x1024.json")["torch"]["flops"]


def test_no_guidance_and_a_shorter_prompt():
    p = plan(CARD.index(), CARD.components(), Settings(guidance_scale=1.0, max_sequence_length=128, batch_size=2))
    runs = {r.component: r for r in p.runs}
    assert p.passes == 1 and runs["text_encoder"].runs == 2 and runs["text_encoder"].shape.seq_len == 128
    assert runs["transformer"].runs == 50 * 2 and runs["transformer"].shape.text_len == 128
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings(height=512, width=512))
    assert r.pipeline == "CogView4Pipeline (denoiser only)"
    assert 2 * r.components[0].macs_per_run == CARD.fixture("transformer-512x512.json")["torch"]["flops"]


def test_sizes_divide_by_16():
    with pytest.raises(ResolutionError, match="multiple of 16.*1000 → nearest valid: 992 or 1008"):
        plan(CARD.index(), CARD.components(), Settings(height=1000, width=1024))


def test_config_checks():
    with pytest.raises(ConfigError, match="multiple of 4"):
        estimate_configs(None, {"transformer": {**CARD.config("transformer"), "attention_head_dim": 126}}, Settings())
    with pytest.raises(ConfigError, match="partial_rotary_factor"):
        estimate_configs(None, {"text_encoder": {**CARD.config("text_encoder"), "partial_rotary_factor": 0}},
                         Settings(max_sequence_length=16))


def test_transformer_closed_form():
    """Per step: 28 blocks on S = L + N tokens (d = 4096, h = 32, d_h = 128, d_t = 512) and the edges."""
    n, L, d, h, dh, dt = (1024 // 16) ** 2, 1024, 4096, 32, 128, 512
    s = n + L
    block = 12 * d * dt + 4 * s * d * d + 2 * h * s * s * dh + 8 * s * d * d
    edges = n * 64 * d + L * 4096 * d + (d * dt + dt * dt) + (6 * 256 * dt + dt * dt) + dt * 2 * d + n * d * 64
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings())
    assert r.components[0].macs_per_run == 28 * block + edges


def test_kaplan_row_of_glm4():
    """Kaplan's N leaves out the token embedding: the measured parameters of ``layers`` and ``norm``;
    n_layer and d_attn = heads × head_dim from the config."""
    from flopcalc.flops.kaplan import kaplan_rows

    (row,) = kaplan_rows("cogview4-6b")
    cfg, fixture = CARD.config("text_encoder"), CARD.fixture("text_encoder-L1024.json")
    assert (row.class_name, row.n_ctx, row.n_layer) == ("GlmModel", 1024, cfg["num_hidden_layers"])
    assert row.d_attn == cfg["num_attention_heads"] * cfg["head_dim"]
    by_module = fixture["params_by_module"]
    assert row.non_embedding_params == by_module["layers"] + by_module["norm"]
    assert row.exact_flops == fixture["torch"]["flops"]


def test_options_it_does_not_apply_are_refused():
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to CogView4Pipeline"):
        plan(CARD.index(), CARD.components(), Settings(true_cfg_scale=2.0))
    with pytest.raises(OptionError, match="--vae-tiling / --no-vae-tiling does not apply to CogView4Pipeline"):
        plan(CARD.index(), CARD.components(), Settings(vae_tiling=True))
