"""SANA-Video pipelines (diffusers ``pipelines/sana_video/``): ``SanaVideoPipeline`` and ``SanaImageToVideoPipeline``
on the bundled 2B 480p card: defaults, resolution binning (diffusers' own tables), the per-token timestep of
image-to-video, refusals, the block's closed form, the fixtures; and each plan against the real ``__call__`` on
tiny random components (skipped without torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.sana_video import ASPECT_RATIO_BINS, binned_size
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

CARD = "sana-video-2b-480p"


def _plan(settings: Settings, *, index: dict | None = None, **overrides):
    source = resolve(CARD)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    return estimate_configs({**source.model_index, **(index or {})}, components, settings)


def _i2v(settings: Settings, **overrides):
    return _plan(settings, index={"_class_name": "SanaImageToVideoPipeline"}, **overrides)


def test_text_to_video_defaults():
    r = flopcalc.estimate(CARD)
    s = r.settings
    # pipeline_sana_video.py:714-742
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (480, 832, 81, 50, 6.0, 300)
    assert r.pipeline == "SanaVideoPipeline" and r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 100, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 60, "latent_width": 104, "text_len": 300,
                                                "latent_frames": 21}
    assert r.component("text_encoder").shape == {"seq_len": 300}
    assert any("complex human instruction" in n for n in r.notes)


def test_block_closed_form():
    """4 N D² + h N d (2d + 1) + 2 N D D_c + 2 T D D_c + 2 h_c N T d_c + N (3 f D + 18 f + 3 D²), f = ⌊3 D⌋."""
    r = flopcalc.estimate(CARD, height=256, width=512, num_frames=9, max_sequence_length=64,
                          resolution_binning=False)
    block = r.component("transformer").tree.find("transformer_blocks.0")
    d, h, dh, t, f = 2240, 20, 112, 64, 3 * 2240
    n = 3 * 16 * 32
    expected = 4 * n * d * d + h * n * dh * (2 * dh + 1) + 2 * n * d * d + 2 * t * d * d + 2 * h * n * t * dh \
        + n * (3 * f * d + 18 * f + 3 * d * d)
    assert block.per_item.macs("torch") == expected


def test_bins_are_diffusers_tables():
    pytest.importorskip("torch")
    sana_video = pytest.importorskip("diffusers.pipelines.sana_video.pipeline_sana_video")
    for size, table in ((30, sana_video.ASPECT_RATIO_480_BIN), (22, sana_video.ASPECT_RATIO_720_BIN)):
        assert ASPECT_RATIO_BINS[size] == {k: (int(h), int(w)) for k, (h, w) in table.items()}


def test_resolution_binning():
    assert binned_size(720, 1280, 30, "p") == (480, 832) and binned_size(720, 1280, 22, "p") == (704, 1280)
    r = flopcalc.estimate(CARD, height=448, width=900)
    assert (r.settings.height, r.settings.width) == (448, 896)
    assert any("resolution binning: 448×900" in n for n in r.notes)
    # the square bin is 624×624, which check_inputs refuses after binning (as diffusers' call fails)
    with pytest.raises(ResolutionError, match="resolution bin 624×624"):
        flopcalc.estimate(CARD, height=512, width=512)
    r = flopcalc.estimate(CARD, height=512, width=512, resolution_binning=False)
    assert r.component("transformer").shape["latent_height"] == 64
    with pytest.raises(FlopcalcError, match="sample_size 32"):
        _plan(Settings(), transformer={"sample_size": 32})
    with pytest.raises(ResolutionError, match="multiple of 32"):
        flopcalc.estimate(CARD, height=496, width=832, resolution_binning=False)


def test_frames_and_guidance():
    r = flopcalc.estimate(CARD, num_frames=33, guidance_scale=1.0, steps=10, batch_size=2, num_images_per_prompt=3)
    assert r.passes == 1
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 10 * 6, "vae.decode": 6}
    assert r.component("transformer").shape["latent_frames"] == 9
    assert flopcalc.estimate(CARD, num_frames=34).component("transformer").shape["latent_frames"] == 9


def test_image_to_video_plan():
    r = _i2v(Settings(num_frames=17, steps=4))
    assert r.pipeline == "SanaImageToVideoPipeline"
    assert runs_by_call(r) == {"text_encoder.forward": 2, "vae.encode": 1, "transformer.forward": 8, "vae.decode": 1}
    assert r.component("vae", "encode").shape == {"height": 480, "width": 832, "frames": 1}
    shape = r.component("transformer").shape
    assert shape["timestep_tokens"] == 5 * 30 * 52
    t2v = _plan(Settings(num_frames=17, steps=4))
    d, n = 2240, 5 * 30 * 52
    diff = (r.component("transformer").tree.find("time_embed").per_item.macs("torch")
            - t2v.component("transformer").tree.find("time_embed").per_item.macs("torch"))
    assert diff == (n - 1) * (256 * d + d * d + 6 * d * d)
    assert r.component("transformer").macs_per_run - t2v.component("transformer").macs_per_run == diff


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to SanaVideoPipeline"):
        flopcalc.estimate(CARD, strength=0.5)
    with pytest.raises(OptionError, match="--strength does not apply to SanaImageToVideoPipeline"):
        _i2v(Settings(strength=0.5))
    with pytest.raises(OptionError, match="num_videos_per_prompt > 1 fails"):
        _i2v(Settings(num_images_per_prompt=2))
    with pytest.raises(ConfigError, match="not square"):
        _i2v(Settings(), transformer={"patch_size": [1, 2, 1]})
    with pytest.raises(ConfigError, match="guidance_embeds"):
        _plan(Settings(), transformer={"guidance_embeds": True})
    with pytest.raises(ConfigError, match="cross_attention_dim 1024 is not the model width"):
        _plan(Settings(), transformer={"cross_attention_dim": 1024})
    with pytest.raises(ConfigError, match="AutoencoderDC"):
        _plan(Settings(), vae={"_class_name": "AutoencoderDC"})


def test_symbolic_law_at_its_sizes():
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(CARD)
    for h, w, f in ((480, 832, 81), (256, 512, 17)):
        exact = flopcalc.estimate(CARD, height=h, width=w, num_frames=f, resolution_binning=False)
        assert law.at(**{**law.representative(), "H": h, "W": w, "F": f}) == exact.flops


@pytest.mark.parametrize("path", fixtures(CARD), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


def _components(vcs, in_channels: int = 4):
    import torch
    from diffusers import AutoencoderKLWan, SanaVideoTransformer3DModel
    from transformers import Gemma2Config, Gemma2Model

    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": Gemma2Model(Gemma2Config(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                                 num_key_value_heads=1, head_dim=8, num_hidden_layers=1,
                                                 vocab_size=50)),
        "transformer": SanaVideoTransformer3DModel(
            in_channels=in_channels, out_channels=in_channels, num_attention_heads=2, attention_head_dim=12,
            num_layers=1, num_cross_attention_heads=2, cross_attention_head_dim=12, cross_attention_dim=24,
            caption_channels=16, mlp_ratio=2.0, rope_max_seq_len=64),
        "vae": AutoencoderKLWan(base_dim=8, z_dim=in_channels, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                latents_mean=[0.0] * in_channels, latents_std=[1.0] * in_channels),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"])
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    return models, configs, rec


@pytest.mark.parametrize("image", [False, True], ids=["t2v", "i2v"])
def test_plan_is_the_real_call(rng, image):
    vcs = pytest.importorskip("video_call_support")
    import torch
    from diffusers import DPMSolverMultistepScheduler, FlowMatchEulerDiscreteScheduler
    from diffusers import SanaImageToVideoPipeline, SanaVideoPipeline

    models, configs, rec = _components(vcs)
    cls = SanaImageToVideoPipeline if image else SanaVideoPipeline
    scheduler = FlowMatchEulerDiscreteScheduler() if image else DPMSolverMultistepScheduler()
    pipe = cls(tokenizer=vcs.Tokenizer(encode_length=7), scheduler=scheduler, **models)
    h, w = rng.choice([(32, 64), (64, 32), (32, 32)])
    frames, steps, guidance = rng.choice([1, 5, 6]), rng.randint(1, 2), rng.choice([1.0, 6.0])
    length, batch = rng.choice([8, 20]), rng.randint(1, 2)
    extra = {"image": torch.rand(1, 3, h, w)} if image else {"num_videos_per_prompt": 3 - batch}
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, height=h, width=w, frames=frames, num_inference_steps=steps,
             guidance_scale=guidance, max_sequence_length=length, use_resolution_binning=False, output_type="pt",
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31), **extra)
    settings = Settings(height=h, width=w, num_frames=frames, steps=steps, guidance_scale=guidance,
                        max_sequence_length=length, batch_size=batch, resolution_binning=False,
                        num_images_per_prompt=extra.get("num_videos_per_prompt", 1))
    index = {"_class_name": cls.__name__, **{name: ["x", "y"] for name in configs}}
    report = estimate_configs(index, configs, settings)
    where = f"seed {vcs.SEED}: {cls.__name__} {h}×{w}×{frames}, {steps} steps, guidance {guidance}, L={length}"
    assert vcs.planned_runs(report) == dict(rec.calls), where
    passes = 2 if guidance > 1 else 1
    lat = ((frames - 1) // 4 + 1, h // 8, w // 8)
    assert rec.shapes["transformer"] == {(4, *lat)} and rec.shapes["vae.decode"] == {(4, *lat)}, where
    # the prompt carries the complex human instruction (7 tokens here: L + 5), the negative prompt does not
    assert rec.shapes["text_encoder"] == ({(length + 5,), (length,)} if passes == 2 else {(length + 5,)}), where
    assert report.component("text_encoder").shape == {"seq_len": length}
    run = report.component("transformer").shape
    assert (run["latent_frames"], run["latent_height"], run["latent_width"], run["text_len"]) == (*lat, length)
    timesteps = {call["timestep"] for call in rec.inputs["transformer"]}
    if image:
        assert rec.shapes["vae.encode"] == {(3, 1, h, w)}, where
        assert timesteps == {(passes * batch, 1, lat[0], lat[1] // 2, lat[2] // 2)}, where
        assert run["timestep_tokens"] == lat[0] * (lat[1] // 2) * (lat[2] // 2)
    else:
        assert timesteps == {(passes * batch * settings.num_images_per_prompt,)}, where
        assert "timestep_tokens" not in run
