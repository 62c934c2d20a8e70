"""QwenImageLayeredPipeline (diffusers ``pipelines/qwenimage/pipeline_qwenimage_layered.py``): layers + 1 stacked
latents and the input image's latent in every transformer pass, the VAE decoding each layer. No torch needed."""

from __future__ import annotations

from pathlib import Path

import pytest

import flopcalc
from flopcalc.engine.errors import FlopcalcError, OptionError
from card_support import runs_by_call

FOLDER = str(Path(__file__).resolve().parent.parent / "validation/configs/qwen-image-layered")


def test_defaults_four_layers_at_640():
    r = flopcalc.estimate(FOLDER)
    assert r.pipeline == "QwenImageLayeredPipeline"
    s = r.settings
    assert (s.height, s.width, s.steps, s.layers, s.max_sequence_length) == (640, 640, 50, 4, 512)
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 50, "vae.encode": 1, "vae.decode": 4}
    assert r.component("text_encoder").shape == {"seq_len": 512 + 34}
    assert r.component("transformer").shape == {"latent_height": 80, "latent_width": 80, "text_len": 512,
                                                "latent_frames": 5, "reference_tokens": 40 * 40}
    assert r.component("vae", "encode").shape == {"height": 640, "width": 640}


def test_layers_and_aspect_ratio():
    r = flopcalc.estimate(FOLDER, layers=2, height=960, width=1664, negative_prompt=True, batch_size=2)
    # calculate_dimensions(640², 1664/960): 832 × 480
    assert (r.settings.height, r.settings.width) == (480, 832)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 200, "vae.encode": 2, "vae.decode": 4}
    assert r.component("transformer").shape["latent_frames"] == 3
    assert r.component("transformer").shape["reference_tokens"] == 30 * 52


def test_tokens_grow_with_the_layers():
    """Every image-side module runs on (layers + 1 + 1) latents' tokens: more layers, more tokens."""
    small, big = (flopcalc.estimate(FOLDER, layers=n).component("transformer") for n in (1, 7))
    assert big.macs_per_run > small.macs_per_run
    assert small.tree.find("img_in").per_item.macs("torch") * 9 == big.tree.find("img_in").per_item.macs("torch") * 3


def test_refusals():
    with pytest.raises(OptionError, match="--layers does not apply to QwenImagePipeline"):
        flopcalc.estimate("qwen-image", layers=3)
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(FOLDER, strength=0.5)
    with pytest.raises(FlopcalcError, match="layers"):
        flopcalc.estimate(FOLDER, layers=1000)
