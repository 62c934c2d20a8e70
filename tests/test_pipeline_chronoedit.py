"""ChronoEdit (diffusers ``ChronoEditPipeline``) on the configs built for it (validation/configs/chronoedit-14b: no
ChronoEdit checkpoint config was found, so there is no card): defaults, temporal reasoning, the two-frame rotary path,
refusals, a law where the config has one, the fixtures; and the plan against the real ``__call__`` on tiny random
components (skipped without torch)."""

from __future__ import annotations

import json

import pytest

from flopcalc.engine.errors import FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings, plan
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from fixture_support import REPO, assert_fixture, fixtures

FOLDER = str(REPO / "validation" / "configs" / "chronoedit-14b")


def _source():
    source = resolve(FOLDER)
    return dict(source.model_index), dict(source.components)


def _runs(settings: Settings, **overrides):
    index, components = _source()
    components = {k: {**v, **overrides.get(k, {})} for k, v in components.items()}
    return [(r.component, r.call, r.runs, r.shape.latent_frames if r.role in ("denoiser", "vae_decoder") else
             r.shape.frames) for r in plan(index, components, settings).runs]


def test_defaults():
    index, components = _source()
    r = estimate_configs(index, components, Settings())
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length, r.passes) \
        == ("ChronoEditPipeline", 480, 832, 5, 50, 5.0, 512, 2)
    assert r.component("transformer").shape == {"latent_height": 60, "latent_width": 104, "text_len": 512,
                                                "latent_frames": 2, "image_tokens": 257}
    assert _runs(Settings()) == [("text_encoder", "forward", 2, None), ("image_encoder", "forward", 1, None),
                                 ("vae", "encode", 1, 5), ("transformer", "forward", 100, 2), ("vae", "decode", 1, 2)]


def test_temporal_reasoning():
    # k = 10 of 50 steps on the 21 latent frames of 81, then the first and last frames; one decode of those two
    assert _runs(Settings(batch_size=2).with_options(temporal_reasoning_steps=10))[2:] == [
        ("vae", "encode", 1, 81), ("transformer", "forward", 40, 21), ("transformer", "forward", 160, 2),
        ("vae", "decode", 2, 2)]
    # k ≥ steps: every step on the whole video, decoded as the edit (2 frames) and the video without its last frame
    assert _runs(Settings(steps=4, num_frames=30, guidance_scale=1.0).with_options(temporal_reasoning_steps=9))[1:] == [
        ("image_encoder", "forward", 1, None), ("vae", "encode", 1, 29), ("transformer", "forward", 4, 8),
        ("vae", "decode", 1, 2), ("vae", "decode", 1, 7)]
    # k = 0: every step on two frames; a one-frame video is pruned to two (frames [0, -1] of one)
    assert _runs(Settings(steps=3, num_frames=1).with_options(temporal_reasoning_steps=0))[2:] == [
        ("vae", "encode", 1, 1), ("transformer", "forward", 6, 2), ("vae", "decode", 1, 2)]


