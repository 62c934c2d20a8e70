"""ModelScope text-to-video (``TextToVideoSDPipeline``, ``VideoToVideoSDPipeline``, deprecated in diffusers 0.42.1
but exported) hand-checked against their ``__call__``s, and the ``UNet3DConditionModel`` formula's structure. No
torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from card_support import Card, runs_by_call

import flopcalc
from flopcalc.engine.errors import ConfigError, OptionError
from flopcalc.engine.registry import RunShape, assemble

MS = Card("modelscope-t2v-1.7b")


def _folder(tmp_path: Path, pipeline: str, **unet) -> Path:
    for name, cfg in MS.components().items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({**cfg, **unet} if name == "unet" else cfg))
    (tmp_path / "model_index.json").write_text(json.dumps({**MS.index(), "_class_name": pipeline}))
    return tmp_path


def test_defaults_as_the_pipeline_runs_them():
    # pipeline_text_to_video_synth.py:452: 16 frames, 50 steps, guidance 9.0; sample_size 32 × 8 = 256
    r = flopcalc.estimate("modelscope-t2v-1.7b")
    s = r.settings
    assert r.pipeline == "TextToVideoSDPipeline"
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale) == (256, 256, 16, 50, 9.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "unet.forward": 100, "vae.decode": 16}
    assert r.component("unet").shape == {"latent_height": 32, "latent_width": 32, "text_len": 77,
                                         "latent_frames": 16}


def test_mlenergy_v2_setting_and_batch():
    # ML.ENERGY v2: 25 steps, 16 frames, default size and guidance; batches up to 16
    r = flopcalc.estimate("modelscope-t2v-1.7b", steps=25, num_frames=16, batch_size=16)
    assert runs_by_call(r) == {"text_encoder.forward": 32, "unet.forward": 25 * 2 * 16, "vae.decode": 16 * 16}


def test_refusals_and_overrides():
    with pytest.raises(OptionError, match="--strength does not apply to TextToVideoSDPipeline"):
        flopcalc.estimate("modelscope-t2v-1.7b", strength=0.5)
    r = flopcalc.estimate("modelscope-t2v-1.7b", num_images_per_prompt=2, guidance_scale=1.0)
    assert r.passes == 1 and runs_by_call(r)["unet.forward"] == 50
    assert any("num_videos_per_prompt 2 is ignored" in n for n in r.notes)


def test_no_sample_size_needs_a_size(tmp_path):
    folder = _folder(tmp_path, "TextToVideoSDPipeline", sample_size=None)
    with pytest.raises(ConfigError, match="--height and --width"):
        flopcalc.estimate(str(folder))
    assert flopcalc.estimate(str(folder), height=128, width=128).settings.height == 128


def test_video_to_video(tmp_path):
    # pipeline_text_to_video_synth_img2img.py: strength 0.6 (int(50 · 0.6) = 30 steps), guidance 15.0, every input
    # frame encoded (one vae.encode of B·F frames)
    r = flopcalc.estimate(str(_folder(tmp_path, "VideoToVideoSDPipeline")), num_frames=24)
    assert (r.settings.strength, r.settings.guidance_scale) == (0.6, 15.0)
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 24, "unet.forward": 60, "vae.decode": 24}


def test_2d_layers_per_frame_and_the_temporal_layers():
    # the UNet folds the frames into its batch: everything but the time embedding and the temporal layers is
    # the same count for each frame
    cfg = MS.config("unet")

    def tree(frames):
        return assemble(cfg, RunShape(latent_height=24, latent_width=40, text_len=77, latent_frames=frames),
                        component="unet")

    def split(t):
        temporal = sum(n.total.macs() for _, n in t.walk()
                       if n.formula in ("temporal_transformer", "temporal_conv"))
        return temporal, t.total.macs() - temporal - t.find("time_embedding").total.macs()

    (t1, s1), (t5, s5) = split(tree(1)), split(tree(5))
    assert s5 == 5 * s1
    # temporal convs are linear in F; temporal attention adds an F² term
    temporal_kinds = {n.formula for _, n in tree(2).walk()} & {"temporal_transformer", "temporal_conv"}
    assert temporal_kinds == {"temporal_transformer", "temporal_conv"} and t5 > 5 * t1
