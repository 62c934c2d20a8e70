"""HunyuanVideo15Pipeline semantics (diffusers ``pipelines/hunyuan_video1_5/pipeline_hunyuan_video1_5.py``)
and the HunyuanVideo 1.5 transformer's closed form. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.api import estimate_configs
from flopcalc.errors import ConfigError, OptionError, ResolutionError
from flopcalc.pipelines import Settings
from flopcalc.pipelines.hunyuan_video15 import crop_sizes, default_size
from flopcalc.registry import RunShape, assemble

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "model_cards/hunyuanvideo-1.5-480p"
INDEX = json.loads((FOLDER / "model_index.json").read_text())
TRANSFORMER = json.loads((FOLDER / "transformer/config.json").read_text())


def _plan(settings: Settings, index: dict | None = None, **overrides):
    return estimate_configs(index or INDEX, {"transformer": {**TRANSFORMER, **overrides}}, settings)


def test_defaults_480x848_121_frames_50_steps_cfg():
    r = flopcalc.estimate(str(FOLDER))
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps) == (480, 848, 121, 50)
    assert r.passes == 2  # ClassifierFreeGuidance, class default 7.5
    t = r.component("transformer")
    assert t.runs == 100
    assert t.shape == {"latent_height": 30, "latent_width": 53, "latent_frames": 31, "text_len": 1000,
                       "text_len_2": 256, "image_tokens": 729}
    vae = r.component("vae")
    assert vae.runs == 1 and vae.call == "decode"
    assert vae.shape == {"latent_height": 30, "latent_width": 53, "latent_frames": 31}
    assert any("text_encoder (Qwen2_5_VLTextModel)" in n and "not there" in n for n in r.notes)
    assert any("ClassifierFreeGuidance" in n and "not read" in n for n in r.notes)


def test_guidance_one_disables_cfg_and_no_guider_means_one_pass():
    assert _plan(Settings(guidance_scale=1.0)).passes == 1
    bare = {k: v for k, v in INDEX.items() if k != "guider"}
    r = _plan(Settings(guidance_scale=6.0, negative_prompt=True), index=bare)
    assert r.passes == 1
    assert any("guidance_scale is ignored" in n for n in r.notes)


def test_frames_size_and_batch():
    r = _plan(Settings(height=720, width=1280, num_frames=33, batch_size=2, steps=10))
    t = r.component("transformer")
    assert t.runs == 10 * 2 * 2
    assert (t.shape["latent_frames"], t.shape["latent_height"], t.shape["latent_width"]) == (9, 45, 80)


def test_sizes_are_checked():
    with pytest.raises(ResolutionError):
        _plan(Settings(height=480, width=850))
    with pytest.raises(ResolutionError, match="both"):
        _plan(Settings(height=480))
    with pytest.raises(OptionError):
        _plan(Settings(max_sequence_length=100))


def test_default_bucket():
    """``generate_crop_size_list(640, 16)`` keeps buckets of at most 4:1; 16:9 picks 480 × 848."""
    assert default_size(640, 16) == (480, 848)
    assert all(max(a, b) / min(a, b) <= 4 for a, b in crop_sizes(640, 16))


def test_closed_form():
    d, h, hd = 2048, 16, 128
    m = 4 * d
    n, t1, t2, t3 = 31 * 30 * 53, 1000, 256, 729
    t = t1 + t2 + t3
    tree = assemble(TRANSFORMER, RunShape(latent_height=30, latent_width=53, latent_frames=31, text_len=t1,
                                          text_len_2=t2, image_tokens=t3), component="transformer")
    dual = 12 * d * d + 4 * (n + t) * d * d + 2 * h * (n + t) ** 2 * hd + 2 * (n + t) * d * m
    refiner = 12 * t1 * d * d + 2 * h * t1 ** 2 * hd + 2 * d * d
    context = 256 * d + d * d + 3584 * d + d * d + t1 * 3584 * d  # time_text_embed, proj_in
    byt5 = t2 * (1472 * 2048 + 2048 * 2048 + 2048 * d)
    image = t3 * (1152 * 1152 + 1152 * d)
    expected = (54 * dual + 2 * refiner + context + byt5 + image + 256 * d + d * d  # time_embed
                + n * 65 * d + 2 * d * d + n * d * 32)  # x_embedder, norm_out, proj_out
    assert tree.total.macs("torch") == expected
    assert tree.total.params == 8_326_608_160


def test_vae_frames_and_refusals():
    """Decode 31 latent frames to 121 (two temporal upsamples: F → 2F − 1); encode 121 → 31; a resampler
    whose channels the pixel shuffle cannot reshape is refused."""
    vae = json.loads((FOLDER / "vae/config.json").read_text())
    dec = assemble(vae, RunShape(latent_height=30, latent_width=53, latent_frames=31), component="vae", call="decode")
    assert dec.find("decoder.conv_out.conv") is not None
    enc = assemble(vae, RunShape(height=480, width=848, frames=121), component="vae", call="encode")
    # conv_out on the 31 × 30 × 53 latent grid: 27 · 1024 · 64 MACs per position
    assert enc.find("encoder.conv_out.conv").total.macs("torch") == 27 * 1024 * 64 * 31 * 30 * 53
    with pytest.raises(ConfigError, match="resampler"):
        assemble({**vae, "block_out_channels": [32, 256, 512, 1024, 1024]}, RunShape(height=64, width=64, frames=5),
                 component="vae", call="encode")
    with pytest.raises(ConfigError, match="levels"):
        assemble({**vae, "spatial_compression_ratio": 32}, RunShape(latent_height=2, latent_width=2, latent_frames=2),
                 component="vae", call="decode")


def test_refuses_a_config_the_real_class_cannot_run():
    with pytest.raises(ConfigError, match="qk_norm"):
        assemble({**TRANSFORMER, "qk_norm": None}, RunShape(latent_height=2, latent_width=2, latent_frames=1,
                                                             text_len=2, text_len_2=2, image_tokens=2),
                 component="transformer")


def test_image_to_video_snaps_to_the_image_bucket_and_encodes_one_frame():
    i2v = {**INDEX, "_class_name": "HunyuanVideo15ImageToVideoPipeline"}
    vae = json.loads((FOLDER / "vae/config.json").read_text())
    r = estimate_configs(i2v, {"transformer": TRANSFORMER, "vae": vae}, Settings(height=1024, width=768))
    assert (r.settings.height, r.settings.width) == default_size(640, 16, 1024, 768)
    assert {(c.component, c.call): c.runs for c in r.components} == {
        ("transformer", "forward"): 100, ("vae", "encode"): 1, ("vae", "decode"): 1}
    assert r.component("vae", "encode").shape == {"height": r.settings.height, "width": r.settings.width, "frames": 1}
    assert any("SiglipVisionModel" in n and "not counted" in n for n in r.notes)
