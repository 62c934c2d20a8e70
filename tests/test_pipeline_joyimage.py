"""JoyImageEditPipeline and JoyImageEditPlusPipeline semantics (diffusers 0.42.1 ``pipelines/joyimage``), their text-only
calls, on configs built for the purpose (validation/configs/joyimage-edit, joyimage-edit-plus): defaults, the size mapped to the nearest bucket, the 34 template tokens the
encoder runs and the transformer never sees, the prompt and the negative prompt as separate passes, refusals; the
fixtures against flopcalc; and the plan against the real ``JoyImageEditPipeline.__call__`` run on CPU with tiny random
components (a stand-in tokenizer that gives every prompt the token count asked for)."""

from __future__ import annotations

import pytest

import flopcalc
import flopcalc.engine.pipelines.joyimage
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.engine.pipelines.joyimage import best_bucket
from flopcalc.flops.estimate import estimate_configs

FOLDER = REPO / "validation/configs/joyimage-edit"
MODEL = str(FOLDER)
PLUS_FOLDER = REPO / "validation/configs/joyimage-edit-plus"
PLUS = str(PLUS_FOLDER)
QWEN3VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
           "text_config": {"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
                           "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64},
           "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2,
                             "out_hidden_size": 16, "deepstack_visual_indexes": [0], "num_position_embeddings": 16}}
VAE = {"_class_name": "AutoencoderKLWan", "base_dim": 8, "z_dim": 4, "dim_mult": [1, 1, 1, 1], "num_res_blocks": 1,
       "attn_scales": [], "temperal_downsample": [False, True, True], "latents_mean": [0.0] * 4,
       "latents_std": [1.0] * 4}


def _configs(folder=FOLDER) -> tuple[dict, dict]:
    return read(folder / "model_index.json"), {n: read(folder / n / "config.json")
                                                for n in ("text_encoder", "transformer", "vae")}


@pytest.mark.parametrize("path", card_fixtures("joyimage-edit") + card_fixtures("joyimage-edit-plus"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    model = PLUS if path.parent.name == "joyimage-edit-plus" else MODEL
    assert_fixture(flopcalc.estimate(model, height=s.get("height"), width=s.get("width")), fixture)


def test_plus_defaults_batched_guidance_and_refusals():
    r = flopcalc.estimate(PLUS)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "JoyImageEditPlusPipeline", 1024, 1024, 30, 4.0, 4096)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 60, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 4130}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 4096}
    off = flopcalc.estimate(PLUS, guidance_scale=1.0, steps=4, batch_size=3, max_sequence_length=77, height=720,
                            width=1280)
    assert off.passes == 1 and (off.settings.height, off.settings.width) == (720, 1280)  # no bucket without images
    assert runs_by_call(off) == {"text_encoder.forward": 3, "transformer.forward": 12, "vae.decode": 3}
    assert off.component("transformer").shape == {"latent_height": 90, "latent_width": 160, "text_len": 77}
    with pytest.raises(OptionError, match="--num-images-per-prompt does not apply to JoyImageEditPlusPipeline"):
        flopcalc.estimate(PLUS, num_images_per_prompt=2)
    with pytest.raises(OptionError, match="--strength does not apply to JoyImageEditPlusPipeline"):
        flopcalc.estimate(PLUS, strength=0.5)
    with pytest.raises(ResolutionError, match="multiple of 8"):
        flopcalc.estimate(PLUS, height=1020)
    with pytest.raises(ResolutionError, match="whole 2×2 patches"):
        flopcalc.estimate(PLUS, height=1000)
    with pytest.raises(FlopcalcError, match="keeps the last 4096 text tokens"):
        flopcalc.estimate(PLUS, max_sequence_length=5000)
    index, components = _configs(PLUS_FOLDER)
    with pytest.raises(ConfigError, match="p_t must be 1"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "patch_size": [2, 2, 2]}},
                         Settings())


