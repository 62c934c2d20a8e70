"""Krea2Pipeline semantics (diffusers 0.42.1 ``pipelines/krea2``) on configs built for the purpose
(validation/configs/krea2): defaults, guidance whenever ``guidance_scale > 0``, the fixed ``max_sequence_length + 34``
block the text encoder runs on, the tapped layers, refusals; the fixtures against flopcalc; and the plan against the
real ``Krea2Pipeline.__call__`` run on CPU with tiny random components (a stand-in tokenizer padding to the length
asked for, the template suffix 5 tokens as the pipeline assumes)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import REPO, Recorder, assert_fixture, card_fixtures, read
from card_support import runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

FOLDER = REPO / "validation/configs/krea2"
MODEL = str(FOLDER)
QWEN3VL = {"architectures": ["Qwen3VLModel"], "model_type": "qwen3_vl",
           "text_config": {"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 2,
                           "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 64},
           "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2,
                             "out_hidden_size": 16, "deepstack_visual_indexes": [0], "num_position_embeddings": 16}}
VAE = {"_class_name": "AutoencoderKLQwenImage", "base_dim": 8, "z_dim": 4, "dim_mult": [1, 1, 1, 1],
       "num_res_blocks": 1, "attn_scales": [], "temperal_downsample": [False, True, True],
       "latents_mean": [0.0] * 4, "latents_std": [1.0] * 4}


def _configs() -> tuple[dict, dict]:
    return read(FOLDER / "model_index.json"), {n: read(FOLDER / n / "config.json")
                                                for n in ("text_encoder", "transformer", "vae")}


@pytest.mark.parametrize("path", card_fixtures("krea2") + card_fixtures("krea2-text-encoder"),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    model = MODEL if path.parent.name == "krea2" else str(REPO / "validation/configs/krea2-text-encoder")
    assert_fixture(flopcalc.estimate(model, height=s.get("height"), width=s.get("width")), fixture)


def test_defaults_and_guidance_above_zero():
    r = flopcalc.estimate(MODEL)
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "Krea2Pipeline", 1024, 1024, 28, 4.5, 512)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 2, "transformer.forward": 56, "vae.decode": 1}
    assert r.component("text_encoder").shape == {"seq_len": 546}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 512}
    assert flopcalc.estimate(MODEL, guidance_scale=0.5).passes == 2  # > 0, not > 1
    turbo = flopcalc.estimate(MODEL, guidance_scale=0.0, steps=8, num_images_per_prompt=2, max_sequence_length=77)
    assert turbo.passes == 1
    assert runs_by_call(turbo) == {"text_encoder.forward": 1, "transformer.forward": 16, "vae.decode": 2}
    assert turbo.component("text_encoder").shape == {"seq_len": 111}


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to Krea2Pipeline"):
        flopcalc.estimate(MODEL, strength=0.5)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate(MODEL, height=1000)
    index, components = _configs()
    with pytest.raises(ConfigError, match="patch_size 4"):
        estimate_configs({**index, "patch_size": 4}, components, Settings())
    with pytest.raises(ConfigError, match="taps 12 text-encoder layers"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "num_text_layers": 6}},
                         Settings())
    with pytest.raises(ConfigError, match="taps hidden state 35"):
        shallow = {**components["text_encoder"], "text_config": {**components["text_encoder"]["text_config"],
                                                                 "num_hidden_layers": 30}}
        estimate_configs(index, {**components, "text_encoder": shallow}, Settings())
    with pytest.raises(ConfigError, match="must be a multiple of num_key_value_heads"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"],
                                                               "num_key_value_heads": 7}}, Settings())


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, Krea2Pipeline, Krea2Transformer2DModel
    from transformers import Qwen3VLConfig, Qwen3VLModel

    class Batch(dict):
        __getattr__ = dict.__getitem__

        def to(self, device):
            return self

    class Tokenizer:
        def __call__(self, texts, padding=None, max_length=None, **kwargs):
            length = max_length if padding == "max_length" else 5
            return Batch(input_ids=torch.ones(len(texts), length, dtype=torch.long),
                         attention_mask=torch.ones(len(texts), length, dtype=torch.long))

    tcfg = dict(in_channels=16, num_layers=1, attention_head_dim=8, num_attention_heads=2, num_key_value_heads=1,
                intermediate_size=24, timestep_embed_dim=8, text_hidden_dim=16, num_text_layers=2,
                text_num_attention_heads=2, text_num_key_value_heads=1, text_intermediate_size=24,
                num_layerwise_text_blocks=1, num_refiner_text_blocks=1, axes_dims_rope=[2, 2, 4])
    transformer = Krea2Transformer2DModel(**tcfg).eval()
    encoder = Qwen3VLModel(Qwen3VLConfig(**{k: v for k, v in QWEN3VL.items()
                                            if k not in ("architectures", "model_type")})).eval()
    vae = AutoencoderKLQwenImage(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = Krea2Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=encoder,
                         tokenizer=Tokenizer(), transformer=transformer, text_encoder_select_layers=(1, 3))
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: tuple(kw["encoder_hidden_states"].shape[1:]))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 6), 16 * rng.randint(2, 6)
    steps, guidance, length = rng.randint(1, 2), rng.choice([0.0, 4.5]), rng.randint(1, 20)
    with torch.no_grad():
        pipe("a prompt", height=h, width=w, num_inference_steps=steps, guidance_scale=guidance,
             max_sequence_length=length, output_type="np")
    index, _ = _configs()
    report = estimate_configs({**index, "text_encoder_select_layers": [1, 3]},
                              {"transformer": {**tcfg, "_class_name": "Krea2Transformer2DModel"},
                               "text_encoder": QWEN3VL, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       max_sequence_length=length))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {length} tokens"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(length + 34,)}, where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 16, length, 2, 16)}, where
    assert rec.shapes["vae.decode"] == {(4, 1, h // 8, w // 8)}, where
