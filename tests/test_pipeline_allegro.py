"""Allegro (diffusers ``AllegroPipeline``) on the bundled card: defaults, latent frames, the tiled decode's tile count,
the closed forms, refusals, the fixtures; and the plan against the real ``__call__`` on tiny random components
(skipped without torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.allegro import latent_frames
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

CARD = "allegro"


def _plan(settings: Settings, **overrides):
    source = resolve(CARD)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    return estimate_configs(dict(source.model_index), components, settings)


def test_defaults():
    r = flopcalc.estimate(CARD)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (720, 1280, 88, 100, 7.5, 512)
    assert r.pipeline == "AllegroPipeline" and r.passes == 2
    assert runs_by_call(r) == {"transformer.forward": 200, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 90, "latent_width": 160, "text_len": 512,
                                                "latent_frames": 22}
    assert any(n.startswith("text_encoder (T5EncoderModel)") for n in r.notes)
    assert any("75 tile(s)" in n for n in r.notes)


def test_latent_frames_and_tiles():
    assert [latent_frames(f, 4) for f in (88, 87, 89, 40, 1, 2)] == [22, 23, 23, 10, 1, 1]
    one = flopcalc.estimate(CARD, height=320, width=320, num_frames=24).component("vae")  # one 6×40×40 tile
    two = flopcalc.estimate(CARD, height=320, width=560, num_frames=24).component("vae")  # (70 − 40)//30 + 1 = 2
    none = flopcalc.estimate(CARD, height=320, width=320, num_frames=20).component("vae")  # 5 latent frames: no tile
    decoder = one.tree.find("decoder").total.macs("torch")
    assert two.tree.find("decoder").total.macs("torch") == 2 * decoder
    assert none.tree.find("decoder").total.macs("torch") == 0 and none.params == one.params
    # post_quant_conv (1×1, 4 → 4) on the whole latent
    assert one.tree.find("post_quant_conv").total.macs("torch") == 6 * 40 * 40 * 16


def test_block_closed_form():
    """4Nd² + 2hN²d_h + 2Nd² + 2Td² + 2hNTd_h + 8Nd² with N = T_lat·(h/2)(w/2)."""
    r = flopcalc.estimate(CARD, height=256, width=256, num_frames=8, max_sequence_length=64, steps=1)
    d, h, dh, n, t = 2304, 24, 96, 2 * 16 * 16, 64
    expected = 4 * n * d * d + 2 * h * n * n * dh + 2 * n * d * d + 2 * t * d * d + 2 * h * n * t * dh + 8 * n * d * d
    assert r.component("transformer").tree.find("transformer_blocks.0").per_item.macs("torch") == expected


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(CARD, strength=0.5)
    with pytest.raises(OptionError, match="batch-1 buffer"):
        flopcalc.estimate(CARD, batch_size=2)
    with pytest.raises(ResolutionError, match="multiple of 8"):
        flopcalc.estimate(CARD, height=364)
    with pytest.raises(ResolutionError, match="2×2 patches"):
        flopcalc.estimate(CARD, height=360)
    with pytest.raises(ConfigError, match="patch_size_t"):
        _plan(Settings(), transformer={"patch_size_t": 2})
    with pytest.raises(ConfigError, match="24-frame buffer"):
        _plan(Settings(), vae={"temporal_upsample_blocks": [False, True, False, False]})
    with pytest.raises(ConfigError, match="cross_attention_dim"):
        _plan(Settings(), transformer={"cross_attention_dim": 1024})
    r = flopcalc.estimate(CARD, num_images_per_prompt=3)
    assert runs_by_call(r)["vae.decode"] == 1 and any("forces num_videos_per_prompt" in n for n in r.notes)
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(CARD)


@pytest.mark.parametrize("path", fixtures(CARD), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


def test_plan_is_the_real_call(rng):
    """The real call up to the latent (``output_type="latent"``: the tiled VAE decode, measured by the fixtures and
    the live test, needs 160-pixel tiles even on tiny channels)."""
    vcs = pytest.importorskip("video_call_support")
    import torch
    from diffusers import AllegroPipeline, AllegroTransformer3DModel, AutoencoderKLAllegro, DDIMScheduler
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": T5EncoderModel(T5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                vocab_size=50)),
        "transformer": AllegroTransformer3DModel(num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                                 out_channels=4, num_layers=1, cross_attention_dim=24,
                                                 caption_channels=16, sample_height=4, sample_width=6, sample_frames=3),
        "vae": AutoencoderKLAllegro(block_out_channels=(8, 8, 8, 8), norm_num_groups=4, layers_per_block=1,
                                    sample_size=160),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    pipe = AllegroPipeline(tokenizer=vcs.Tokenizer(), scheduler=DDIMScheduler(), **models)
    frames = rng.choice([None, 5, 8, 9])
    h, w = rng.choice([(None, None), (32, 48), (48, 32)])
    guidance, length = rng.choice([1.0, 7.5]), rng.choice([4, 9])
    with torch.no_grad():
        pipe(prompt="a prompt", num_frames=frames, height=h, width=w, num_inference_steps=1, guidance_scale=guidance,
             max_sequence_length=length, clean_caption=False, output_type="latent",
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=1, guidance_scale=guidance,
                        max_sequence_length=length)
    index = {"_class_name": "AllegroPipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}×{frames}, guidance {guidance}, L={length}"
    planned = vcs.plan_runs(index, configs, settings)
    assert planned.pop("vae.decode") == 1
    assert planned == dict(rec.calls), where
    report = estimate_configs(index, configs, settings)
    s = report.settings
    lat = (latent_frames(s.num_frames, 4), s.height // 8, s.width // 8)
    assert (s.height, s.width, s.num_frames) == (h or 32, w or 48, frames or 12), where
    assert rec.shapes["transformer"] == {(4, *lat)} and rec.shapes["text_encoder"] == {(length,)}, where
