"""LTX-Video 0.9.5 (the card) and LTXImageToVideoPipeline semantics (diffusers
``pipelines/ltx/pipeline_ltx_image2video.py``): the image encoded as a one-frame video, one timestep per
packed token, the runs matching the measured fixtures' inputs. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
CARD = Card("ltx-video-0.9.5")
I2V = REPO / "validation/configs/ltx-video-0.9.5-i2v"
FIXTURES = REPO / "validation/fixtures"


def _i2v(settings: Settings):
    return estimate_configs({**CARD.index(), "_class_name": "LTXImageToVideoPipeline"}, CARD.components(), settings)


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / "ltx-video-0.9.5-i2v" / name).read_text())


def test_card_0_9_5_runs_ltx_pipeline_with_its_timestep_conditioned_vae():
    r = flopcalc.estimate(CARD.name)
    assert r.pipeline == "LTXPipeline"
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert CARD.config("vae")["timestep_conditioning"] is True
    decode = json.loads((FIXTURES / "ltx-video-0.9.5/vae-decode-512x704.json").read_text())
    assert decode["inputs"]["temb"] == [1]  # decode_timestep into the decoder's timestep embedders
    assert r.component("vae", "decode").macs_per_run * 2 == decode["torch"]["flops"]


def test_i2v_defaults_encode_the_image_and_give_every_token_a_timestep():
    r = _i2v(Settings())
    s = r.settings
    assert r.pipeline == "LTXImageToVideoPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (512, 704, 161, 50, 3.0, 128)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 512, "width": 704, "frames": 1}
    t = r.component("transformer").shape
    assert t["timestep_tokens"] == 21 * 16 * 22
    fixture = _fixture("transformer-512x704.json")
    assert fixture["inputs"]["timestep"] == [1, t["timestep_tokens"]]
    assert fixture["inputs"]["hidden_states"][1] == t["timestep_tokens"]
    assert r.component("transformer").macs_per_run * 2 == fixture["torch"]["flops"]
    assert r.component("vae", "encode").macs_per_run * 2 == _fixture("vae-f1-encode-512x704.json")["torch"]["flops"]


def test_i2v_folder_and_frames():
    r = flopcalc.estimate(str(I2V), num_frames=25, height=256, width=384)
    assert r.pipeline == "LTXImageToVideoPipeline"
    assert r.component("transformer").shape["timestep_tokens"] == 4 * 8 * 12
    assert r.component("transformer").macs_per_run * 2 == _fixture("transformer-f25-256x384.json")["torch"]["flops"]


def test_i2v_batch_encodes_one_image_per_prompt():
    r = _i2v(Settings(batch_size=2, num_images_per_prompt=3, steps=4, guidance_scale=1.0))
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 24, "vae.decode": 6}


def test_i2v_takes_no_strength():
    with pytest.raises(OptionError, match="--strength does not apply to LTXImageToVideoPipeline"):
        _i2v(Settings(strength=0.5))


# --------------------------------------------------------------------------- LTXConditionPipeline (0.9.7)

DEV = Card("ltx-video-0.9.7-dev")
UPSCALER = Card("ltxv-spatial-upscaler-0.9.7")


def test_condition_pipeline_defaults_are_text_to_video_on_256_tokens():
    r = flopcalc.estimate(DEV.name)
    s = r.settings
    assert r.pipeline == "LTXConditionPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (512, 704, 161, 50, 3.0, 256)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    t = r.component("transformer")
    assert "timestep_tokens" not in t.shape and t.shape["text_len"] == 256
    fixture = json.loads((FIXTURES / "ltx-video-0.9.7-dev/transformer-512x704.json").read_text())
    assert fixture["inputs"]["timestep"] == [1] and fixture["inputs"]["encoder_hidden_states"][1] == 256
    assert t.macs_per_run * 2 == fixture["torch"]["flops"]
    assert any("no conditioning items (the __call__ default)" in n for n in r.notes)
    with pytest.raises(OptionError, match="--strength does not apply to LTXConditionPipeline"):
        flopcalc.estimate(DEV.name, strength=0.5)


def test_condition_items_encode_once_each_and_add_tokens_away_from_frame_0():
    """An image at frame 0 blends into the first latent frame (no token); a 49-frame video at frame 80 of 121
    is trimmed to 41 frames (min(49, 121 − 80), 8k + 1) and appends its first 2 latent frames as tokens; every
    token then gets a timestep."""
    r = flopcalc.estimate(DEV.name, conditions=[(1, 0), (49, 80)], num_frames=121)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
    encode = r.component("vae", "encode")
    assert len(encode.tree.children) == 2 and "1 run(s) of 2 piece shapes" in encode.why
    assert "conditioning image #1 (frame_index 0)" in encode.why and "conditioning video #2 (frame_index 80)" in encode.why
    t = r.component("transformer").shape
    latent = 16 * 16 * 22
    assert t["reference_tokens"] == 2 * 16 * 22 and t["timestep_tokens"] == latent + 2 * 16 * 22
    image_only = flopcalc.estimate(DEV.name, conditions=[(1, 0)])
    assert image_only.component("transformer").shape["timestep_tokens"] == 21 * 16 * 22
    assert "reference_tokens" not in image_only.component("transformer").shape
    assert image_only.component("vae", "encode").shape["frames"] == 1
    at_5 = flopcalc.estimate(DEV.name, conditions=[(1, 5)])
    assert at_5.component("transformer").shape["reference_tokens"] == 16 * 22


def test_condition_items_are_checked():
    with pytest.raises(ResolutionError, match="lies past the 161 generated frames"):
        flopcalc.estimate(DEV.name, conditions=[(9, 161)])
    # a 9-frame video at frame 157 of 161 is trimmed to min(9, 4) → 1 frame: an image's one latent frame of tokens
    r = flopcalc.estimate(DEV.name, conditions=[(9, 157)])
    assert r.component("transformer").shape["reference_tokens"] == 16 * 22
    assert r.component("vae", "encode").shape["frames"] == 1
    with pytest.raises(OptionError, match="--condition is FRAMES@INDEX with a count >= 1"):
        flopcalc.estimate(DEV.name, conditions=[(0, 0)])
    with pytest.raises(OptionError, match="--condition does not apply to LTXPipeline"):
        flopcalc.estimate("ltx-video", conditions=[(1, 0)])


# --------------------------------------------------------------------------- LTXLatentUpsamplePipeline


def test_upsample_pipeline_encodes_upsamples_and_decodes_at_twice_the_size():
    r = flopcalc.estimate(UPSCALER.name)
    s = r.settings
    assert r.pipeline == "LTXLatentUpsamplePipeline"
    assert (s.height, s.width, s.num_frames) == (512, 704, 161)
    assert runs_by_call(r) == {"vae.encode": 1, "latent_upsampler.forward": 1, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 512, "width": 704, "frames": 161}
    assert r.component("latent_upsampler").shape == {"latent_height": 16, "latent_width": 22, "latent_frames": 21}
    assert r.component("vae", "decode").shape == {"latent_height": 32, "latent_width": 44, "latent_frames": 21}
    fixture = json.loads((FIXTURES / "ltxv-spatial-upscaler-0.9.7/latent_upsampler-512x704.json").read_text())
    assert fixture["inputs"]["hidden_states"] == [1, 128, 21, 16, 22]
    assert r.component("latent_upsampler").macs_per_run * 2 == fixture["torch"]["flops"]
    assert any("the output is 1024×1408" in n for n in r.notes)


def test_upsample_pipeline_ignores_denoising_options_and_batches_videos():
    r = flopcalc.estimate(UPSCALER.name, steps=4, guidance_scale=2.0, batch_size=2)
    assert runs_by_call(r) == {"vae.encode": 2, "latent_upsampler.forward": 2, "vae.decode": 2}
    assert r.flops == 2 * flopcalc.estimate(UPSCALER.name).flops
    assert any("steps, guidance_scale ignored" in n for n in r.notes)
    with pytest.raises(OptionError, match="--strength does not apply to LTXLatentUpsamplePipeline"):
        flopcalc.estimate(UPSCALER.name, strength=0.5)
    with pytest.raises(OptionError):
        flopcalc.estimate(UPSCALER.name, max_sequence_length=64)


def test_a_temporal_upsampler_doubles_the_latent_frames_less_one():
    components = {**UPSCALER.components(), "latent_upsampler": {**UPSCALER.config("latent_upsampler"),
                                                                "temporal_upsample": True}}
    r = estimate_configs(UPSCALER.index(), components, Settings(num_frames=25))
    assert r.component("vae", "decode").shape["latent_frames"] == 2 * 4 - 1
