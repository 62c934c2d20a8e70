"""FramePack (diffusers ``HunyuanVideoFramepackPipeline``) on the bundled card: defaults, sections and the decoded
history lengths of both sampling types, the packed history's closed form, refusals, the fixtures; and the plan
against the real ``__call__`` on tiny random components (skipped without torch)."""

from __future__ import annotations

import pytest

import flopcalc
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.hunyuan_video_framepack import decoded_frames, sections
from flopcalc.flops.estimate import estimate_configs
from flopcalc.engine.sources import resolve
from card_support import runs_by_call
from fixture_support import assert_fixture, fixtures

CARD = "framepack-i2v-hy"


def _runs(settings: Settings):
    from flopcalc.engine.pipelines import plan

    source = resolve(CARD)
    return plan(dict(source.model_index), dict(source.components), settings).runs


def _plan(settings: Settings, *, drop: tuple[str, ...] = (), **overrides):
    source = resolve(CARD)
    components = {k: {**v, **overrides.get(k, {})} for k, v in source.components.items() if k not in drop}
    return estimate_configs(dict(source.model_index), components, settings)


def test_defaults():
    r = flopcalc.estimate(CARD)
    s = r.settings
    assert (s.height, s.width, s.num_frames, s.steps, s.guidance_scale, s.max_sequence_length) == \
        (720, 1280, 129, 50, 6.0, 256)
    assert r.pipeline == "HunyuanVideoFramepackPipeline" and r.passes == 1
    # 129 frames in sections of (9 − 1)·4 + 1 = 33: 4 sections
    assert runs_by_call(r) == {"text_encoder.forward": 1, "text_encoder_2.forward": 1, "image_encoder.forward": 1,
                               "vae.encode": 1, "transformer.forward": 200, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 90, "latent_width": 160, "text_len": 256,
                                                "latent_frames": 9, "image_tokens": 729}
    assert r.component("text_encoder").shape == {"seq_len": 351}
    assert r.component("image_encoder").shape == {"seq_len": 729, "height": 384, "width": 384}  # (384 // 14)² tokens
    assert any("(9, 18, 18, 19 latent frames)" in n for n in r.notes)


def test_sections_and_decoded_history():
    assert sections(129, 9, 4) == 4 and sections(33, 9, 4) == 1 and sections(34, 9, 4) == 2 and sections(1, 9, 4) == 1
    assert decoded_frames(4, 9, "inverted_anti_drifting") == [9, 18, 18, 19]
    assert decoded_frames(1, 9, "inverted_anti_drifting") == [10]
    assert decoded_frames(3, 9, "vanilla") == [10, 18, 18]
    v = flopcalc.estimate(CARD, sampling_type="vanilla", num_frames=66, steps=3, true_cfg_scale=2.0,
                          negative_prompt=True)
    assert v.passes == 2 and runs_by_call(v)["transformer.forward"] == 2 * 3 * 2
    assert runs_by_call(v)["text_encoder.forward"] == 2
    # the decodes of 10 and 18 latent frames: one report row of two pieces
    decode = [r for r in _runs(Settings(num_frames=66).with_options(sampling_type="vanilla")) if r.call == "decode"]
    assert sorted((r.shape.latent_frames, r.runs) for r in decode) == [(10, 1), (18, 1)]
    one = flopcalc.estimate(CARD, num_frames=33, sampling_type="vanilla").component("vae", "decode")  # 10 frames
    pieces = [c.per_item.macs("torch") for c in v.component("vae", "decode").tree.children]
    assert one.macs in pieces and v.component("vae", "decode").macs == sum(pieces)
    w = flopcalc.estimate(CARD, latent_window_size=5, num_frames=40)
    assert w.component("transformer").shape["latent_frames"] == 5 and runs_by_call(w)["transformer.forward"] == 150