def test_defaults_buckets_and_separate_guidance_passes():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "JoyImageEditPipeline", 1024, 1024, 40, 4.0, 2048)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 80, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 2082}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 2048}
    off = flopcalc.estimate(MODEL, guidance_scale=1.0, steps=4, num_images_per_prompt=2, batch_size=3,
                            max_sequence_length=77, height=720, width=1280)
    assert off.passes == 1
    assert runs_by_call(off) == {"text_encoder.forward": 3, "transformer.forward": 24, "vae.decode": 6}
    assert (off.settings.height, off.settings.width) == (768, 1344) == best_bucket(720, 1280)
    assert off.component("text_encoder").shape == {"seq_len": 111}
    assert off.component("transformer").shape == {"latent_height": 96, "latent_width": 168, "text_len": 77}
    assert any("bucket 768×1344" in n for n in off.notes)
    from diffusers.pipelines.joyimage.image_processor import BUCKETS, find_best_bucket

    assert tuple(map(tuple, BUCKETS[1024])) == flopcalc.engine.pipelines.joyimage.BUCKETS
    for hw in ((1000, 10), (1, 1000), (720, 1280), (1080, 1920), (1024, 1024), (1234, 987)):
        assert best_bucket(*hw) == tuple(find_best_bucket(*hw, 1024)), hw


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to JoyImageEditPipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(FlopcalcError, match="truncates the prompt at text_token_max_length = 2048"):
        flopcalc.estimate(MODEL, max_sequence_length=3000)
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        from flopcalc.flops.symbolic import symbolic_estimate

        symbolic_estimate(MODEL)
    index, components = _configs()
    t = components["transformer"]
    with pytest.raises(ConfigError, match="text_dim 2048"):
        estimate_configs(index, {**components, "transformer": {**t, "text_dim": 2048}}, Settings())
    with pytest.raises(ConfigError, match="needs patch_size\\[0\\] 1"):
        estimate_configs(index, {**components, "transformer": {**t, "patch_size": [2, 2, 2]}}, Settings())
    with pytest.raises(ConfigError, match="z_dim is 16"):
        estimate_configs(index, {**components, "transformer": {**t, "in_channels": 32}}, Settings())
    with pytest.raises(ConfigError, match="sum\\(rope_dim_list\\)"):
        estimate_configs(index, {**components, "transformer": {**t, "rope_dim_list": [16, 16, 16]}}, Settings())
    with pytest.raises(ConfigError, match="must be divisible by num_attention_heads"):
        estimate_configs(index, {**components, "transformer": {**t, "num_attention_heads": 7}}, Settings())
    with pytest.raises(ConfigError, match="text_token_max_length must be a positive integer"):
        estimate_configs({**index, "text_token_max_length": 0}, components, Settings())


