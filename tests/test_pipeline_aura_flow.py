"""AuraFlow pipeline semantics (``AuraFlowPipeline``) and the transformer's closed form and config
checks. No torch needed."""

from __future__ import annotations

import pytest
from card_support import Card

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.formulas.aura_flow import feed_forward_width
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.dispatch import plan

CARD = Card("aura-flow")


def test_defaults_doubled_batch_and_negative_prompt():
    p = plan(CARD.index(), CARD.components(), Settings())
    assert p.pipeline == "AuraFlowPipeline"
    s = p.settings
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (1024, 1024, 50, 3.5, 256)
    runs = {r.component: r for r in p.runs}
    assert p.passes == 2
    assert runs["text_encoder"].runs == 2 and runs["text_encoder"].shape.seq_len == 256
    t = runs["transformer"]
    assert t.runs == 100 and (t.shape.latent_height, t.shape.latent_width, t.shape.text_len) == (128, 128, 256)
    assert runs["vae"].runs == 1 and runs["vae"].call == "decode"


def test_the_card_estimate_equals_the_measured_components():
    by = {c.component: c for c in flopcalc.estimate("aura-flow").components}
    assert 2 * by["transformer"].macs_per_run == CARD.fixture("transformer-1024x1024.json")["torch"]["flops"]
    assert 2 * by["text_encoder"].macs_per_run == CARD.fixture("text_encoder-L256.json")["torch"]["flops"]
    assert 2 * by["vae"].macs_per_run == CARD.fixture("vae-decode-1024x1024.json")["torch"]["flops"]


def test_no_guidance_one_pass_and_the_transformer_alone():
    p = plan(CARD.index(), CARD.components(), Settings(guidance_scale=1.0, steps=8, num_images_per_prompt=2))
    runs = {r.component: r for r in p.runs}
    assert p.passes == 1 and runs["text_encoder"].runs == 1 and runs["transformer"].runs == 16
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings(height=512, width=512))
    assert r.pipeline == "AuraFlowPipeline (denoiser only)"
    assert 2 * r.components[0].macs_per_run == CARD.fixture("transformer-512x512.json")["torch"]["flops"]


def test_sizes_divide_by_16():
    with pytest.raises(ResolutionError, match="multiple of 16.*1000 → nearest valid: 992 or 1008"):
        plan(CARD.index(), CARD.components(), Settings(height=1000, width=1024))


def test_transformer_config_checks():
    cfg = CARD.config("transformer")
    with pytest.raises(ConfigError, match="caption_projection_dim 2048 must equal"):
        estimate_configs(None, {"transformer": {**cfg, "caption_projection_dim": 2048}}, Settings())
    with pytest.raises(ConfigError, match="out_channels"):
        estimate_configs(None, {"transformer": {**cfg, "out_channels": None}}, Settings())


def test_transformer_closed_form():
    """Per step: 4 joint + 32 single blocks on N image and T = 8 + L text tokens (d = 3072, h = 12,
    d_h = 256, f = 8192), plus the embedders and the output layers."""
    n, L, d, h, dh = (1024 // 16) ** 2, 256, 3072, 12, 256
    t, f = 8 + L, feed_forward_width(d)
    assert f == 8192
    joint = 12 * d * d + 4 * (n + t) * d * d + 2 * h * (n + t) ** 2 * dh + 3 * (n + t) * d * f
    single = 6 * d * d + 4 * (n + t) * d * d + 2 * h * (n + t) ** 2 * dh + 3 * (n + t) * d * f
    edges = n * 16 * d + (256 * d + d * d) + L * 2048 * d + 2 * d * d + n * d * 16
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings())
    assert r.components[0].macs_per_run == 4 * joint + 32 * single + edges


def test_a_patch_grid_beyond_the_positional_table_is_noted():
    big = plan(CARD.index(), CARD.components(), Settings(height=1024, width=1536))
    assert any("64×96 patch grid exceeds the transformer's 64×64 positional table" in n for n in big.notes)
    default = plan(CARD.index(), CARD.components(), Settings())  # 1024²: the whole 64×64 table
    assert not any("positional table" in n for n in default.notes)


def test_card_parameters_are_the_published_count():
    """fal/AuraFlow's published 6.843 B parameters: the 4096-row positional table (PROVENANCE.json), checked
    against the harness fixture measured on the real module."""
    fixture = CARD.fixture("transformer-1024x1024.json")
    assert fixture["params"] == 6_842_876_928
    r = estimate_configs(None, {"transformer": CARD.config("transformer")}, Settings())
    assert r.component("transformer").params == fixture["params"]


def test_options_it_does_not_apply_are_refused():
    with pytest.raises(OptionError, match="--true-cfg-scale does not apply to AuraFlowPipeline"):
        plan(CARD.index(), CARD.components(), Settings(true_cfg_scale=2.0))
    with pytest.raises(OptionError, match="--vae-tiling / --no-vae-tiling does not apply to AuraFlowPipeline"):
        plan(CARD.index(), CARD.components(), Settings(vae_tiling=True))
