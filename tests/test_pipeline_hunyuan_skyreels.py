"""HunyuanSkyreelsImageToVideoPipeline semantics (diffusers
``pipelines/hunyuan_video/pipeline_hunyuan_skyreels_image2video.py``) on the HunyuanVideo card's configs with a
32-channel (image-to-video) transformer: defaults, true CFG only with a negative prompt, the one-frame image
encode per video. No torch needed."""

from __future__ import annotations

import pytest

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

CARD = Card("hunyuanvideo")
NAME = "HunyuanSkyreelsImageToVideoPipeline"


def _plan(settings: Settings, in_channels: int = 32):
    components = CARD.components()
    components["transformer"] = {**components["transformer"], "in_channels": in_channels}
    return estimate_configs({**CARD.index(), "_class_name": NAME}, components, settings)


def test_defaults_one_pass_without_a_negative_prompt():
    r = _plan(Settings())
    s = r.settings
    assert r.pipeline == NAME
    assert (s.height, s.width, s.num_frames, s.steps, s.true_cfg_scale, s.guidance_scale) == (544, 960, 97, 50, 6.0, 1.0)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 1,
                        "transformer.forward": 50, "vae.decode": 1}
    encode = r.component("vae", "encode").shape
    assert (encode["height"], encode["width"], encode["frames"]) == (544, 960, 1)
    assert r.component("transformer").shape["latent_frames"] == 25
    assert any("has no effect without a negative prompt (as in HunyuanSkyreelsImageToVideoPipeline)" in n
               for n in r.notes)


def test_true_cfg_with_a_negative_prompt_and_one_image_per_video():
    r = _plan(Settings(negative_prompt=True, batch_size=2, num_images_per_prompt=2, steps=10))
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "vae.encode": 4,
                        "transformer.forward": 80, "vae.decode": 4}


def test_refuses_strength_and_a_text_to_video_transformer():
    with pytest.raises(OptionError, match=f"--strength does not apply to {NAME}"):
        _plan(Settings(strength=0.5))
    with pytest.raises(FlopcalcError, match="in_channels 16 ≠ 2 × the VAE's 16 latent channels"):
        _plan(Settings(), in_channels=16)