def test_plus_law_equals_the_numeric_estimate(rng):
    """The Plus text-only call has a closed-form law (sizes as given): it equals the estimate at random points."""
    from flopcalc.flops.symbolic import symbolic_estimate

    law = symbolic_estimate(PLUS)
    rep = law.representative()
    for _ in range(4):
        point = {"H": 16 * rng.randint(8, 128), "W": 16 * rng.randint(8, 128), "S": rng.randint(1, 50),
                 "B": rng.randint(1, 3), "L": rng.randint(1, 4096)}
        exact = flopcalc.estimate(PLUS, height=point["H"], width=point["W"], steps=point["S"], batch_size=point["B"],
                                  max_sequence_length=point["L"])
        assert law.at(**{**rep, **point}) == exact.flops, point


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, JoyImageEditPipeline, JoyImageEditTransformer3DModel
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    length = rng.randint(1, 20)
    cap = rng.choice([16, 64])

    class Batch(dict):
        __getattr__ = dict.__getitem__

        def to(self, device=None, **kwargs):
            return self

    class Tokenizer:
        def __call__(self, texts, max_length=None, **kwargs):
            n = min(length + 34, max_length)
            return Batch(input_ids=torch.ones(len(texts), n, dtype=torch.long),
                         attention_mask=torch.ones(len(texts), n, dtype=torch.long))

    tcfg = dict(in_channels=4, hidden_size=32, num_attention_heads=2, text_dim=16, num_layers=rng.randint(1, 2),
                rope_dim_list=[4, 6, 6], mlp_width_ratio=rng.choice([2.0, 4.0]))
    transformer = JoyImageEditTransformer3DModel(**tcfg).eval()
    encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(**{k: v for k, v in QWEN3VL.items()
                                                               if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLWan(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = JoyImageEditPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=encoder,
                                tokenizer=Tokenizer(), transformer=transformer, processor=None,
                                text_token_max_length=cap)
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: tuple(kw["encoder_hidden_states"].shape[1:]))
    rec.hook(encoder, "text_encoder", "input_ids")
    # the decode of a one-megapixel bucket is recorded, not run (seconds on CPU; the VAE's count is the Wan fixtures')
    vae.decode = lambda z, return_dict=False: (torch.zeros(z.shape[0], 3, 1, 8 * z.shape[3], 8 * z.shape[4]),)
    rec.wrap(vae, "decode", "vae.decode")
    h, w = rng.choice([(512, 2048), (2048, 512), (600, 1000)])
    steps, guidance = 1, rng.choice([1.0, 4.0])
    with torch.no_grad():
        pipe(prompt="a prompt", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance, output_type="np")
    index, _ = _configs()
    tokens = min(length, cap)
    report = estimate_configs({**index, "text_token_max_length": cap},
                              {"transformer": {**tcfg, "_class_name": "JoyImageEditTransformer3DModel"},
                               "text_encoder": QWEN3VL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       max_sequence_length=tokens))
    where = f"seed {SEED}: {h}×{w}, guidance {guidance}, {length} tokens, cap {cap}"
    bh, bw = best_bucket(h, w)
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(tokens + 34,)}, where
    assert rec.shapes["transformer"] == {(1, 4, 1, bh // 8, bw // 8, tokens, 16)}, where
    assert rec.shapes["vae.decode"] == {(4, 1, bh // 8, bw // 8)}, where


@pytest.mark.live
def test_the_plus_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import (AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, JoyImageEditPlusPipeline,
                           JoyImageEditPlusTransformer3DModel)
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    length = rng.randint(1, 20)

    class Batch(dict):
        __getattr__ = dict.__getitem__

        def to(self, device=None, **kwargs):
            return self

    class Processor:
        def __call__(self, text, images=None, **kwargs):
            assert images is None
            return Batch(input_ids=torch.ones(len(text), length + 34, dtype=torch.long),
                         attention_mask=torch.ones(len(text), length + 34, dtype=torch.long))

    tcfg = dict(in_channels=4, hidden_size=32, num_attention_heads=2, text_dim=16, num_layers=rng.randint(1, 2),
                rope_dim_list=[4, 6, 6], mlp_width_ratio=rng.choice([2.0, 4.0]))
    transformer = JoyImageEditPlusTransformer3DModel(**tcfg).eval()
    encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(**{k: v for k, v in QWEN3VL.items()
                                                               if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLWan(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = JoyImageEditPlusPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=encoder,
                                    tokenizer=None, transformer=transformer, processor=Processor())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: tuple(kw["encoder_hidden_states"].shape[1:]))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, prompts = rng.randint(1, 2), rng.choice([1.0, 4.0]), rng.randint(1, 2)
    with torch.no_grad():
        pipe(prompt=["a prompt"] * prompts, height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             output_type="np")
    index, _ = _configs(PLUS_FOLDER)
    report = estimate_configs(index, {"transformer": {**tcfg, "_class_name": "JoyImageEditPlusTransformer3DModel"},
                                      "text_encoder": QWEN3VL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance, batch_size=prompts,
                                       max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {length} tokens, {prompts} prompt(s)"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(length + 34,)}, where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 4, 1, 2, 2, length, 16)}, where
    assert rec.shapes["vae.decode"] == {(4, 1, h // 8, w // 8)}, where
