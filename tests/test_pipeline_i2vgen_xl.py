"""I2VGen-XL (``I2VGenXLPipeline``, deprecated in diffusers 0.42.1 but exported) hand-checked against its
``__call__``, and the ``I2VGenXLUNet`` formula's image conditioning. No torch needed."""

from __future__ import annotations

import pytest
from card_support import Card, runs_by_call

import flopcalc
from flopcalc.engine.architectures.i2vgen_xl import context_tokens
from flopcalc.engine.errors import OptionError
from flopcalc.engine.registry import RunShape, assemble

I2V = Card("i2vgen-xl")


def test_defaults_as_the_pipeline_runs_them():
    # pipeline_i2vgen_xl.py:512: 704 × 1280, 16 frames, 50 steps, guidance 9.0, decode_chunk_size 1
    r = flopcalc.estimate("i2vgen-xl")
    s = r.settings
    assert r.pipeline == "I2VGenXLPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (704, 1280, 16, 50, 9.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "image_encoder.forward": 1, "vae.encode": 1,
                        "unet.forward": 100, "vae.decode": 16}
    assert r.component("image_encoder").shape == {"height": 224, "width": 224}
    assert r.component("vae", "encode").shape == {"height": 704, "width": 1280}
    assert r.component("unet").shape == {"latent_height": 88, "latent_width": 160, "text_len": 77,
                                         "latent_frames": 16}


def test_mlenergy_v2_setting_batch_and_videos_per_prompt():
    # ML.ENERGY v2 image-to-video: 25 steps, 16 frames; the images and prompts encoded once each, the videos
    # (num_videos_per_prompt, kept by this pipeline) denoised and decoded
    r = flopcalc.estimate("i2vgen-xl", steps=25, num_frames=16, batch_size=2, num_images_per_prompt=3)
    assert runs_by_call(r) == {"text_encoder.forward": 4, "image_encoder.forward": 2, "vae.encode": 2,
                        "unet.forward": 25 * 2 * 6, "vae.decode": 16 * 6}


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to I2VGenXLPipeline"):
        flopcalc.estimate("i2vgen-xl", strength=0.5)
    r = flopcalc.estimate("i2vgen-xl", guidance_scale=1.0)
    assert r.passes == 1 and runs_by_call(r)["text_encoder.forward"] == 1


def test_context_is_text_plus_image_latent_tokens_plus_image_tokens():
    # image_latents_context_embedding: adaptive pool to 32², two stride-2 convs: 8 × 8 tokens; context_embedding:
    # in_channels tokens of the CLIP image embedding
    assert context_tokens(77, 4) == 77 + 64 + 4
    tree = assemble(I2V.config("unet"), RunShape(latent_height=40, latent_width=64, text_len=77, latent_frames=4),
                    component="unet")
    attn2 = tree.find("down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k")
    # to_k reads every context vector of each frame: (77 + 68) × 1024 → 320 per frame
    assert attn2.total.macs() == 4 * (77 + 68) * 1024 * 320
