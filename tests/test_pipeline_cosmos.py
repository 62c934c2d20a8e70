"""Cosmos Predict2 pipelines (diffusers ``pipelines/cosmos/``): ``Cosmos2TextToImagePipeline`` and
``Cosmos2VideoToWorldPipeline`` on the bundled cards: defaults, guidance passes, shapes, the per-frame timestep
of Video2World (adaLN norms on every token), refusals, the closed forms of the Cosmos block. No torch needed."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import FlopcalcError, OptionError
from card_support import runs_by_call


def test_text_to_image_defaults():
    r = flopcalc.estimate("cosmos-predict2-2b-text2image")
    s = r.settings
    # pipeline_cosmos2_text2image.py:455-472
    assert (s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (768, 1360, 35, 7.0, 512)
    assert r.pipeline == "Cosmos2TextToImagePipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 70, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 96, "latent_width": 170, "text_len": 512}
    assert r.component("vae").shape == {"latent_height": 96, "latent_width": 170, "latent_frames": 1}
    assert any("CosmosSafetyChecker" in n for n in r.notes)


def test_block_closed_form():
    """The text-to-image block: 3 n_t (d r + 3 r d) + 4 N d² + 2 h N² d_h + 2 N d² + 2 T d_t d + 2 h N T d_h
    + 2 N d f, with n_t = 1."""
    r = flopcalc.estimate("cosmos-predict2-2b-text2image", height=512, width=512, max_sequence_length=64)
    block = r.component("transformer").tree.find("transformer_blocks.0")
    d, h, dh, r_, f, n, t, dt = 2048, 16, 128, 256, 8192, 32 * 32, 64, 1024
    expected = 3 * (d * r_ + 3 * r_ * d) + 4 * n * d * d + 2 * h * n * n * dh + 2 * n * d * d + 2 * t * dt * d \
        + 2 * h * n * t * dh + 2 * n * d * f
    assert block.per_item.macs("torch") == expected


def test_video_to_world_defaults_and_per_token_modulation():
    r = flopcalc.estimate("cosmos-predict2-2b-video2world")
    s = r.settings
    # pipeline_cosmos2_video2world.py:515-538
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (704, 1280, 93, 35, 7.0)
    assert r.pipeline == "Cosmos2VideoToWorldPipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 70, "vae.decode": 1}
    shape = r.component("transformer").shape
    assert shape["latent_frames"] == shape["timestep_tokens"] == 24
    assert r.component("vae", "encode").shape == {"height": 704, "width": 1280, "frames": 93}
    tree = r.component("transformer").tree
    n, d = 24 * 44 * 80, 2048
    assert tree.find("transformer_blocks.0.norm1").per_item.macs("torch") == n * (d * 256 + 256 * 3 * d)
    assert tree.find("time_embed").per_item.macs("torch") == 24 * (d * d + 3 * d * d)


def test_guidance_off_and_refusals():
    r = flopcalc.estimate("cosmos-predict2-2b-text2image", guidance_scale=1.0)
    assert r.passes == 1 and runs_by_call(r)["transformer.forward"] == 35
    with pytest.raises(OptionError):
        flopcalc.estimate("cosmos-predict2-2b-text2image", num_frames=9)
    with pytest.raises(OptionError):
        flopcalc.estimate("cosmos-predict2-2b-text2image", strength=0.5)
    with pytest.raises(FlopcalcError, match="multiple of 16"):
        flopcalc.estimate("cosmos-predict2-2b-video2world", height=700)


def test_symbolic_laws():
    from flopcalc.flops.symbolic import symbolic_estimate

    for model, frames in [("cosmos-predict2-2b-text2image", None), ("cosmos-predict2-2b-video2world", 33)]:
        law = symbolic_estimate(model)
        symbols = {x.name: x for x in law.flops.free_symbols}
        assert {"H", "W", "S"} <= set(symbols) and (frames is None) == ("F" not in symbols)
        values = dict(H=256, W=512, F=frames, S=7, P=2, B=1, L=512)
        at = law.flops.subs({symbols[k]: v for k, v in values.items() if k in symbols})
        assert at == 2 * flopcalc.estimate(model, height=256, width=512, num_frames=frames, steps=7).macs
