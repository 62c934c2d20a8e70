"""BriaFibo2Pipeline semantics (diffusers 0.42.1 ``pipelines/bria_fibo2``) on configs built for the purpose
(validation/configs/bria-fibo2): defaults, the prompt and the negative prompt encoded and denoised as separate
batch-1 passes, the gist-token count from the text length, refusals; the fixtures against flopcalc; and the plan
against the real ``BriaFibo2Pipeline.__call__`` run on CPU with tiny random components (a stand-in processor that
gives every prompt the token count asked for)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs
from flopcalc.formulas.bria_fibo2 import gist_count

FOLDER = REPO / "validation/configs/bria-fibo2"
MODEL = str(FOLDER)
QWEN3VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
           "text_config": {"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 35, "num_attention_heads": 2,
                           "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64},
           "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2,
                             "out_hidden_size": 16, "deepstack_visual_indexes": [0], "num_position_embeddings": 16}}
VAE = {"_class_name": "AutoencoderKLFlux2", "block_out_channels": [8, 8, 8, 8], "layers_per_block": 1,
       "norm_num_groups": 4, "latent_channels": 4}


def _configs() -> tuple[dict, dict]:
    return read(FOLDER / "model_index.json"), {n: read(FOLDER / n / "config.json")
                                                for n in ("text_encoder", "transformer", "vae")}


@pytest.mark.parametrize("path", card_fixtures("bria-fibo2"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate(MODEL, height=s.get("height"), width=s.get("width")), fixture)


def test_defaults_and_separate_guidance_passes():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "BriaFibo2Pipeline", 1024, 1024, 30, 5.0, 4096)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 60, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 4096}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 4096}
    off = flopcalc.estimate(MODEL, guidance_scale=1.0, steps=4, num_images_per_prompt=2, batch_size=3,
                            max_sequence_length=300, height=768, width=1344)
    assert off.passes == 1
    assert runs_by_call(off) == {"text_encoder.forward": 3, "transformer.forward": 24, "vae.decode": 6}
    assert off.component("transformer").shape == {"latent_height": 96, "latent_width": 168, "text_len": 300}


def test_gist_tokens_follow_the_text_length():
    """compute_gist_count's bounds and rounding, and the Perceiver's cost growing with the gist count."""
    bounds = dict(min_gist=256, max_gist=512, step=64, min_text=256, max_text=2048)
    assert [gist_count(n, **bounds) for n in (1, 256, 257, 1024, 2048, 4096)] == [256, 256, 320, 384, 512, 512]
    perceiver = {n: flopcalc.estimate(MODEL, max_sequence_length=n).component("transformer").tree.find("perceiver")
                 for n in (100, 256, 4096)}
    assert perceiver[100].per_item.macs("torch") < perceiver[256].per_item.macs("torch") < perceiver[4096].per_item.macs("torch")


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to BriaFibo2Pipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate(MODEL, height=1000)
    with pytest.raises(FlopcalcError, match="truncates the prompt at 4096"):
        flopcalc.estimate(MODEL, max_sequence_length=5000)
    with pytest.raises(FlopcalcError, match="no closed-form law"):
        from flopcalc.flops.symbolic import symbolic_estimate

        symbolic_estimate(MODEL)
    index, components = _configs()
    t = components["transformer"]
    with pytest.raises(ConfigError, match="cap_feat_dim is 4096"):
        estimate_configs(index, {**components, "transformer": {**t, "cap_feat_dim": 4096}}, Settings())
    with pytest.raises(ConfigError, match=r"block\(s\) \[40\] would read a bundle"):
        estimate_configs(index, {**components, "transformer": {**t, "injection_layer_ids": [6, 14, 22, 30, 38, 40]}},
                         Settings())
    with pytest.raises(ConfigError, match="reads hidden state 35"):
        shallow = {**components["text_encoder"], "text_config": {**components["text_encoder"]["text_config"],
                                                                 "num_hidden_layers": 30}}
        estimate_configs(index, {**components, "text_encoder": shallow}, Settings())
    with pytest.raises(ConfigError, match="sum\\(axes_dims\\)"):
        estimate_configs(index, {**components, "transformer": {**t, "axes_dims": [32, 32, 32]}}, Settings())
    with pytest.raises(ConfigError, match="gist_max_text_len 256 must exceed"):
        estimate_configs(index, {**components, "transformer": {**t, "gist_max_text_len": 256}}, Settings())
    with pytest.raises(ConfigError, match="cannot index the image's RoPE positions"):
        estimate_configs(index, components, Settings(height=8192 + 16, width=1024))


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKLFlux2, BriaFibo2Pipeline, BriaFibo2Transformer2DModel, FlowMatchEulerDiscreteScheduler
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    length = rng.randint(1, 40)

    class Batch(dict):
        __getattr__ = dict.__getitem__

        def to(self, device):
            return self

    class Processor:
        def __call__(self, text, images=None, **kwargs):
            assert images is None
            return Batch(input_ids=torch.ones(len(text), length, dtype=torch.long),
                         attention_mask=torch.ones(len(text), length, dtype=torch.long))

    tcfg = dict(in_channels=4, patch_size=2, dim=32, n_layers=rng.randint(1, 3), n_refiner_layers=rng.randint(0, 2),
                n_heads=2, cap_feat_dim=48, injection_layer_ids=[0, 2], perceiver_num_layers=1,
                min_num_gist_tokens=4, max_num_gist_tokens=12, gist_step=4, gist_min_text_len=4, gist_max_text_len=36,
                axes_dims=[4, 6, 6], axes_lens=[32, 64, 64])
    transformer = BriaFibo2Transformer2DModel(**tcfg).eval()
    encoder = Qwen3VLForConditionalGeneration(Qwen3VLConfig(**{k: v for k, v in QWEN3VL.items()
                                                               if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLFlux2(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = BriaFibo2Pipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae,
                             text_encoder=encoder, processor=Processor())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states",
             extra=lambda kw: tuple(kw["encoder_hidden_states"].shape[1:3]))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    gists = []
    transformer.perceiver.register_forward_pre_hook(lambda mod, args: gists.append(args[1]))
    h, w = 16 * rng.randint(2, 5), 16 * rng.randint(2, 5)
    steps, guidance, per_prompt = rng.randint(1, 2), rng.choice([1.0, 5.0]), rng.randint(1, 2)
    with torch.no_grad():
        pipe("a prompt", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             num_images_per_prompt=per_prompt, output_type="np")
    index, _ = _configs()
    report = estimate_configs(index, {"transformer": {**tcfg, "_class_name": "BriaFibo2Transformer2DModel"},
                                      "text_encoder": QWEN3VL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       num_images_per_prompt=per_prompt, max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {length} tokens, {per_prompt} per prompt"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(length,)}, where
    assert rec.shapes["transformer"] == {(4, h // 8, w // 8, 6, length)}, where
    assert rec.shapes["vae.decode"] == {(4, h // 8, w // 8)}, where
    expected = gist_count(length, min_gist=4, max_gist=12, step=4, min_text=4, max_text=36)
    assert set(gists) == {expected}, where
    perceiver = report.component("transformer").tree.find("perceiver.layers.0.self_attention")
    assert perceiver is not None
