"""Stable Cascade pipeline semantics, as diffusers' ``StableCascadePriorPipeline``,
``StableCascadeDecoderPipeline`` and ``StableCascadeCombinedPipeline`` run them (no torch needed; the
latent geometry is also checked against diffusers' own ``prepare_latents`` in
tests/test_live_stable_cascade.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.stable_cascade import decoder_latent_side, prior_latent_side
from card_support import runs_by_call

CARDS = Path(__file__).resolve().parent.parent / "model_cards"


def _folder(card: str) -> tuple[dict, dict[str, dict]]:
    root = CARDS / card
    index = json.loads((root / "model_index.json").read_text())
    comps = {p.parent.name: json.loads(p.read_text()) for p in root.glob("*/config.json")}
    return index, comps


def test_latent_geometry_is_diffusers_float_arithmetic():
    # ceil(side / 42.67): 1024 / 42.67 = 23.998 → 24; 1025 → 24.02 → 25; 1000 → 23.44 → 24
    assert [prior_latent_side(s) for s in (1024, 1025, 1000, 512, 768, 1280, 1344)] == [24, 25, 24, 12, 18, 30, 32]
    # int(side · 10.67): 24 → 256.08 → 256; 32 → 341.44 → 341 (odd: the decoder's PixelUnshuffle(2) fails)
    assert [decoder_latent_side(s) for s in (24, 12, 18, 30, 32)] == [256, 128, 192, 320, 341]


def test_prior_defaults_cfg_and_conditioning_tokens():
    r = flopcalc.estimate("stable-cascade-prior")
    s = r.settings
    assert r.pipeline == "StableCascadePriorPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale) == (1024, 1024, 20, 4.0) and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "prior.forward": 40}
    assert r.component("text_encoder").shape == {"seq_len": 77}
    assert r.component("prior").shape == {"latent_height": 24, "latent_width": 24, "text_len": 77, "image_tokens": 1}
    # the 77 text tokens + 4 pooled + 4 image tokens are the keys beside the 576 positions of every attention
    attn = r.component("prior").tree.find("down_blocks.0.2.attention.to_k")
    assert attn.per_item.linear == (576 + 77 + 4 + 4) * 2048 * 2048
    assert any("image_encoder runs only for reference images" in n for n in r.notes)


def test_prior_without_cfg_and_batches():
    one = flopcalc.estimate("stable-cascade-prior", guidance_scale=1.0)
    assert one.passes == 1 and runs_by_call(one) == {"text_encoder.forward": 1, "prior.forward": 20}
    r = flopcalc.estimate("stable-cascade-prior", batch_size=2, num_images_per_prompt=3, steps=5)
    assert runs_by_call(r) == {"text_encoder.forward": 4, "prior.forward": 5 * 2 * 6}


def test_decoder_defaults_no_cfg_and_the_vqgan():
    r = flopcalc.estimate("stable-cascade-decoder")
    s = r.settings
    assert r.pipeline == "StableCascadeDecoderPipeline"
    assert (s.steps, s.guidance_scale) == (10, 0.0) and r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "decoder.forward": 10, "vqgan.decode": 1}
    assert r.component("decoder").shape == {"latent_height": 256, "latent_width": 256, "text_len": 77}
    assert r.component("vqgan").shape == {"latent_height": 256, "latent_width": 256}
    # the decoder sees only the pooled text (clip_seq tokens): no text mapper in its config
    assert r.component("decoder").tree.find("clip_norm") is not None
    assert r.component("decoder").tree.find("down_blocks.2.2.kv_mapper.1").per_item.linear == 4 * 1280 * 1280
    cfg = flopcalc.estimate("stable-cascade-decoder", guidance_scale=2.0, batch_size=2)
    assert cfg.passes == 2 and runs_by_call(cfg) == {"text_encoder.forward": 4, "decoder.forward": 40, "vqgan.decode": 2}


def test_combined_runs_each_stage_with_its_own_defaults():
    r = flopcalc.estimate("stable-cascade")
    s = r.settings
    assert r.pipeline == "StableCascadeCombinedPipeline"
    assert (s.height, s.width, s.steps, s.guidance_scale) == (512, 512, 60, 4.0)
    # the decoder pipeline gets the prior's prompt embeddings: its text_encoder never runs
    assert runs_by_call(r) == {"prior_text_encoder.forward": 2, "prior_prior.forward": 120, "decoder.forward": 12,
                        "vqgan.decode": 1}
    assert r.component("prior_prior").shape["latent_height"] == 12
    assert r.component("decoder").shape["latent_height"] == 128
    assert any("text_encoder does not run" in n for n in r.notes)
    # --steps / --guidance-scale are the prior's; the decoder keeps 12 steps at one pass
    r2 = flopcalc.estimate("stable-cascade", steps=20, guidance_scale=1.0, batch_size=2)
    assert runs_by_call(r2) == {"prior_text_encoder.forward": 2, "prior_prior.forward": 40, "decoder.forward": 24,
                         "vqgan.decode": 2}


def test_combined_equals_its_two_stage_pipelines():
    """The combined pipeline's prior and decoder rows are the stage pipelines' rows at the same settings."""
    c = flopcalc.estimate("stable-cascade", height=1024, width=1024, steps=20)
    prior = flopcalc.estimate("stable-cascade-prior", height=1024, width=1024, steps=20)
    decoder = flopcalc.estimate("stable-cascade-decoder", height=1024, width=1024, steps=12)
    assert c.component("prior_prior").macs_per_run == prior.component("prior").macs_per_run
    assert c.component("decoder").macs_per_run == decoder.component("decoder").macs_per_run
    assert c.component("vqgan").macs_per_run == decoder.component("vqgan").macs_per_run


def test_lite_card_is_smaller():
    full, lite = flopcalc.estimate("stable-cascade"), flopcalc.estimate("stable-cascade-lite")
    assert lite.component("prior_prior").params == 1_030_785_040
    assert lite.flops < full.flops


def test_sizes_the_real_pipeline_cannot_run_are_refused():
    with pytest.raises(ResolutionError, match="341"):  # int(32 · 10.67) = 341: PixelUnshuffle(2) fails
        flopcalc.estimate("stable-cascade-decoder", height=768, width=1344)
    r = flopcalc.estimate("stable-cascade-prior", height=768, width=1344)  # the prior has patch 1
    assert r.component("prior").shape["latent_width"] == 32


def test_index_values_drive_the_geometry():
    index, comps = _folder("stable-cascade-prior")
    r = estimate_configs({**index, "resolution_multiple": 32}, comps, Settings())
    assert r.component("prior").shape["latent_height"] == 32
    with pytest.raises(ConfigError, match="resolution_multiple"):
        estimate_configs({**index, "resolution_multiple": "big"}, comps, Settings())
    index, comps = _folder("stable-cascade-decoder")
    r = estimate_configs({**index, "latent_dim_scale": 8}, comps, Settings())
    assert r.component("decoder").shape["latent_height"] == 192


def test_bare_unets_run_under_their_stage_pipeline():
    _, comps = _folder("stable-cascade")
    prior = estimate_configs(None, {"prior": comps["prior_prior"]}, Settings())
    decoder = estimate_configs(None, {"decoder": comps["decoder"]}, Settings())
    assert prior.pipeline.startswith("StableCascadePriorPipeline") and runs_by_call(prior) == {"prior.forward": 40}
    assert decoder.pipeline.startswith("StableCascadeDecoderPipeline") and runs_by_call(decoder) == {"decoder.forward": 10}


def test_a_decoder_config_as_the_prior_is_refused():
    index, comps = _folder("stable-cascade-prior")
    comps["prior"] = _folder("stable-cascade")[1]["decoder"]
    with pytest.raises(ConfigError, match="clip_text_in_channels"):
        estimate_configs(index, comps, Settings())


def test_no_image_to_image_and_no_law():
    with pytest.raises(OptionError, match="strength"):
        flopcalc.estimate("stable-cascade", strength=0.5)
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="closed-form"):
        symbolic_estimate("stable-cascade-prior")


def test_reference_images_run_the_image_encoder_once_each():
    r = flopcalc.estimate("stable-cascade-prior", reference_images=3, batch_size=2)
    # encode_image: each image once at batch 1 (repeated over the batch after, zeros for the negative)
    assert runs_by_call(r) == {"text_encoder.forward": 4, "image_encoder.forward": 3, "prior.forward": 80}
    assert r.component("image_encoder").shape == {"height": 224, "width": 224}
    assert r.component("prior").shape["image_tokens"] == 3
    attn = r.component("prior").tree.find("down_blocks.0.2.attention.to_k")
    assert attn.per_item.linear == (576 + 77 + 4 + 3 * 4) * 2048 * 2048
    c = flopcalc.estimate("stable-cascade", reference_images=1)
    assert runs_by_call(c)["prior_image_encoder.forward"] == 1
    with pytest.raises(OptionError, match="reference-images"):
        flopcalc.estimate("stable-cascade-decoder", reference_images=1)
    with pytest.raises(OptionError, match="reference-images"):
        flopcalc.estimate("sd1.5", reference_images=1)
