"""Helios (diffusers ``HeliosPipeline`` and ``HeliosPyramidPipeline``) on the configs built for it
(validation/configs/helios-14b: no Helios config was found, so there is no card): defaults, chunks, the histories, the
pyramid stages, refusals, the fixtures; and each plan against the real ``__call__`` on tiny random components (skipped
without torch)."""

from __future__ import annotations

import pytest

from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings, plan
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from fixture_support import REPO, assert_fixture, fixtures

FOLDER = str(REPO / "validation" / "configs" / "helios-14b")
PYRAMID = {"_class_name": "HeliosPyramidPipeline"}


def _runs(settings: Settings, index: dict | None = None, **overrides):
    source = resolve(FOLDER)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items()}
    return [(r.component, r.call, r.runs, r.shape.latent_height, r.shape.latent_width, r.shape.height, r.shape.split)
            for r in plan({**source.model_index, **(index or {})}, components, settings).runs]


def test_defaults():
    source = resolve(FOLDER)
    r = estimate_configs(dict(source.model_index), dict(source.components), Settings())
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length, r.passes) \
        == ("HeliosPipeline", 384, 640, 132, 50, 5.0, 512, 2)
    # 132 frames: max(1, ⌈132 / 33⌉) = 4 chunks of 9 latent frames, each decoded
    assert _runs(Settings()) == [("text_encoder", "forward", 2, None, None, None, None),
                                 ("transformer", "forward", 4 * 50 * 2, 48, 80, None, None),
                                 ("vae", "decode", 4, 48, 80, None, None)]
    tree = r.component("transformer").tree
    # 9·24·40 chunk tokens + 2·24·40 short + 12·20 mid + 4·6·10 long history tokens
    n, l = 9 * 24 * 40, 9 * 24 * 40 + 2 * 24 * 40 + 12 * 20 + 4 * 6 * 10
    d = 5120
    assert tree.find("blocks.0.attn1.to_q").total.macs("torch") == l * d * d
    assert tree.find("blocks.0.attn2.to_q").total.macs("torch") == n * d * d  # guidance_cross_attn: the chunk only
    assert tree.find("patch_long").total.macs("torch") == 4 * 6 * 10 * 16 * 256 * d
    assert tree.find("condition_embedder.time_proj").total.macs("torch") == 2 * d * 6 * d  # + the zero timestep


def test_batch_image_and_chunks():
    runs = _runs(Settings(num_frames=40, steps=2).with_options(world_input=["image"], latent_window_size=5))
    # 40 frames, chunks of 5 latent frames (17 frames): 3 chunks; the image once, and repeated to 17 frames once
    assert runs[1:] == [("vae", "encode", 1, None, None, 384, None), ("vae", "encode", 1, None, None, 384, None),
                        ("transformer", "forward", 3 * 2 * 2, 48, 80, None, None),
                        ("vae", "decode", 3, 48, 80, None, None)]
    runs = _runs(Settings(batch_size=3, num_frames=40, steps=2).with_options(latent_window_size=5))
    assert runs[1:] == [("transformer", "forward", 3 * 2 * 2, 48, 80, None, None),
                        ("transformer", "forward", 3 * 2 * 2 * 2, 48, 80, None, "helios_later_rows"),
                        ("vae", "decode", 9, 48, 80, None, None)]


def test_pyramid_stages():
    runs = _runs(Settings(), PYRAMID)
    # three stages of 10 steps: the chunk at 12×20, 24×40, 48×80, the histories at 48×80
    assert [r[2:6] for r in runs if r[0] == "transformer"] == [(4 * 10 * 2, 12, 20, 48), (4 * 10 * 2, 24, 40, 48),
                                                               (4 * 10 * 2, 48, 80, None)]
    with pytest.raises(ResolutionError, match="divisible by 64"):
        _runs(Settings(height=400, width=640), PYRAMID)


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        _runs(Settings(strength=0.5))
    with pytest.raises(OptionError, match="num_videos_per_prompt > 1"):
        _runs(Settings(num_images_per_prompt=2))
    with pytest.raises(OptionError, match="use batch size 1"):
        _runs(Settings(batch_size=2).with_options(world_input=["image"]))
    with pytest.raises(OptionError, match="video input"):
        _runs(Settings().with_options(world_input=["video"]))
    with pytest.raises(ConfigError, match="1×2×2 patches"):
        _runs(Settings(), transformer={"patch_size": [1, 4, 4]})
    with pytest.raises(ConfigError, match="has_multi_term_memory_patch"):
        _runs(Settings(), transformer={"has_multi_term_memory_patch": False})
    source = resolve(FOLDER)
    with pytest.raises(ConfigError, match="summing to attention_head_dim 128"):
        estimate_configs(dict(source.model_index), {**source.components, "transformer": {
            **source.components["transformer"], "rope_dim": [44, 42, 44]}}, Settings())
    with pytest.raises(OptionError, match="--latent-window-size"):
        estimate_configs({"_class_name": "WanPipeline"}, {}, Settings().with_options(latent_window_size=3))
    pytest.importorskip("sympy")
    from flopcalc.flops.symbolic import symbolic_estimate

    with pytest.raises(FlopcalcError, match="no closed-form law"):
        symbolic_estimate(FOLDER)


