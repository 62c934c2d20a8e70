"""Activation peaks of the VAE encodes and image encoders (issue 22, item 5): a pipeline that encodes an input image
(edit, inpainting, control, image-to-video) has every call it runs estimated, each encode at the input's pixels of one
frame and the frames the pipeline encodes (validation/activation_manifest.yaml, cases ``*-encode`` and ``*-image``)."""

from __future__ import annotations

import pytest

from flopcalc.gpu_memory.activations import (
    fit_entry,
    pixel_call,
    positions,
    single_frame,
)
from flopcalc.gpu_memory.estimate import memory

#: One card per encode fit family: the FLUX.1 AutoencoderKL, Wan's 81-frame and one-frame encodes with the CLIP
#: ViT-H and Wan-Animate CLIP image encoders, HunyuanVideo's one-frame encode with FramePack's SigLIP, SVD, and
#: Kandinsky 2.2's prior image encoder.
CARDS = ["flux-depth-dev", "wan2.1-i2v-14b-480p", "wan2.2-animate-14b", "framepack-i2v-hy", "svd-img2vid",
         "kandinsky-2.2"]


def _call(est, component: str, call: str):
    return next(a for a in est.activations if (a.component, a.call) == (component, call))


@pytest.mark.parametrize("card", CARDS)
def test_encodes_and_image_encoders_are_estimated(card):
    est = memory(card, gpu="h100-80gb")
    assert not [c for c in est.unestimated if c.endswith(".encode") or "image_encoder" in c], est.unestimated
    encoders = [a for a in est.activations if a.call == "encode" or "image_encoder" in a.component]
    assert encoders and all(a.fused.elements > 0 and a.fused.loo_max_rel_error <= 0.15 for a in encoders)
    assert not any(a.fused.extrapolated for a in encoders)


def test_an_encode_is_fitted_in_the_input_pixels_of_one_frame():
    """Wan 2.1 I2V encodes the image and 80 zero frames at 480×832: n is 480 × 832, not × 81 (the chunks' peak
    follows one frame); the 97-frame SkyReels encode uses the 81-frame fit with a note."""
    shape = {"height": 480, "width": 832, "frames": 81}
    assert pixel_call(shape) and positions(shape) == 480 * 832 and not single_frame(shape)
    assert _call(memory("wan2.1-i2v-14b-480p"), "vae", "encode").fused.n == 480 * 832
    sky = memory("skyreels-v2-i2v-14b-720p")
    assert any(n.startswith("vae.encode: fitted encoding 81 frames, run on 97") for n in sky.notes)


def test_a_one_frame_encode_has_a_fit_of_its_own():
    """Wan-Animate encodes its reference image as one frame: the single-frame fit, far below the 81-frame one."""
    import json
    from pathlib import Path

    cfg = json.loads((Path(__file__).resolve().parent.parent / "model_cards" / "wan2.2-animate-14b" / "vae"
                      / "config.json").read_text(encoding="utf-8"))
    one = {"height": 720, "width": 1280, "frames": 1}
    many = {"height": 720, "width": 1280, "frames": 81}
    assert single_frame(one) and not single_frame(many)
    assert fit_entry("AutoencoderKLWan", "encode", cfg, one) is not fit_entry("AutoencoderKLWan", "encode", cfg, many)
    est = memory("wan2.2-animate-14b")
    assert not any(n.startswith("vae.encode: fitted encoding") for n in est.notes)
    wan = _call(memory("wan2.1-i2v-14b-480p", height=720, width=1280), "vae", "encode")
    assert _call(est, "vae", "encode").fused.elements < wan.fused.elements / 2


def test_a_fixed_size_image_encoder_is_one_constant():
    """The CLIP ViT-H image encoder runs at 224² whatever the video's size: the same peak at every size."""
    small, large = memory("i2vgen-xl", height=256, width=256), memory("i2vgen-xl")
    assert _call(small, "image_encoder", "forward").fused.elements == \
        _call(large, "image_encoder", "forward").fused.elements > 0


def test_the_encode_scales_with_the_batch_it_runs_on():
    one, two = memory("flux-fill-dev"), memory("flux-fill-dev", batch_size=2)
    a, b = _call(one, "vae", "encode"), _call(two, "vae", "encode")
    assert b.batch == 2 * a.batch and b.bytes("fused") == 2 * a.bytes("fused")


@pytest.mark.parametrize("card", ["wan2.1-i2v-14b-480p", "hunyuanvideo-i2v", "i2vgen-xl"])
def test_a_tiled_encode_is_estimated_and_below_the_whole_one(card):
    """``--vae-tiling``: the plan encodes in tiles, measured at ``enable_tiling()``'s defaults (cases
    ``*-encode-tiled``): its own fit, in the whole input's pixels, below the untiled encode at the same size."""
    whole, tiled = memory(card), memory(card, vae_tiling=True)
    assert "vae.encode" not in tiled.unestimated
    a, b = _call(whole, "vae", "encode"), _call(tiled, "vae", "encode")
    assert b.fused.n == a.fused.n and 0 < b.fused.elements < a.fused.elements
