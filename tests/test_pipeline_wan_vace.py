"""WanVACEPipeline semantics (diffusers ``pipelines/wan/pipeline_wan_vace.py``) with the Wan2.1-VACE-1.3B
transformer on the Wan2.1-T2V-1.3B card's VAE and UMT5: the __call__ defaults (a zero video and an all-ones
mask: two encodes), the VACE branch every forward, one video only. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import OptionError
from flopcalc.engine.pipelines import Settings

from card_support import Card, runs_by_call

REPO = Path(__file__).resolve().parent.parent
WAN = Card("wan2.1-t2v-1.3b")
VACE = json.loads((REPO / "validation/configs/wan2.1-vace-1.3b-transformer/config.json").read_text())
FIXTURE = REPO / "validation/fixtures/wan2.1-vace-1.3b-transformer/transformer-480x832.json"


def _plan(settings: Settings):
    return estimate_configs({**WAN.index(), "_class_name": "WanVACEPipeline"},
                            {**WAN.components(), "transformer": VACE}, settings)


def test_defaults_encode_the_inactive_and_reactive_videos_and_run_the_vace_branch():
    r = _plan(Settings())
    s = r.settings
    assert r.pipeline == "WanVACEPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (480, 832, 81, 50, 5.0, 512)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 832, "frames": 81}
    t = r.component("transformer")
    assert t.shape == {"latent_height": 60, "latent_width": 104, "latent_frames": 21, "text_len": 512}
    fixture = json.loads(FIXTURE.read_text())
    assert fixture["inputs"]["control_hidden_states"] == [1, 96, 21, 60, 104]
    assert t.macs_per_run * 2 == fixture["torch"]["flops"]
    assert t.tree.find("vace_blocks.0.proj_in") is not None and t.tree.find("vace_blocks.1.proj_in") is None


def test_frames_round_and_guidance_one_runs_one_pass():
    r = _plan(Settings(num_frames=79, guidance_scale=1.0, steps=10))  # 79 // 4 · 4 + 1
    assert r.settings.num_frames == 77 and r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 1, "vae.encode": 2, "transformer.forward": 10, "vae.decode": 1}


def test_one_video_only_and_no_strength():
    for settings in (Settings(batch_size=2), Settings(num_images_per_prompt=2)):
        with pytest.raises(OptionError, match="generates one video"):
            _plan(settings)
    with pytest.raises(OptionError, match="--strength does not apply to WanVACEPipeline"):
        _plan(Settings(strength=0.5))