@pytest.mark.parametrize("path", fixtures("helios-14b"), ids=lambda p: p.stem)
def test_fixture(path):
    assert_fixture(path)


# --------------------------------------------------------------------------- the real __call__


@pytest.mark.parametrize("pyramid", [False, True])
def test_plan_is_the_real_call(rng, pyramid):
    vcs = pytest.importorskip("video_call_support")
    import PIL.Image
    import torch
    from diffusers import AutoencoderKLWan, HeliosPipeline, HeliosPyramidPipeline, HeliosScheduler, \
        HeliosTransformer3DModel
    from transformers import UMT5Config, UMT5EncoderModel

    import diffusers.pipelines.helios.pipeline_helios as base_module
    import diffusers.pipelines.helios.pipeline_helios_pyramid as pyramid_module

    vcs.without_ftfy(base_module, pyramid_module)
    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": UMT5EncoderModel(UMT5Config(d_model=16, d_ff=32, d_kv=8, num_heads=2, num_layers=1,
                                                    vocab_size=50)),
        "transformer": HeliosTransformer3DModel(num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                                out_channels=4, text_dim=16, freq_dim=16, ffn_dim=32, num_layers=1,
                                                rope_dim=[4, 4, 4]),
        # a 4× VAE (two down-samplers, one of them temporal) keeps the decodes small: 8×8 latents from 32×32 frames
        "vae": AutoencoderKLWan(base_dim=4, z_dim=4, dim_mult=[1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True],
                                scale_factor_spatial=4, scale_factor_temporal=2, latents_mean=[0.0] * 4,
                                latents_std=[1.0] * 4),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    rec.forward("text_encoder", models["text_encoder"])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    cls = HeliosPyramidPipeline if pyramid else HeliosPipeline
    pipe = cls(tokenizer=vcs.Tokenizer(), scheduler=HeliosScheduler(stages=3 if pyramid else 1), **models)
    h, w = (32, 32) if pyramid else rng.choice([(16, 32), (16, 16)])
    chunk, frames = rng.choice([2, 3]), rng.choice([3, 5, 8])
    guidance, batch = rng.choice([1.0, 4.0]), rng.randint(1, 2)
    image = batch == 1 and rng.random() < 0.7  # one image: one prompt
    steps = {"pyramid_num_inference_steps_list": [1, 1, 1]} if pyramid else {"num_inference_steps": 2}
    extra = {"image": PIL.Image.new("RGB", (w, h))} if image else {}
    with torch.no_grad():
        pipe(prompt=["a prompt"] * batch, height=h, width=w, num_frames=frames, guidance_scale=guidance,
             max_sequence_length=6, num_latent_frames_per_chunk=chunk, output_type="pt",
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31), **steps, **extra)
    settings = Settings(height=h, width=w, num_frames=frames, steps=1 if pyramid else 2, guidance_scale=guidance,
                        max_sequence_length=6, batch_size=batch).with_options(
        latent_window_size=chunk, world_input=["image" if image else "text"])
    index = {"_class_name": cls.__name__, **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {cls.__name__} {h}×{w}, {frames} frames, chunk {chunk}, image {image}, " \
            f"guidance {guidance}, batch {batch}"
    assert vcs.plan_runs(index, configs, settings) == dict(rec.calls), where
    grids = {(r.shape.latent_frames, r.shape.latent_height, r.shape.latent_width)
             for r in plan(index, configs, settings).runs if r.component == "transformer"}
    assert {s[1:] for s in rec.shapes["transformer"]} == grids, where
    assert {c["latents_history_long"] for c in rec.inputs["transformer"]} == {(batch, 4, 16, h // 4, w // 4)}, where
    assert rec.shapes["vae.decode"] == {(4, chunk, h // 4, w // 4)}, where
