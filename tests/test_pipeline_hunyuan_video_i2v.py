"""HunyuanVideoImageToVideoPipeline semantics (diffusers ``pipelines/hunyuan_video/pipeline_hunyuan_video_image2video.py``)
on the hunyuanvideo-i2v card (16-channel token_replace transformer) and the 33-channel latent_concat transformer
(validation/configs/hunyuanvideo-i2v-33ch): defaults, the transformer's text length, true CFG only with
a negative prompt, the one-frame image encode per video, the refusals. No torch needed."""

from __future__ import annotations

import json

import pytest

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.hunyuan_video_i2v import llava_tokens, text_tokens

from card_support import Card, FIXTURES, runs_by_call

CARD = Card("hunyuanvideo-i2v")
NAME = "HunyuanVideoImageToVideoPipeline"
CONCAT = json.loads((FIXTURES.parent / "configs/hunyuanvideo-i2v-33ch/transformer/config.json").read_text())


def _plan(settings: Settings, text_encoder=None, **transformer):
    components = CARD.components()
    components["transformer"] = {**components["transformer"], **transformer}
    if text_encoder is not None:
        components["text_encoder"] = {**components["text_encoder"], **text_encoder}
    return estimate_configs(CARD.index(), components, settings)


def test_text_tokens_follow_the_prompt_template():
    # DEFAULT_PROMPT_TEMPLATE (:93-98): 576 image features; image_embed_interleave 4 / 2 (:779-784); 4 tokens cut.
    assert text_tokens(256, "token_replace") == 576 // 4 + 256 - 4 == 396
    assert text_tokens(256, "latent_concat") == 576 // 2 + 256 - 4 == 540
    assert text_tokens(100, "token_replace") == 240
    assert text_tokens(3, "token_replace") == 144   # max_sequence_length ≤ 4: the text slice is empty
    # _get_llama_prompt_embeds: 256 + crop_start 103, the one <image> token expanded to 576 (:116).
    assert llava_tokens(256) == 256 + 103 + 575 == 934


def test_defaults_token_replace():
    r = _plan(Settings())
    s = r.settings
    assert r.pipeline == NAME
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.true_cfg_scale,
            s.max_sequence_length) == (720, 1280, 129, 50, 1.0, 1.0, 256)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "vae.encode": 1,
                        "transformer.forward": 50, "vae.decode": 1}
    assert r.component("text_encoder").shape["seq_len"] == 934
    encode = r.component("vae", "encode").shape
    assert (encode["height"], encode["width"], encode["frames"]) == (720, 1280, 1)
    transformer = r.component("transformer").shape
    assert (transformer["latent_frames"], transformer["text_len"]) == (33, 396)
    assert r.component("vae", "decode").shape["latent_frames"] == 33
    assert any("replaces the first latent frame" in n for n in r.notes)


def test_latent_concat_transformer():
    r = _plan(Settings(height=512, width=512, num_frames=33), **CONCAT)
    assert r.component("transformer").shape["text_len"] == 540
    assert any("concatenated to the noise latent" in n for n in r.notes)
    assert any("guidance_scale is ignored" in n for n in r.notes)


def test_true_cfg_only_with_a_negative_prompt():
    r = _plan(Settings(true_cfg_scale=4.0))
    assert r.passes == 1
    assert any("has no effect without a negative prompt" in n for n in r.notes)
    r = _plan(Settings(negative_prompt=True, true_cfg_scale=4.0, batch_size=2, num_images_per_prompt=2, steps=10))
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 4, "text_encoder_2.forward": 4, "vae.encode": 4,
                        "transformer.forward": 80, "vae.decode": 4}
    r = _plan(Settings(negative_prompt=True))
    assert r.passes == 1
    assert any("negative prompt is ignored" in n for n in r.notes)


def test_refusals():
    with pytest.raises(OptionError, match=f"--strength does not apply to {NAME}"):
        _plan(Settings(strength=0.5))
    with pytest.raises(FlopcalcError, match="image_condition_type None"):
        _plan(Settings(), image_condition_type=None)
    with pytest.raises(FlopcalcError, match="in_channels 16 ≠ 33 for latent_concat"):
        _plan(Settings(), image_condition_type="latent_concat")
    with pytest.raises(FlopcalcError, match="gives 577 image features per image, but"):
        _plan(Settings(), text_encoder={"vision_feature_select_strategy": "full"})
    with pytest.raises(FlopcalcError, match="divisible|multiple"):
        _plan(Settings(height=520, width=512))
