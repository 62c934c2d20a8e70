"""Wan-Animate (diffusers ``WanAnimatePipeline``) on the bundled card: defaults, segments, the closed forms of the face
adapter, the face and motion encoders, refusals, the fixtures; and the plan against the real ``__call__`` on tiny
random components (skipped without torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.wan_animate import segment_count
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

CARD = "wan2.2-animate-14b"


def _plan(settings: Settings, *, drop: tuple[str, ...] = (), **overrides):
    source = resolve(CARD)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items() if k not in drop}
    return estimate_configs(dict(source.model_index), components, settings)


def test_defaults():
    r = flopcalc.estimate(CARD)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (720, 1280, 77, 20, 1.0, 512)
    assert r.pipeline == "WanAnimatePipeline" and r.passes == 1
    # the reference image, the pose segment and the conditioning segment: one report row of two shapes
    assert runs_by_call(r) == {"text_encoder.forward": 1, "image_encoder.forward": 1, "vae.encode": 1,
                               "transformer.forward": 20, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 90, "latent_width": 160, "text_len": 512,
                                                "latent_frames": 21, "frames": 77, "image_tokens": 257}
    assert r.component("vae", "decode").shape["latent_frames"] == 20


def test_segments():
    assert [segment_count(f, 77) for f in (2, 77, 78, 153, 154, 200)] == [1, 1, 2, 2, 3, 3]
    r = flopcalc.estimate(CARD, num_frames=154, guidance_scale=5.0, batch_size=2, steps=4)
    assert r.passes == 2
    runs = runs_by_call(r)
    assert runs["transformer.forward"] == 3 * 4 * 2 * 2 and runs["vae.decode"] == 3 * 2
    assert runs["text_encoder.forward"] == 4 and runs["image_encoder.forward"] == 1
    from flopcalc.engine.pipelines import plan

    source = resolve(CARD)
    encodes = [(r.shape.frames, r.runs) for r in plan(dict(source.model_index), dict(source.components),
                                                      Settings(num_frames=154, batch_size=2)).runs if r.call == "encode"]
    # the reference image once; per segment the pose video once and the conditioning video per video
    assert encodes == [(1, 1), (77, 3), (77, 6)]
    short = flopcalc.estimate(CARD, segment_frames=19, num_frames=40)  # 19: 5 latent frames, 18 new frames each
    assert short.component("transformer").shape["latent_frames"] == 6 and runs_by_call(short)["vae.decode"] == 3
    rounded = flopcalc.estimate(CARD, segment_frames=20)
    assert rounded.component("transformer").shape["frames"] == 21  # 20 // 4 · 4 + 1
    assert any("rounded to 21" in n for n in rounded.notes)


def test_closed_forms():
    """Face adapter: 2Nd² + 2T(k+1)d² + 2hN(k+1)d_h with T = 21 face frames, k + 1 = 5 tokens each. Face encoder:
    Conv1d 512 → 4·1024 (k 3) on 77 positions, two stride-2 Conv1d on 4·39 and 4·20, out_proj on 4·20."""
    r = flopcalc.estimate(CARD, height=256, width=256, steps=1)
    tree = r.component("transformer").tree
    d, h, dh, n = 5120, 40, 128, 21 * 16 * 16
    adapter = 2 * n * d * d + 2 * 21 * 5 * d * d + 2 * h * n * 5 * dh
    assert tree.find("face_adapter.0").per_item.macs("torch") == adapter
    assert tree.find("face_adapter").total.macs("torch") == 8 * adapter
    face = 77 * 4096 * 512 * 3 + 2 * (4 * 39 + 4 * 20) * 1024 * 1024 * 3 // 2 + 4 * 20 * 1024 * d
    assert tree.find("face_encoder").total.macs("torch") == face
    assert tree.find("pose_patch_embedding").total.macs("torch") == 20 * 16 * 16 * 16 * 4 * d
    motion = tree.find("motion_encoder")
    assert motion.total.macs("thop") == 0 and motion.total.macs("torch") % 77 == 0  # functional, per face frame


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(CARD, strength=0.5)
    with pytest.raises(OptionError, match="no segment"):
        flopcalc.estimate(CARD, num_frames=1)
    with pytest.raises(OptionError, match="no longer than the 1 conditioning"):
        flopcalc.estimate(CARD, segment_frames=1)
    with pytest.raises(FlopcalcError, match="no image_encoder config"):
        _plan(Settings(), drop=("image_encoder",))
    with pytest.raises(ConfigError, match="not a multiple of inject_face_latents_blocks"):
        _plan(Settings(), transformer={"num_layers": 7})
    with pytest.raises(ConfigError, match="2 × latent_channels \\+ 4"):
        _plan(Settings(), transformer={"in_channels": 40})
    with pytest.raises(OptionError, match="--segment-frames"):
        flopcalc.estimate("wan2.1-t2v-1.3b", segment_frames=17)
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(CARD)


@pytest.mark.parametrize("path", fixtures(CARD), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


def test_plan_is_the_real_call(rng):
    vcs = pytest.importorskip("video_call_support")
    import PIL.Image
    import torch
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanAnimatePipeline, WanAnimateTransformer3DModel
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel, UMT5Config, UMT5EncoderModel

    import diffusers.pipelines.wan.pipeline_wan_animate as module

    vcs.without_ftfy(module)
    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": UMT5EncoderModel(UMT5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                    vocab_size=50)),
        "image_encoder": CLIPVisionModel(CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                                          num_attention_heads=2, image_size=28, patch_size=14)),
        "transformer": WanAnimateTransformer3DModel(
            num_attention_heads=2, attention_head_dim=12, in_channels=12, latent_channels=4, out_channels=4,
            text_dim=16, freq_dim=16, ffn_dim=32, num_layers=2, image_dim=16, added_kv_proj_dim=24, rope_max_seq_len=64,
            motion_encoder_channel_sizes={"4": 8, "8": 8, "16": 8}, motion_encoder_size=16, motion_style_dim=8,
            motion_dim=4, motion_encoder_dim=8, face_encoder_hidden_dim=8, face_encoder_num_heads=2,
            inject_face_latents_blocks=rng.choice([1, 2])),
        "vae": AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                latents_mean=[0.0] * 4, latents_std=[1.0] * 4),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("image_encoder", models["image_encoder"], key="pixel_values")
    rec.forward("transformer", models["transformer"], key="hidden_states")
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    pipe = WanAnimatePipeline(tokenizer=vcs.Tokenizer(), scheduler=UniPCMultistepScheduler(),
                              image_processor=CLIPImageProcessor(size={"shortest_edge": 28},
                                                                 crop_size={"height": 28, "width": 28}), **models)
    h, w = rng.choice([(32, 48), (32, 32)])
    frames, guidance, length, batch = rng.choice([5, 9]), rng.choice([1.0, 4.0]), 6, rng.randint(1, 2)
    pose = [PIL.Image.new("RGB", (w, h))] * frames
    face = [PIL.Image.new("RGB", (16, 16))] * frames
    with torch.no_grad():
        pipe(image=PIL.Image.new("RGB", (w, h)), pose_video=pose, face_video=face, prompt=["a prompt"] * batch,
             height=h, width=w, segment_frame_length=5, num_inference_steps=1, guidance_scale=guidance,
             max_sequence_length=length, output_type="pt", generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=1, guidance_scale=guidance,
                        max_sequence_length=length, batch_size=batch).with_options(segment_frames=5)
    index = {"_class_name": "WanAnimatePipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}, {frames} frames, guidance {guidance}, batch {batch}"
    assert vcs.plan_runs(index, configs, settings) == dict(rec.calls), where
    lat = (h // 8, w // 8)
    assert rec.shapes["transformer"] == {(12, 3, *lat)} and rec.shapes["vae.decode"] == {(4, 2, *lat)}, where
    assert rec.shapes["vae.encode"] == {(3, 1, h, w), (3, 5, h, w)}, where
    assert {c["face_pixel_values"] for c in rec.inputs["transformer"]} == {(batch, 3, 5, 16, 16)}, where
    report = estimate_configs(index, configs, settings)
    assert report.component("transformer").shape["image_tokens"] == 5
