"""LTX-Video 0.9.5 (the card) and LTXImageToVideoPipeline semantics (diffusers
``pipelines/ltx/pipeline_ltx_image2video.py``): the image encoded as a one-frame video, one timestep per
packed token, the runs matching the measured fixtures' inputs. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.api import estimate_configs
from flopcalc.errors import OptionError
from flopcalc.pipelines import Settings

from card_support import Card

REPO = Path(__file__).resolve().parent.parent
CARD = Card("ltx-video-0.9.5")
I2V = REPO / "validation/configs/ltx-video-0.9.5-i2v"
FIXTURES = REPO / "validation/fixtures"


def _runs(report) -> dict[str, int]:
    return {f"{c.component}.{c.call}": c.runs for c in report.components}


def _i2v(settings: Settings):
    return estimate_configs({**CARD.index(), "_class_name": "LTXImageToVideoPipeline"}, CARD.components(), settings)


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / "ltx-video-0.9.5-i2v" / name).read_text())


def test_card_0_9_5_runs_ltx_pipeline_with_its_timestep_conditioned_vae():
    r = flopcalc.estimate(CARD.name)
    assert r.pipeline == "LTXPipeline"
    assert _runs(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
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
    assert _runs(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 100, "vae.decode": 1}
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
    assert _runs(r) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 24, "vae.decode": 6}


def test_i2v_takes_no_strength():
    with pytest.raises(OptionError, match="--strength does not apply to LTXImageToVideoPipeline"):
        _i2v(Settings(strength=0.5))
