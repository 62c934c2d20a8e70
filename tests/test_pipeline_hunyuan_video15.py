"""HunyuanVideo15Pipeline semantics (diffusers ``pipelines/hunyuan_video1_5/pipeline_hunyuan_video1_5.py``)
and the HunyuanVideo 1.5 transformer's closed form. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import flopcalc
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.hunyuan_video15 import crop_sizes, default_size
from flopcalc.engine.registry import RunShape, assemble

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
    te = r.component("text_encoder")  # Qwen2.5-VL-7B's language model: prompt and negative, 1000 + 108 tokens
    assert (te.class_name, te.runs, te.shape) == ("Qwen2_5_VLTextModel", 2, {"seq_len": 1108})
    assert te.tree.find("lm_head") is None and te.tree.find("layers") is not None
    assert any("ClassifierFreeGuidance" in n and "not read" in n for n in r.notes)
    assert "text_encoder_2" not in {c.component for c in r.components}  # byT5: no quoted text by default
    assert any("byT5" in n and "none assumed" in n for n in r.notes)


def test_glyph_prompts_run_byt5_on_256_tokens_per_prompt_with_quoted_text():
    """``_get_byt5_prompt_embeds`` (pipeline_hunyuan_video1_5.py:289-331): one batch-1 forward per prompt with
    quoted text, padded to ``tokenizer_2_max_length`` 256; the transformer's shapes do not change."""
    r = flopcalc.estimate(str(FOLDER), batch_size=2, glyph_prompts=1, steps=2, num_frames=5)
    glyph = r.component("text_encoder_2")
    assert (glyph.class_name, glyph.runs, glyph.shape) == ("T5EncoderModel", 1, {"seq_len": 256})
    assert r.component("text_encoder").runs == 4
    assert r.component("transformer").shape["text_len_2"] == 256
    with pytest.raises(OptionError, match="more than the batch"):
        flopcalc.estimate(str(FOLDER), glyph_prompts=2)


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
    assert any("image_encoder is absent" in n for n in r.notes)


def test_image_to_video_encodes_the_image_with_siglip_once():
    """``encode_image`` (pipeline_hunyuan_video1_5_image2video.py:404-419, called at line 776): the SigLIP
    ``image_encoder`` (FLUX.1-Redux-dev's so400m-patch14-384 in the original release) once per call on the
    feature extractor's 384² pixels; its 729 states are the transformer's image tokens."""
    i2v = {**INDEX, "_class_name": "HunyuanVideo15ImageToVideoPipeline",
           "image_encoder": ["transformers", "SiglipVisionModel"],
           "feature_extractor": ["transformers", "SiglipImageProcessor"]}
    siglip = json.loads((REPO / "validation/configs/flux1-redux-dev/image_encoder/config.json").read_text())
    r = estimate_configs(i2v, {"transformer": TRANSFORMER, "image_encoder": siglip}, Settings(batch_size=2))
    enc = r.component("image_encoder")
    assert (enc.class_name, enc.runs, enc.shape) == ("SiglipVisionModel", 1,
                                                     {"seq_len": 729, "height": 384, "width": 384})
    assert r.component("transformer").shape["image_tokens"] == 729
    small = {**siglip, "image_size": 224}  # 16² = 256 patches: the transformer embeds what the encoder gives
    r = estimate_configs(i2v, {"transformer": TRANSFORMER, "image_encoder": small}, Settings())
    assert r.component("transformer").shape["image_tokens"] == 256
    assert not any("image_encoder is absent" in n for n in r.notes)


def test_image_to_video_card_defaults():
    """Card hunyuanvideo-1.5-480p-i2v: the text-to-video card's components plus FLUX.1-Redux-dev's SigLIP; 16:9
    without an image size; the bucket is a step function of the image's size, so no law."""
    from flopcalc.flops.symbolic import symbolic_estimate

    r = flopcalc.estimate("hunyuanvideo-1.5-480p-i2v")
    assert r.pipeline == "HunyuanVideo15ImageToVideoPipeline"
    assert (r.settings.height, r.settings.width, r.settings.num_frames) == (480, 848, 121)
    assert {(c.component, c.call): c.runs for c in r.components} == {
        ("image_encoder", "forward"): 1, ("text_encoder", "forward"): 2, ("transformer", "forward"): 100,
        ("vae", "encode"): 1, ("vae", "decode"): 1}
    assert r.component("image_encoder").shape == {"seq_len": 729, "height": 384, "width": 384}
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate("hunyuanvideo-1.5-480p-i2v")



@pytest.mark.parametrize("height,width,frames", [(320, 320, 9), (288, 512, 5)])
def test_tiled_decode_is_what_the_real_vae_counts_with_tiling_on(height, width, frames):
    """``--vae-tiling``: the decode on overlapping 16-latent tiles every 12, each with all its frames, equals
    FlopCounterMode on the real AutoencoderKLHunyuanVideo15 after ``enable_tiling()`` (the card's config, meta)."""
    pytest.importorskip("diffusers")
    from flopcalc.engine.measure.harness import measure_component

    measured = measure_component(REPO / "model_cards" / "hunyuanvideo-1.5-480p" / "vae", "AutoencoderKLHunyuanVideo15",
                                 settings={"height": height, "width": width, "num_frames": frames, "vae_tiling": 1},
                                 call="decode")
    r = flopcalc.estimate("hunyuanvideo-1.5-480p", height=height, width=width, num_frames=frames, vae_tiling=True)
    decode = r.component("vae", "decode")
    assert 2 * decode.macs == measured["torch"]["flops"]
    assert any("tiled decode" in n for n in r.notes)
    whole = flopcalc.estimate("hunyuanvideo-1.5-480p", height=height, width=width, num_frames=frames)
    assert whole.component("vae", "decode").macs < decode.macs  # the overlaps are decoded twice


def test_vae_tiling_refusals():
    with pytest.raises(OptionError, match="tiled encode"):
        flopcalc.estimate("hunyuanvideo-1.5-480p", vae_tiling=True, strength=0.5)
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="closed-form"):
        symbolic_estimate("hunyuanvideo-1.5-480p", vae_tiling=True)
    with pytest.raises(OptionError):
        flopcalc.estimate("hunyuanvideo-1.5-480p-i2v", vae_tiling=True)
    fits_one_tile = flopcalc.estimate("hunyuanvideo-1.5-480p", height=256, width=256, num_frames=5, vae_tiling=True)
    assert any("fits one tile" in n for n in fits_one_tile.notes)