def test_history_closed_form():
    """clean_x_embedder: 2(h/2)(w/2)·4 + ⌈h/4⌉⌈w/4⌉·32 + 4⌈h/8⌉⌈w/8⌉·256 positions × C·d MACs; the blocks see the
    window's and the history's tokens, the image's 729 and the 256 text tokens."""
    r = flopcalc.estimate(CARD, height=336, width=592, num_frames=33, steps=1)
    tree = r.component("transformer").tree
    c, d = 16, 3072
    clean, two, four = 2 * 21 * 37, 11 * 19, 4 * 6 * 10
    assert tree.find("clean_x_embedder").total.macs("torch") == (clean * 4 + two * 32 + four * 256) * c * d
    n = 9 * 21 * 37
    ff = 4 * d
    single = tree.find("single_transformer_blocks.0").per_item.macs("torch")
    total = n + clean + two + four + 729 + 256
    # HunyuanVideoSingleTransformerBlock: norm 3d², to_q/k/v and the MLP in, attention, proj_out
    assert single == 3 * d * d + total * (3 * d * d + d * ff) + 2 * 24 * total * total * 128 + total * (d + ff) * d
    assert tree.find("image_projection").total.macs("torch") == 729 * (1152 * 3 * d + 3 * d * d)
    assert tree.find("proj_out").total.macs("torch") == n * d * 64


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply"):
        flopcalc.estimate(CARD, strength=0.5)
    with pytest.raises(OptionError, match="one prompt and one video"):
        flopcalc.estimate(CARD, batch_size=2)
    with pytest.raises(OptionError, match="one prompt and one video"):
        flopcalc.estimate(CARD, num_images_per_prompt=2)
    with pytest.raises(OptionError, match="--sampling-type"):
        flopcalc.estimate(CARD, sampling_type="forward")
    with pytest.raises(FlopcalcError, match="no image_encoder config"):
        _plan(Settings(), drop=("image_encoder",))
    with pytest.raises(ConfigError, match="has_clean_x_embedder is off"):
        _plan(Settings(), transformer={"has_clean_x_embedder": False})
    with pytest.raises(ConfigError, match="only patch_size 2 / patch_size_t 1"):
        _plan(Settings(), transformer={"patch_size": 1})
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
    from diffusers import (AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler, HunyuanVideoFramepackPipeline,
                           HunyuanVideoFramepackTransformer3DModel)
    from transformers import (CLIPTextConfig, CLIPTextModel, LlamaConfig, LlamaModel, SiglipImageProcessor,
                              SiglipVisionConfig, SiglipVisionModel)

    torch.manual_seed(vcs.SEED % 2**31)
    models = {
        "text_encoder": LlamaModel(LlamaConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                               num_key_value_heads=1, num_hidden_layers=2, vocab_size=50)),
        "text_encoder_2": CLIPTextModel(CLIPTextConfig(hidden_size=8, intermediate_size=16, num_attention_heads=2,
                                                       num_hidden_layers=1, vocab_size=50, max_position_embeddings=80)),
        "image_encoder": SiglipVisionModel(SiglipVisionConfig(hidden_size=12, intermediate_size=16,
                                                              num_attention_heads=2, num_hidden_layers=1,
                                                              image_size=28, patch_size=14)),
        "transformer": HunyuanVideoFramepackTransformer3DModel(
            in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=12, num_layers=1,
            num_single_layers=1, num_refiner_layers=1, text_embed_dim=16, pooled_projection_dim=8,
            rope_axes_dim=(4, 4, 4), has_image_proj=True, image_proj_dim=12, has_clean_x_embedder=True),
        "vae": AutoencoderKLHunyuanVideo(in_channels=3, out_channels=3, latent_channels=4,
                                         down_block_types=("HunyuanVideoDownBlock3D",) * 4,
                                         up_block_types=("HunyuanVideoUpBlock3D",) * 4,
                                         block_out_channels=(8, 8, 8, 8), layers_per_block=1, norm_num_groups=4),
    }
    for m in models.values():
        m.eval()
    configs = {name: vcs.config_dict(m) for name, m in models.items()}
    rec = vcs.Recorder()
    for name in ("text_encoder", "text_encoder_2", "image_encoder"):
        rec.forward(name, models[name])
    rec.forward("transformer", models["transformer"], key="hidden_states")
    rec.method("vae.decode", models["vae"], "decode")
    rec.method("vae.encode", models["vae"], "encode")
    pipe = HunyuanVideoFramepackPipeline(tokenizer=vcs.Tokenizer(), tokenizer_2=vcs.Tokenizer(),
                                         scheduler=FlowMatchEulerDiscreteScheduler(),
                                         feature_extractor=SiglipImageProcessor(size={"height": 28, "width": 28}),
                                         **models)
    h, w = rng.choice([(32, 48), (48, 32), (32, 32)])
    window, frames = 2, rng.choice([5, 9])
    sampling = rng.choice(["inverted_anti_drifting", "vanilla"])
    true_cfg, length = rng.choice([1.0, 2.0]), rng.choice([4, 9])
    with torch.no_grad():
        pipe(image=PIL.Image.new("RGB", (w, h)), prompt="a prompt", negative_prompt="bad", height=h, width=w,
             num_frames=frames, latent_window_size=window, num_inference_steps=1, true_cfg_scale=true_cfg,
             max_sequence_length=length, sampling_type=sampling, output_type="pt",
             prompt_template={"template": "{}", "crop_start": 3},
             generator=torch.Generator().manual_seed(vcs.SEED % 2**31))
    settings = Settings(height=h, width=w, num_frames=frames, steps=1, true_cfg_scale=true_cfg, negative_prompt=True,
                        max_sequence_length=length).with_options(latent_window_size=window, sampling_type=sampling)
    index = {"_class_name": "HunyuanVideoFramepackPipeline", **{name: ["x", "y"] for name in configs}}
    where = f"seed {vcs.SEED}: {h}×{w}, {frames} frames, {sampling}, true cfg {true_cfg}, L={length}"
    planned = vcs.plan_runs(index, configs, settings)
    # the prompt template's crop_start (95 in the default template; 3 here) is added to the Llama tokens
    assert rec.shapes["text_encoder"] == {(length + 3,)}, where
    assert planned == dict(rec.calls), where
    lat = (h // 8, w // 8)
    assert rec.shapes["transformer"] == {(4, window, *lat)}, where
    count = sections(frames, window, 4)
    assert sorted(s[1] for s in rec.shapes["vae.decode"]) == sorted(set(decoded_frames(count, window, sampling)))
    assert rec.shapes["vae.encode"] == {(3, 1, h, w)} and rec.shapes["image_encoder"] == {(3, 28, 28)}, where
    report = estimate_configs(index, configs, settings)
    assert report.component("transformer").shape["image_tokens"] == 4
