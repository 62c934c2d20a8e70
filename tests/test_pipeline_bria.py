"""BriaPipeline semantics (diffusers 0.42.1 ``pipelines/bria``): defaults (its own ``vae_scale_factor``), guidance
as a doubled batch, the negative prompt only encoded when given, T5's unpadded prompt (the upper bound), refusals;
the card's fixtures against flopcalc; and the plan against the real ``BriaPipeline.__call__`` run on CPU with tiny
random components (a stand-in tokenizer giving one id per word, truncated at ``max_length``)."""

from __future__ import annotations

import pytest

import flopcalc
from call_support import Recorder, assert_fixture, card_fixtures, read
from card_support import Card, runs_by_call
from conftest import SEED
from flopcalc.engine.errors import ConfigError, FlopcalcError, OptionError, ResolutionError
from flopcalc.engine.pipelines import Settings
from flopcalc.flops.estimate import estimate_configs

CARD = Card("bria-3.2")
T5 = {"architectures": ["T5EncoderModel"], "model_type": "t5", "d_model": 16, "d_ff": 32, "d_kv": 8, "num_heads": 2,
      "num_layers": 1, "vocab_size": 64, "feed_forward_proj": "gated-gelu"}
VAE = {"_class_name": "AutoencoderKL", "in_channels": 3, "out_channels": 3, "latent_channels": 4,
       "block_out_channels": [8, 8, 8, 8], "layers_per_block": 1, "norm_num_groups": 4,
       "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4,
       "scaling_factor": 0.13025, "shift_factor": 0.0}


@pytest.mark.parametrize("path", card_fixtures("bria-3.2"), ids=lambda p: p.stem)
def test_fixtures_are_exact(path):
    fixture = read(path)
    s = fixture["settings"]
    assert_fixture(flopcalc.estimate("bria-3.2", height=s.get("height"), width=s.get("width")), fixture)


def test_defaults():
    r = flopcalc.estimate("bria-3.2")
    s = r.settings
    assert (r.pipeline, s.height, s.width, s.steps, s.guidance_scale, s.max_sequence_length) == (
        "BriaPipeline", 1024, 1024, 30, 5.0, 128)
    assert r.passes == 2
    assert runs_by_call(r) == {"text_encoder.forward": 1, "transformer.forward": 60, "vae.decode": 1}
    assert r.component("transformer").shape == {"latent_height": 128, "latent_width": 128, "text_len": 128}
    assert r.component("vae", "decode").shape == {"latent_height": 128, "latent_width": 128}
    assert any("shift_factor is null" in n for n in r.notes)
    assert any("zero embeddings" in n for n in r.notes)


def test_negative_prompt_and_guidance():
    r = flopcalc.estimate("bria-3.2", negative_prompt=True, batch_size=2, num_images_per_prompt=2, steps=3)
    assert runs_by_call(r) == {"text_encoder.forward": 4, "transformer.forward": 3 * 2 * 4, "vae.decode": 4}
    off = flopcalc.estimate("bria-3.2", guidance_scale=1.0, negative_prompt=True)
    assert off.passes == 1 and runs_by_call(off)["text_encoder.forward"] == 1
    assert any("negative prompt is ignored" in n for n in off.notes)


def test_max_sequence_length():
    r = flopcalc.estimate("bria-3.2", max_sequence_length=512, height=512, width=512)
    assert r.component("text_encoder").shape == {"seq_len": 512} and r.component("transformer").shape["text_len"] == 512
    with pytest.raises(FlopcalcError, match="cannot be greater than 512"):
        flopcalc.estimate("bria-3.2", max_sequence_length=513)


def test_refusals():
    with pytest.raises(OptionError, match="--strength does not apply to BriaPipeline"):
        flopcalc.estimate("bria-3.2", strength=0.6)
    with pytest.raises(ResolutionError, match="multiple of 16"):
        flopcalc.estimate("bria-3.2", height=1000)
    index, components = CARD.index(), CARD.components()
    with pytest.raises(ConfigError, match="guidance_embeds true cannot be built"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"], "guidance_embeds": True}},
                         Settings())
    with pytest.raises(ConfigError, match="sum\\(axes_dims_rope\\)"):
        estimate_configs(index, {**components, "transformer": {**components["transformer"],
                                                               "axes_dims_rope": [16, 48, 48]}}, Settings())


def test_without_a_vae_the_pipeline_factor_is_16():
    components = CARD.components()
    del components["vae"]
    r = estimate_configs(CARD.index(), components, Settings())
    assert (r.settings.height, r.settings.width) == (1024, 1024)
    assert r.component("transformer").shape["latent_height"] == 128


@pytest.mark.live
def test_the_plan_mirrors_the_real_call(rng):
    pytest.importorskip("diffusers")
    import torch
    from diffusers import AutoencoderKL, BriaPipeline, BriaTransformer2DModel, FlowMatchEulerDiscreteScheduler
    from transformers import T5Config, T5EncoderModel

    class Batch(dict):
        __getattr__ = dict.__getitem__

    class Tokenizer:
        def __call__(self, prompt, max_length=None, padding=None, **kwargs):
            prompts = [prompt] if isinstance(prompt, str) else prompt
            length = len(prompts[0].split()) + 1
            length = min(length, max_length) if max_length else length
            return Batch(input_ids=torch.ones(len(prompts), length, dtype=torch.long))

        def batch_decode(self, ids):
            return [""] * len(ids)

    tcfg = dict(in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
                joint_attention_dim=16, axes_dims_rope=[0, 4, 4])
    transformer = BriaTransformer2DModel(**tcfg).eval()
    encoder = T5EncoderModel(T5Config(**{k: v for k, v in T5.items() if k not in ("architectures", "model_type")}))
    vae = AutoencoderKL(**{k: v for k, v in VAE.items() if k != "_class_name"}).eval()
    pipe = BriaPipeline(transformer=transformer, scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae,
                        text_encoder=encoder.eval(), tokenizer=Tokenizer())
    rec = Recorder()
    rec.hook(transformer, "transformer", "hidden_states", extra=lambda kw: (kw["encoder_hidden_states"].shape[1],))
    rec.hook(encoder, "text_encoder", "input_ids")
    rec.wrap(vae, "decode", "vae.decode")
    h, w = 16 * rng.randint(2, 8), 16 * rng.randint(2, 8)
    steps, guidance, length = rng.randint(1, 2), rng.choice([1.0, 5.0]), rng.randint(2, 30)
    negative = rng.random() < 0.5
    prompt = " ".join(["word"] * 40)  # longer than max_sequence_length: T5 runs on it, truncated
    with torch.no_grad():
        pipe(prompt, negative_prompt=prompt if negative else None, height=h, width=w, num_inference_steps=steps,
             guidance_scale=guidance, max_sequence_length=length, output_type="np")
    report = estimate_configs(CARD.index(), {"transformer": {**tcfg, "_class_name": "BriaTransformer2DModel"},
                                             "text_encoder": T5, "vae": VAE},
                              Settings(height=h, width=w, steps=steps, guidance_scale=guidance,
                                       max_sequence_length=length, negative_prompt=negative))
    where = f"seed {SEED}: {h}×{w}, {steps} steps, guidance {guidance}, {length} tokens, negative {negative}"
    assert rec.planned_calls(report) == dict(rec.calls), where
    assert rec.shapes["text_encoder"] == {(length,)}, where
    assert rec.shapes["transformer"] == {((h // 16) * (w // 16), 16, length)}, where
    assert rec.shapes["vae.decode"] == {(4, h // 8, w // 8)}, where