def test_refusals(tmp_path):
    index, components = _source()
    with pytest.raises(OptionError, match="ignores num_frames"):
        estimate_configs(index, components, Settings(num_frames=81))
    with pytest.raises(OptionError, match="--strength does not apply"):
        estimate_configs(index, components, Settings(strength=0.5))
    with pytest.raises(OptionError, match="num_videos_per_prompt > 1"):
        estimate_configs(index, components, Settings(num_images_per_prompt=2))
    with pytest.raises(OptionError, match="--temporal-reasoning-steps"):
        estimate_configs({"_class_name": "WanPipeline"}, {}, Settings().with_options(temporal_reasoning_steps=2))
    with pytest.raises(FlopcalcError, match="no image_dim"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "image_dim": None}},
                         Settings())
    with pytest.raises(ResolutionError, match="fails unless p_t is 1"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "patch_size": [2, 2, 2]}},
                         Settings())
    euler = {**index, "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]}
    with pytest.raises(FlopcalcError, match="model_outputs"):
        estimate_configs(euler, components, Settings(steps=4).with_options(temporal_reasoning_steps=3))
    estimate_configs(euler, components, Settings(steps=4).with_options(temporal_reasoning_steps=4))  # never prunes
    with pytest.raises(FlopcalcError, match="divisible by 16|multiple of 16"):
        estimate_configs(index, components, Settings(height=488))


def test_law(tmp_path):
    """No law with added k/v (the context split at 512 text tokens) or with temporal reasoning; without added k/v the
    law of the edit holds at any size and step count."""
    sp = pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="hard-coded 512 text tokens"):
        symbolic_estimate(FOLDER)
    index, components = _source()
    folder = tmp_path / "chronoedit"
    for name, cfg in {"model_index": index, **components}.items():
        if name == "transformer":
            cfg = {**cfg, "added_kv_proj_dim": None, "num_layers": 2}
        path = folder / ("model_index.json" if name == "model_index" else f"{name}/config.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg))
    law = symbolic_estimate(str(folder))
    with pytest.raises(FlopcalcError, match="piecewise in S"):
        symbolic_estimate(str(folder), num_frames=9, temporal_reasoning_steps=2)
    index, components = dict(resolve(str(folder)).model_index), dict(resolve(str(folder)).components)
    for h, w, steps in ((480, 832, 50), (256, 384, 7)):
        numeric = estimate_configs(index, components, Settings(height=h, width=w, steps=steps))
        assert law.at(H=h, W=w, S=steps, P=2, B=1, L=512) == numeric.flops
    assert sp.Symbol("F", positive=True, integer=True) not in law.flops.free_symbols


@pytest.mark.parametrize("path", fixtures("chronoedit-14b"), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


def test_plan_is_the_real_call(rng):
    vcs = pytest.importorskip("video_call_support")
    import PIL.Image
    import torch
    from diffusers import AutoencoderKLWan, ChronoEditPipeline, ChronoEditTransformer3DModel, UniPCMultistepScheduler
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel, UMT5Config, UMT5EncoderModel

    import diffusers.pipelines.chronoedit.pipeline_chronoedit as module

    vcs.without_ftfy(module)
    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": UMT5EncoderModel(UMT5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                    vocab_size=50)),
        "image_encoder": CLIPVisionModel(CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                                          num_attention_heads=2, image_size=28, patch_size=14)),
        "transformer": ChronoEditTransformer3DModel(
            num_attention_heads=2, attention_head_dim=12, in_channels=12, out_channels=4, text_dim=16, freq_dim=16,
            ffn_dim=32, num_layers=1, image_dim=16, added_kv_proj_dim=24, rope_max_seq_len=64),
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
    # the Hub repos' scheduler (flow UniPC): temporal reasoning prunes its model_outputs, which FlowMatchEuler lacks
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=5.0)
    pipe = ChronoEditPipeline(tokenizer=vcs.Tokenizer(), scheduler=scheduler,
                              image_processor=CLIPImageProcessor(size={"shortest_edge": 28},
                                                                 crop_size={"height": 28, "width": 28}), **models)
    h, w = rng.choice([(32, 48), (32, 32)])
    steps, guidance, length, batch = 3, rng.choice([1.0, 4.0]), 6, rng.randint(1, 2)
    reasoning = rng.choice([None, 0, 1, 3, 5])
    frames = 5 if reasoning is None else rng.choice([5, 9, 11])
    with torch.no_grad():
        pipe(image=PIL.Image.new("RGB", (w, h)), prompt=["a prompt"] * batch, height=h, width=w, num_frames=frames,
             num_inference_steps=steps, guidance_scale=guidance, max_sequence_length=length, output_type="pt",
             enable_temporal_reasoning=reasoning is not None, num_temporal_reasoning_steps=reasoning or 0,
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=steps, guidance_scale=guidance,
                        max_sequence_length=length, batch_size=batch).with_options(temporal_reasoning_steps=reasoning)
    index = {"_class_name": "ChronoEditPipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}, {frames} frames, reasoning {reasoning}, guidance {guidance}, batch {batch}"
    assert vcs.plan_runs(index, configs, settings) == dict(rec.calls), where
    planned = {(r.component, r.call): set() for r in plan(index, configs, settings).runs}
    for r in plan(index, configs, settings).runs:
        planned[r.component, r.call].add(r.shape.latent_frames if r.call != "encode" else r.shape.frames)
    assert {s[1] for s in rec.shapes["transformer"]} == planned["transformer", "forward"], where
    assert {s[1] for s in rec.shapes["vae.decode"]} == planned["vae", "decode"], where
    assert {s[1] for s in rec.shapes["vae.encode"]} == planned["vae", "encode"], where
    assert {s[2:] for s in rec.shapes["transformer"]} == {(h // 8, w // 8)}, where
    assert estimate_configs(index, configs, settings).component("transformer").shape["image_tokens"] == 5
