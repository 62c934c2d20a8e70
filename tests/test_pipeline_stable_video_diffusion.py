"""Stable Video Diffusion pipeline semantics, as diffusers' ``StableVideoDiffusionPipeline.__call__`` runs them
(no torch needed)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import OptionError, ResolutionError
from card_support import runs_by_call


@pytest.mark.parametrize("card, frames", [("svd-img2vid", 14), ("svd-img2vid-xt", 25)])
def test_defaults_image_once_unet_per_step_and_pass_one_decode(card, frames):
    r = flopcalc.estimate(card)
    s = r.settings
    assert r.pipeline == "StableVideoDiffusionPipeline" and r.passes == 2
    assert (s.height, s.width, s.steps, s.guidance_scale, s.num_frames) == (576, 1024, 25, 3.0, frames)
    assert runs_by_call(r) == {"image_encoder.forward": 1, "vae.encode": 1, "unet.forward": 50, "vae.decode": 1}
    assert r.component("unet").shape == {"latent_height": 72, "latent_width": 128, "text_len": 1,
                                         "latent_frames": frames}
    assert r.component("vae", "decode").shape == {"latent_height": 72, "latent_width": 128, "frames": frames}
    assert r.component("vae", "encode").shape == {"height": 576, "width": 1024}
    assert r.component("image_encoder").shape == {"height": 224, "width": 224}


def test_ml_energy_v2_settings_are_runnable():
    """ML.ENERGY v2: 25 steps, the pipeline's default size and frames (img2vid 14, img2vid-xt 25), batch 1–3."""
    for card, frames in (("svd-img2vid", 14), ("svd-img2vid-xt", 25)):
        r = flopcalc.estimate(card, steps=25, num_frames=frames, batch_size=3)
        assert runs_by_call(r) == {"image_encoder.forward": 3, "vae.encode": 3, "unet.forward": 150, "vae.decode": 3}


def test_guidance_one_is_one_pass_and_frames_scale_the_unet():
    one = flopcalc.estimate("svd-img2vid-xt", guidance_scale=1.0)
    assert one.passes == 1 and runs_by_call(one)["unet.forward"] == 25
    f8 = flopcalc.estimate("svd-img2vid-xt", num_frames=8)
    f16 = flopcalc.estimate("svd-img2vid-xt", num_frames=16)
    assert f8.component("unet").shape["latent_frames"] == 8
    assert f16.component("unet").macs_per_run > f8.component("unet").macs_per_run


def test_decode_chunks_over_the_flattened_frames():
    """decode_latents: range(0, videos·frames, decode_chunk_size); the temporal decoder is linear in the frames,
    so the chunking moves the calls, not the total."""
    whole = flopcalc.estimate("svd-img2vid-xt", batch_size=2)
    chunked = flopcalc.estimate("svd-img2vid-xt", batch_size=2, decode_chunk_size=8)
    assert runs_by_call(whole)["vae.decode"] == 2
    dec = chunked.component("vae", "decode")
    assert dec.tree.formula == "pieces" and [p.count for p in dec.tree.children] == [6, 1]  # 50 = 6·8 + 2
    assert dec.macs == whole.component("vae", "decode").macs
    with pytest.raises(OptionError, match="--decode-chunk-size does not apply"):
        flopcalc.estimate("sd1.5", decode_chunk_size=4)


def test_no_strength_and_sizes_divide_by_the_vae():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate("svd-img2vid", strength=0.5)
    with pytest.raises(ResolutionError):
        flopcalc.estimate("svd-img2vid", height=580, width=1024)
