"""The wan2.1-t2v-14b card (Wan2.1 T2V 14B, the most used Wan setup): WanPipeline on the conversion script's
14B transformer, its counts equal to the harness fixtures measured on the real module."""

from __future__ import annotations

from card_support import Card, runs_by_call

import flopcalc

CARD = Card("wan2.1-t2v-14b")
SMALL = Card("wan2.1-t2v-1.3b")


def test_defaults_run_as_the_1_3b_pipeline():
    r = flopcalc.estimate("wan2.1-t2v-14b")
    small = flopcalc.estimate("wan2.1-t2v-1.3b")
    assert r.pipeline == small.pipeline == "WanPipeline"
    assert runs_by_call(r) == runs_by_call(small)
    assert (r.settings.height, r.settings.width, r.settings.num_frames) == (480, 832, 81)
    # the text encoder and VAE are the 1.3B card's (the conversion script shares them)
    for name in ("text_encoder", "vae"):
        assert r.component(name).macs_per_run == small.component(name).macs_per_run


def test_transformer_equals_the_fixtures():
    for size, frames, stem in (((480, 832), 81, "transformer"), ((768, 1344), 81, "transformer"),
                               ((480, 832), 17, "transformer-f17"), ((512, 512), 17, "transformer-f17")):
        fx = CARD.fixture(f"{stem}-{size[0]}x{size[1]}.json")
        r = flopcalc.estimate("wan2.1-t2v-14b", height=size[0], width=size[1], num_frames=frames)
        t = r.component("transformer")
        assert 2 * t.macs_per_run == fx["torch"]["flops"], (size, frames)
        assert t.params == fx["params"]


def test_the_14b_geometry():
    config = CARD.config("transformer")
    assert (config["num_layers"], config["num_attention_heads"], config["ffn_dim"]) == (40, 40, 13824)
    assert config["added_kv_proj_dim"] is None and config["in_channels"] == 16
